//! A tick stepped with 2 threads (`lockgrid_host::threads::Threads`)
//! allocates nothing in steady state, like the serial one: a counting
//! global allocator, which sees every thread's allocations, watches a
//! uniform walk of a few thousand observers, in radius and in grid mode,
//! stepped through `World::step_with` and `World::step_in_parts` on one of
//! the pool's threads (`Threads::run`, as `lockgrid serve` and the aoi
//! bench step). The same ticks joined from outside the pool give the same
//! events and digests, and allocate at most a block of the pool's shared
//! queue every 63 joins, as `lockgrid_host::threads` says.
//!
//! This binary runs its check from `main`, without the test harness
//! (`harness = false` in `Cargo.toml`), so that no other thread allocates
//! while it measures: the harness's thread does, for example to say that a
//! test has run for over 60 seconds.

use std::alloc::System;
use std::sync::atomic::{AtomicU64, Ordering};

use lockgrid_host::threads::Threads;
use lockgrid_kernel::coverage::Path;
use lockgrid_kernel::{
    Command, Config, CountingSink, Fix, Fork, Move, Pos, Spawn, TickReport, Visibility, World,
};
use lockgrid_tests::gen::Rng;
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const ENTITIES: u64 = 3000;
/// The world's side, in units: 11 × 11 cells of 100, about 400 square
/// units an entity, as in the aoi bench's uniform workloads.
const SIDE: i64 = 1100;
const WARM_UP: usize = 20;
const MEASURED: usize = 60;

/// Every entity an observer of radius 100 anywhere in the world, each
/// stepping up to 5 units per axis every tick and one a tick jumping
/// anywhere: about 80 others in each view in radius mode and 200 in grid
/// mode, every view streamed every tick, so every tick's parallel parts
/// run.
fn uniform_walk(seed: u64, ticks: usize, visibility: Visibility) -> (Config, Vec<Vec<Command>>) {
    let config = Config {
        origin: Pos::from_ints(0, 0),
        cell_size: Fix::from_num(100),
        width_cells: (SIDE / 100) as u32,
        height_cells: (SIDE / 100) as u32,
        visibility,
        max_entities: ENTITIES as u32,
        max_observers: ENTITIES as u32,
        max_view: 512,
        ..Config::default()
    };
    let inside = |c: i64| Fix::from_num(c.clamp(0, SIDE - 1));
    let anywhere = |rng: &mut Rng| {
        Pos::new(
            inside(rng.below(SIDE as u64) as i64),
            inside(rng.below(SIDE as u64) as i64),
        )
    };
    let mut rng = Rng::new(seed);
    let mut pos: Vec<Pos> = (0..ENTITIES).map(|_| anywhere(&mut rng)).collect();
    let mut out = vec![(0..ENTITIES)
        .map(|id| {
            Command::Spawn(Spawn {
                observer: true,
                radius: Fix::from_num(100),
                ..Spawn::npc(id, pos[id as usize])
            })
        })
        .collect::<Vec<_>>()];
    for _ in 1..ticks {
        let jumper = rng.below(ENTITIES) as usize;
        let mut commands = Vec::with_capacity(ENTITIES as usize);
        for (i, p) in pos.iter_mut().enumerate() {
            *p = if i == jumper {
                anywhere(&mut rng)
            } else {
                let mut step = |c: Fix| inside(c.to_num::<i64>() + rng.below(11) as i64 - 5);
                Pos::new(step(p.x), step(p.y))
            };
            commands.push(Command::Move(Move {
                id: i as u64,
                pos: *p,
                dir: rng.next_u64() as u16,
                speed: Fix::ONE,
            }));
        }
        out.push(commands);
    }
    (config, out)
}

/// The threads, counting the joins that hand over more than one task.
struct Counted {
    threads: Threads,
    joins: AtomicU64,
}

impl Fork for Counted {
    fn width(&self) -> usize {
        self.threads.width()
    }

    fn join(&self, tasks: &mut [&mut (dyn FnMut() + Send)]) {
        if tasks.len() > 1 {
            self.joins.fetch_add(1, Ordering::Relaxed);
        }
        self.threads.join(tasks);
    }
}

/// How a world is stepped.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Step {
    /// `World::step_with`: every event to the one sink.
    With,
    /// `World::step_in_parts`, a part per task.
    InParts,
}

/// Steps one world through `ticks` with `fork`; returns each tick's report
/// and allocations (allocations, reallocations and frees, all threads).
fn step_all(
    config: Config,
    ticks: &[Vec<Command>],
    step: Step,
    fork: &Counted,
) -> (World, Vec<(TickReport, u64)>) {
    let mut world = World::new(config).expect("the walk's config is valid");
    assert_eq!(world.reserve_width(2), 2);
    let (mut sink, mut parts) = (CountingSink::default(), [CountingSink::default(); 2]);
    let mut out = Vec::with_capacity(ticks.len());
    for commands in ticks {
        let region = Region::new(GLOBAL);
        let report = match step {
            Step::With => world.step_with(commands, &mut sink, fork),
            Step::InParts => world.step_in_parts(commands, &mut sink, &mut parts, fork),
        };
        let c = region.change();
        out.push((
            report,
            (c.allocations + c.reallocations + c.deallocations) as u64,
        ));
    }
    let sent = sink.count + parts.iter().map(|p| p.count).sum::<u64>();
    assert_eq!(sent, out.iter().map(|(r, _)| r.events).sum::<u64>());
    assert!(
        step == Step::With || parts.iter().all(|p| p.count > 0),
        "{step:?}: a part received no event"
    );
    (world, out)
}

fn two_threads_step_without_allocating() {
    // The counter itself works, on another thread too.
    let region = Region::new(GLOBAL);
    std::thread::scope(|s| {
        s.spawn(|| drop(std::hint::black_box(vec![1u8; 64])));
    });
    assert!(region.change().allocations >= 1);

    let fork = Counted {
        threads: Threads::new(2),
        joins: AtomicU64::new(0),
    };
    for visibility in [Visibility::Radius, Visibility::Grid] {
        let (config, ticks) = uniform_walk(0x5eed, WARM_UP + MEASURED, visibility);
        let mut serial = World::new(config).expect("the walk's config is valid");
        let want: Vec<TickReport> = ticks
            .iter()
            .map(|c| serial.step(c, &mut CountingSink::default()))
            .collect();
        for step in [Step::With, Step::InParts] {
            let what = format!("{visibility:?}, {step:?}");
            // On the pool: nothing allocated after the warm-up.
            let joins = fork.joins.load(Ordering::Relaxed);
            let (world, inside) = fork.threads.run(|| step_all(config, &ticks, step, &fork));
            let joined = fork.joins.load(Ordering::Relaxed) - joins;
            for (t, (report, allocs)) in inside.iter().enumerate().skip(WARM_UP) {
                assert_eq!(*allocs, 0, "{what}: tick {} allocated", t + 1);
                assert!(report.events > ENTITIES * 10, "{what}: tick {} idle", t + 1);
            }
            // Every tick split its views, and the radius-mode ones swept.
            assert!(
                joined >= ticks.len() as u64 - 1,
                "{what}: {joined} joins in {} ticks",
                ticks.len()
            );
            if visibility == Visibility::Radius {
                if let Some(counts) = world.path_counts() {
                    assert!(counts.get(Path::SweepSwept) > 0, "{what}: never swept");
                }
            }
            // From outside the pool: the same ticks, and at most a block
            // of the shared queue every 63 joins (each block is freed
            // later: two per block).
            let joins = fork.joins.load(Ordering::Relaxed);
            let (_, outside) = step_all(config, &ticks, step, &fork);
            let joined = fork.joins.load(Ordering::Relaxed) - joins;
            let allocs: u64 = outside.iter().skip(WARM_UP).map(|(_, a)| a).sum();
            assert!(
                allocs <= 2 * (joined / 63 + 1),
                "{what}: {allocs} allocations in {joined} joins from outside the pool"
            );
            for (t, (((a, _), (b, _)), want)) in inside.iter().zip(&outside).zip(&want).enumerate()
            {
                assert_eq!(a, want, "{what}: tick {} on the pool", t + 1);
                assert_eq!(b, want, "{what}: tick {} from outside", t + 1);
            }
            println!(
                "{what}: {MEASURED} ticks on the pool allocated nothing; from outside, {allocs} allocations in {joined} joins"
            );
        }
    }
}

/// Run without the test harness: see the module docs.
fn main() {
    two_threads_step_without_allocating();
    println!("two_threads_step_without_allocating: ok");
}
