//! Untrusted input never panics the kernel: arbitrary command streams (any
//! id, any coordinate including `Fix::MIN`/`Fix::MAX`, any speed and radius)
//! against arbitrary configs, valid ones at the limits included.

use lockgrid_kernel::{Command, Config, Event, World};
use lockgrid_tests::wild;
use proptest::prelude::*;

fn drive(config: Config, ticks: &[Vec<Command>]) -> Result<(), TestCaseError> {
    let Ok(mut world) = World::new(config) else {
        return Ok(());
    };
    let mut events = Vec::new();
    for commands in ticks {
        events.clear();
        let report = world.step(commands, &mut events);
        prop_assert_eq!(report.events, events.len() as u64);
        prop_assert!(world.len() <= config.max_entities);
        let observers = world.entities().filter(|e| e.observer).count() as u32;
        prop_assert!(observers <= config.max_observers);
        for e in world.entities() {
            prop_assert!(config.cell_of(e.pos).is_some(), "{:?} outside the world", e);
            if let Some(view) = world.view(e.id) {
                prop_assert!(view.count() as u32 <= config.max_view);
            }
        }
        let rejected = events
            .iter()
            .filter(|e| matches!(e, Event::Rejected { .. }))
            .count();
        prop_assert!(rejected <= commands.len());
    }
    // Whatever state the stream left, it snapshots and restores.
    let snapshot = world.snapshot();
    let restored = World::restore(&snapshot);
    prop_assert!(restored.is_ok(), "{:?}", restored.err());
    Ok(())
}

proptest! {
    #![proptest_config(lockgrid_tests::cases(256))]

    #[test]
    fn arbitrary_commands_in_arbitrary_worlds_never_panic(
        config in wild::wild_config(),
        ticks in prop::collection::vec(prop::collection::vec(wild::wild_command(), 0..12), 1..8),
    ) {
        drive(config, &ticks)?;
    }

    #[test]
    fn arbitrary_commands_in_extreme_worlds_never_panic(
        which in any::<prop::sample::Index>(),
        ticks in prop::collection::vec(prop::collection::vec(wild::wild_command(), 0..12), 1..8),
    ) {
        let worlds = wild::extreme_configs();
        drive(worlds[which.index(worlds.len())], &ticks)?;
    }
}

#[test]
fn extreme_worlds_build() {
    for c in wild::extreme_configs() {
        assert!(World::new(c).is_ok(), "{c:?}");
    }
}
