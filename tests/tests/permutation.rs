//! Order independence: within a tick, commands about different entities may
//! come in any order. Shuffling them changes no view event and no digest;
//! only the order of the rejections follows the input.
//!
//! Capacities are roomy here on purpose: with a full world, which of two
//! spawns gets `capacity` does depend on their order.

use lockgrid_kernel::{Event, World};
use lockgrid_tests::check;
use lockgrid_tests::gen::{self, Rng, Shape};
use proptest::prelude::*;

const ROOMY: Shape = Shape {
    ticks: 16,
    commands: 16,
    ids: 12,
    roomy: true,
    ..Shape::DEFAULT
};

fn split(events: &[Event]) -> (Vec<Event>, Vec<Event>) {
    let (mut rejected, view): (Vec<Event>, Vec<Event>) = events
        .iter()
        .partition(|e| matches!(e, Event::Rejected { .. }));
    rejected.sort_by_key(|e| format!("{e:?}"));
    (rejected, view)
}

proptest! {
    #![proptest_config(lockgrid_tests::cases(384))]

    #[test]
    fn shuffling_commands_of_different_entities_changes_nothing(
        s in gen::scenario(ROOMY),
        seed in any::<u64>(),
    ) {
        let mut rng = Rng::new(seed);
        let mut a = World::new(s.config).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut b = World::new(s.config).map_err(|e| TestCaseError::fail(e.to_string()))?;
        for (i, commands) in s.ticks.iter().enumerate() {
            let shuffled = gen::shuffle_across_entities(commands, &mut rng);
            let x = check::step(&mut a, commands).map_err(TestCaseError::fail)?;
            let y = check::step(&mut b, &shuffled).map_err(TestCaseError::fail)?;
            let (xr, xv) = split(&x.events);
            let (yr, yv) = split(&y.events);
            prop_assert_eq!(xv, yv, "tick {}: view events differ\n{:?}\n{:?}", i + 1, commands, shuffled);
            prop_assert_eq!(xr, yr, "tick {}: different rejections", i + 1);
            prop_assert_eq!(x.digest, y.digest, "tick {}", i + 1);
        }
    }
}
