//! Minimal cases of snapshots that `World::restore` once accepted although
//! no run of the kernel could have produced them, found by the
//! forged-snapshot property in `restore_untrusted.rs`. Their digests are
//! recomputed with the documented algorithm, so only the kernel's own
//! validation can catch them.
//! Either refusing them or continuing consistently is acceptable; panicking
//! or keeping dangling state is not.

use lockgrid_kernel::{
    Command, Config, EntitySnapshot, EntityState, Fix, Motion, Pos, Sent, Snapshot, World,
};
use lockgrid_tests::digest;

fn entity(id: u64, x: i32, observer: bool, view: Vec<u64>) -> EntitySnapshot {
    let pos = Pos::from_ints(x, 0);
    EntitySnapshot {
        state: EntityState {
            id,
            pos,
            dir: 0,
            speed: Fix::ZERO,
            observer,
            radius: Fix::ZERO,
            layers: 1,
            interest: u32::MAX,
        },
        sent: Some(Sent {
            motion: Motion {
                pos,
                dir: 0,
                speed: Fix::ZERO,
            },
            tick: 1,
        }),
        view,
    }
}

fn sealed(config: Config, tick: u64, entities: Vec<EntitySnapshot>) -> Snapshot {
    let mut s = Snapshot {
        config,
        tick,
        digest: 0,
        entities,
    };
    s.digest = digest::of_snapshot(&s);
    s
}

/// The tick counter cannot advance past `u64::MAX`: restoring at that tick
/// must be refused, or the next step must not panic (it once overflowed).
#[test]
fn a_snapshot_at_the_last_tick_never_panics_the_next_step() {
    let s = sealed(Config::default(), u64::MAX, Vec::new());
    if let Ok(mut world) = World::restore(&s) {
        let mut events = Vec::new();
        world.step(&[], &mut events);
    }
}

/// Grid mode, 4 × 1 cells: observer 4 in cell 0 claims to see NPC 0 in
/// cell 3, outside its nine cells, while observer 1 in cell 2 really sees
/// it. Accepting this let NPC 0's despawn reach only observer 1: observer 4
/// kept the dead id in its view, and the world's next snapshot was refused.
#[test]
fn a_view_beyond_the_observers_reach_is_refused_or_left_cleanly() {
    let config = Config {
        width_cells: 4,
        height_cells: 1,
        max_entities: 8,
        max_observers: 4,
        max_view: 1,
        ..Config::default()
    };
    assert_eq!(config.validate(), Ok(()));
    let s = sealed(
        config,
        3,
        vec![
            entity(0, 399, false, vec![]),
            entity(1, 200, true, vec![0]),
            entity(4, 0, true, vec![0]),
        ],
    );
    let mut world = match World::restore(&s) {
        Ok(world) => world,
        Err(lockgrid_kernel::RestoreError::View(_)) => return,
        Err(e) => panic!("refused for an unrelated reason: {e}"),
    };
    let mut events = Vec::new();
    world.step(&[Command::Despawn { id: 0 }], &mut events);
    let view: Vec<u64> = world.view(4).expect("4 is a live observer").collect();
    assert!(
        view.is_empty(),
        "observer 4 still sees despawned 0: {view:?}, events {events:?}"
    );
    assert!(World::restore(&world.snapshot()).is_ok());
}

/// One cell: observer 4 sees nothing although NPC 3 stands next to it.
/// Ticks trust views to be the rule applied, so despawning NPC 3 once sent
/// observer 4 a Leave for a subject it never saw (and underflowed the
/// digest's pair count). The view is refused instead.
#[test]
fn a_view_missing_a_visible_subject_is_refused() {
    let config = Config {
        width_cells: 1,
        height_cells: 1,
        max_entities: 9,
        max_observers: 4,
        max_view: 1,
        ..Config::default()
    };
    let s = sealed(
        config,
        2,
        vec![entity(3, 0, false, vec![]), entity(4, 0, true, vec![])],
    );
    assert_eq!(
        World::restore(&s).err(),
        Some(lockgrid_kernel::RestoreError::View(4))
    );
    // The same with the view the rule gives is restored.
    let s = sealed(
        config,
        2,
        vec![entity(3, 0, false, vec![]), entity(4, 0, true, vec![3])],
    );
    assert!(World::restore(&s).is_ok());
}
