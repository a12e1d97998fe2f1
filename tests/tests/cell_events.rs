//! Cell-addressed events, checked over random scenarios in both visibility
//! modes, tick by tick:
//! * every cell's membership, rebuilt from the cell events alone, equals
//!   the world's;
//! * the events equal those derived from the brute-force oracle (its
//!   incarnations, cells and independently kept throttle records), in the
//!   documented `(kind, entity, cell)` order;
//! * after warm-up, deriving them allocates nothing.
//!
//! This binary holds a single test so nothing else allocates while it
//! measures.

use std::alloc::System;
use std::collections::{BTreeMap, BTreeSet};

use lockgrid_kernel::{Cell, CellEvent, CellEvents, Config, EntityId, Event, Visibility, World};
use lockgrid_tests::gen::{self, Shape};
use lockgrid_tests::oracle::Oracle;
use proptest::test_runner::{TestCaseError, TestRunner};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Few ids over many ticks: despawns and respawns of the same ids, walks
/// across borders and through throttle windows.
const LONG: Shape = Shape {
    ticks: 80,
    commands: 5,
    ids: 5,
    ..Shape::DEFAULT
};

/// Many commands per tick over every id: repeated commands of one id,
/// capacity churn.
const CROWDED: Shape = Shape {
    ticks: 10,
    commands: 30,
    ids: 16,
    ..Shape::DEFAULT
};

/// Membership of every cell, as a subscriber of every cell would know it.
type Cells = BTreeMap<Cell, BTreeSet<EntityId>>;

fn cells_of_world(world: &World) -> Cells {
    let mut cells = Cells::new();
    for e in world.entities() {
        let cell = world
            .config()
            .cell_of(e.pos)
            .expect("live entities are inside");
        cells.entry(cell).or_default().insert(e.id);
    }
    cells
}

/// Applies one tick's cell events to `cells`, refusing any that does not
/// fit the membership it has: a leave of a non-member, an enter of a member
/// (of that cell or any other), an update of a non-member.
fn apply(cells: &mut Cells, events: &[CellEvent]) -> Result<(), String> {
    for event in events {
        let (entity, cell) = (event.entity(), event.cell());
        match event {
            CellEvent::Leave { .. } => {
                let members = cells.entry(cell).or_default();
                if !members.remove(&entity) {
                    return Err(format!("{event:?}: not in the cell"));
                }
                if members.is_empty() {
                    cells.remove(&cell);
                }
            }
            CellEvent::Enter { .. } => {
                if cells.values().any(|m| m.contains(&entity)) {
                    return Err(format!("{event:?}: already in a cell"));
                }
                cells.entry(cell).or_default().insert(entity);
            }
            CellEvent::Update { .. } => {
                if !cells.get(&cell).is_some_and(|m| m.contains(&entity)) {
                    return Err(format!("{event:?}: not in the cell"));
                }
            }
        }
    }
    Ok(())
}

/// What the oracle knows of a live entity at a tick's end.
#[derive(Clone, Copy)]
struct Known {
    incarnation: u64,
    cell: Cell,
    sent_tick: Option<u64>,
}

fn known(oracle: &Oracle, config: &Config) -> BTreeMap<EntityId, (Known, CellEvent)> {
    let mut out = BTreeMap::new();
    for e in oracle.entities() {
        let cell = config
            .cell_of(e.motion.pos)
            .expect("live entities are inside");
        let known = Known {
            incarnation: e.incarnation,
            cell,
            sent_tick: e.sent().map(|(_, t)| t),
        };
        let enter = CellEvent::Enter {
            entity: e.id,
            cell,
            from: None,
            pos: e.motion.pos,
            dir: e.motion.dir,
            speed: e.motion.speed,
            layers: e.layers,
        };
        out.insert(e.id, (known, enter));
    }
    out
}

/// The cell events of tick `t` as the contract defines them, from the
/// oracle's state before and after it.
fn expected(
    before: &BTreeMap<EntityId, (Known, CellEvent)>,
    after: &BTreeMap<EntityId, (Known, CellEvent)>,
    t: u64,
) -> Vec<CellEvent> {
    let mut out = Vec::new();
    let ids: BTreeSet<EntityId> = before.keys().chain(after.keys()).copied().collect();
    for id in ids {
        let leave = |cell, to| CellEvent::Leave {
            entity: id,
            cell,
            to,
        };
        match (before.get(&id), after.get(&id)) {
            (Some((was, _)), Some((now, enter))) if was.incarnation == now.incarnation => {
                if was.cell != now.cell {
                    out.push(leave(was.cell, Some(now.cell)));
                    let mut crossed = *enter;
                    if let CellEvent::Enter { from, .. } = &mut crossed {
                        *from = Some(was.cell);
                    }
                    out.push(crossed);
                } else if now.sent_tick == Some(t) {
                    let CellEvent::Enter {
                        pos, dir, speed, ..
                    } = *enter
                    else {
                        unreachable!()
                    };
                    out.push(CellEvent::Update {
                        entity: id,
                        cell: now.cell,
                        pos,
                        dir,
                        speed,
                    });
                }
            }
            (was, now) => {
                if let Some((was, _)) = was {
                    out.push(leave(was.cell, None));
                }
                if let Some((_, enter)) = now {
                    out.push(*enter);
                }
            }
        }
    }
    out.sort_by_key(CellEvent::order_key);
    out
}

fn check(s: &gen::Scenario) -> Result<(), String> {
    let mut world = World::new(s.config).map_err(|e| e.to_string())?;
    let mut tracker = CellEvents::new(&world);
    let mut oracle = Oracle::new(s.config);
    let mut events: Vec<Event> = Vec::new();
    let mut cells = Cells::new();
    for (i, commands) in s.ticks.iter().enumerate() {
        let t = i as u64 + 1;
        let before = known(&oracle, &s.config);
        oracle.step(commands);
        let after = known(&oracle, &s.config);
        events.clear();
        tracker.step(&mut world, commands, &mut events);
        let got = tracker.events();

        let keys: Vec<_> = got.iter().map(CellEvent::order_key).collect();
        if !keys.windows(2).all(|w| w[0] < w[1]) {
            return Err(format!(
                "tick {t}: not in strict (kind, entity, cell) order: {keys:?}"
            ));
        }
        apply(&mut cells, got).map_err(|e| format!("tick {t}: {e}"))?;
        let world_cells = cells_of_world(&world);
        if cells != world_cells {
            return Err(format!(
                "tick {t}: cells rebuilt from events {cells:?} != world {world_cells:?}"
            ));
        }
        let want = expected(&before, &after, t);
        if got != want.as_slice() {
            return Err(format!("tick {t}: got {got:?}\nwant {want:?}"));
        }
    }
    Ok(())
}

fn property(runner: &mut TestRunner, shape: Shape) {
    runner
        .run(&gen::scenario(shape), |s| {
            check(&s).map_err(TestCaseError::fail)
        })
        .unwrap_or_else(|e| panic!("{shape:?}: {e}"));
}

/// Steps a busy deterministic scenario; after warm-up, no tick allocates.
fn steady_state_is_allocation_free(s: &gen::Scenario) -> u64 {
    let mut world = World::new(s.config).expect("valid");
    let mut tracker = CellEvents::new(&world);
    let mut events: Vec<Event> = Vec::with_capacity(1 << 16);
    let mut cell_events = 0;
    for (i, commands) in s.ticks.iter().enumerate() {
        events.clear();
        let region = Region::new(GLOBAL);
        tracker.step(&mut world, commands, &mut events);
        let stats = region.change();
        if i >= 100 {
            assert_eq!(
                (stats.allocations, stats.reallocations),
                (0, 0),
                "tick {} allocated: {stats:?}",
                i + 1
            );
            cell_events += tracker.events().len() as u64;
        }
    }
    cell_events
}

#[test]
fn cell_events_rebuild_every_cell_and_match_the_oracle() {
    let mut runner = TestRunner::new(lockgrid_tests::cases(256));
    for mode in [Visibility::Grid, Visibility::Radius] {
        for shape in [Shape::DEFAULT, LONG, CROWDED] {
            property(
                &mut runner,
                Shape {
                    mode: Some(mode),
                    ..shape
                },
            );
        }
    }
    for mode in [Visibility::Grid, Visibility::Radius] {
        let busy = gen::busy(0x5eed, 120, mode);
        check(&busy).unwrap_or_else(|e| panic!("busy {mode:?}: {e}"));
        let town = gen::town(0x5eed, 60, mode, 0, 6, 24);
        check(&town).unwrap_or_else(|e| panic!("town {mode:?}: {e}"));
    }

    // The counter itself works: a visible allocation is seen.
    let region = Region::new(GLOBAL);
    let probe = std::hint::black_box(vec![1u8; 64]);
    assert!(region.change().allocations >= 1);
    drop(probe);
    for mode in [Visibility::Grid, Visibility::Radius] {
        let seen = steady_state_is_allocation_free(&gen::busy(0x5eed, 1100, mode));
        // The scenario must really move things across cells, or this proves nothing.
        assert!(seen > 1000 * 50, "{mode:?}: only {seen} cell events");
    }
}
