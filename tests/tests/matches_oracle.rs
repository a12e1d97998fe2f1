//! Random scenarios in both visibility modes agree with the brute-force
//! oracle tick by tick: events, order, views (queried and rebuilt from the
//! event stream), entity states and throttle records.

use lockgrid_kernel::Visibility;
use lockgrid_tests::gen::{self, Shape};
use lockgrid_tests::{check, wild};
use proptest::prelude::*;

const GRID: Shape = Shape {
    mode: Some(Visibility::Grid),
    ..Shape::DEFAULT
};

const RADIUS: Shape = Shape {
    mode: Some(Visibility::Radius),
    ..Shape::DEFAULT
};

/// Few ids and many ticks: lots of despawn/respawn of the same ids and long
/// walks through hysteresis bands and throttle windows.
const LONG: Shape = Shape {
    ticks: 80,
    commands: 5,
    ids: 5,
    ..Shape::DEFAULT
};

/// Many commands per tick over every id: crowds, culling, capacity churn.
const CROWDED: Shape = Shape {
    ticks: 10,
    commands: 30,
    ids: 16,
    ..Shape::DEFAULT
};

proptest! {
    #![proptest_config(lockgrid_tests::cases(384))]

    #[test]
    fn grid_mode_matches_oracle(s in gen::scenario(GRID)) {
        check::against_oracle(&s).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn radius_mode_matches_oracle(s in gen::scenario(RADIUS)) {
        check::against_oracle(&s).map_err(TestCaseError::fail)?;
    }
}

proptest! {
    #![proptest_config(lockgrid_tests::cases(256))]

    #[test]
    fn long_runs_with_few_ids_match_oracle(s in gen::scenario(LONG)) {
        check::against_oracle(&s).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn crowded_ticks_match_oracle(s in gen::scenario(CROWDED)) {
        check::against_oracle(&s).map_err(TestCaseError::fail)?;
    }
}

/// Bigger worlds (up to 40 × 40 cells, radii up to 4 cells) with up to 64
/// ids, so rings, crowds and culling happen at more than toy scale.
const MEDIUM: Shape = Shape {
    ticks: 20,
    commands: 48,
    ids: 64,
    cells: 40,
    roomy: true,
    mode: None,
};

proptest! {
    #![proptest_config(lockgrid_tests::cases(64))]

    #[test]
    fn medium_worlds_match_oracle(s in gen::scenario(MEDIUM)) {
        check::against_oracle(&s).map_err(TestCaseError::fail)?;
    }
}

proptest! {
    #![proptest_config(lockgrid_tests::cases(256))]

    /// Worlds at the limits (±2^45 extents, one-raw-unit cells, maximal
    /// radius and hysteresis) with arbitrary commands: squared distances
    /// near 2^125 must still compare exactly.
    #[test]
    fn extreme_worlds_match_oracle(
        which in any::<prop::sample::Index>(),
        ticks in prop::collection::vec(prop::collection::vec(wild::wild_command(), 0..10), 1..10),
    ) {
        let worlds = wild::extreme_configs();
        let s = gen::Scenario { config: worlds[which.index(worlds.len())], ticks };
        check::against_oracle(&s).map_err(TestCaseError::fail)?;
    }
}

/// Hundreds of entities, a crowd beyond `max_view`, teleports and respawn
/// churn (the allocation test's workload) agree with the oracle.
#[test]
fn busy_world_matches_oracle() {
    for visibility in [Visibility::Radius, Visibility::Grid] {
        let s = gen::busy(7, 40, visibility);
        if let Err(e) = check::against_oracle(&s) {
            panic!("{visibility:?}: {e}");
        }
    }
}

/// Crowds at rest, larger than `max_view`: full views follow the few steps
/// in them around their cut-off instead of ranking the crowd again, until
/// the crowd has drifted far enough that they must; in both modes, with
/// and without hysteresis.
#[test]
fn towns_match_oracle() {
    for visibility in [Visibility::Radius, Visibility::Grid] {
        for hysteresis in [0, 25] {
            for (seed, movers) in [(11, 1), (12, 6), (13, 24)] {
                let s = gen::town(seed, 80, visibility, hysteresis, movers);
                if let Err(e) = check::against_oracle(&s) {
                    panic!("{visibility:?}, hysteresis {hysteresis}, {movers} movers: {e}");
                }
            }
        }
    }
}

/// Calm worlds, where most views are updated from the few changed subjects
/// around them instead of rebuilt: few movers, and enough movers that the
/// tick's pairs overflow their fixed room and every affected view is
/// rebuilt instead.
#[test]
fn calm_worlds_match_oracle() {
    for visibility in [Visibility::Radius, Visibility::Grid] {
        // With full views, and with none (grid mode then pairs only the
        // subjects that cross a cell border).
        for max_view in [32, 256] {
            for (seed, movers) in [(1, 1), (2, 4), (3, 12), (4, 40), (5, 150)] {
                let s = gen::calm(seed, 60, visibility, movers, max_view);
                if let Err(e) = check::against_oracle(&s) {
                    panic!("{visibility:?}, max_view {max_view}, {movers} movers: {e}");
                }
            }
        }
        if let Err(e) = check::against_oracle(&gen::swarm(6, 30, visibility)) {
            panic!("{visibility:?} swarm: {e}");
        }
    }
}
