//! The digest is the algorithm written in the kernel's crate docs: an
//! independent implementation over the world's public state (entities,
//! throttle records, views) reproduces every tick's digest, so a tool in
//! another language can compute it too.

use lockgrid_kernel::{Config, World};
use lockgrid_tests::gen::{self, Shape};
use lockgrid_tests::{check, digest};
use proptest::prelude::*;

#[test]
fn a_fresh_world_has_the_documented_digest() {
    let world = World::new(Config::default()).unwrap();
    assert_eq!(world.digest(), digest::of_world(&world));
}

proptest! {
    #![proptest_config(lockgrid_tests::cases(128))]

    #[test]
    fn every_tick_has_the_documented_digest(s in gen::scenario(Shape::DEFAULT)) {
        let mut world = check::world(&s).map_err(TestCaseError::fail)?;
        for (i, commands) in s.ticks.iter().enumerate() {
            let tick = check::step(&mut world, commands).map_err(TestCaseError::fail)?;
            prop_assert_eq!(
                format!("{:016x}", tick.digest),
                format!("{:016x}", digest::of_world(&world)),
                "tick {}", i + 1
            );
            let snapshot = world.snapshot();
            prop_assert_eq!(snapshot.digest, digest::of_snapshot(&snapshot));
        }
    }
}
