//! Random scenarios in both visibility modes agree with the brute-force
//! oracle tick by tick: events, order, views (queried and rebuilt from the
//! event stream), entity states and throttle records.

use lockgrid_kernel::{Command, Config, Fix, Move, Pos, Spawn, Visibility};
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

/// Panics with `what` and the first difference unless scenario `s` agrees
/// with the oracle.
fn agrees(s: &gen::Scenario, what: std::fmt::Arguments) {
    if let Err(e) = check::against_oracle(s) {
        panic!("{what}: {e}");
    }
}

/// [`agrees`], and how many ticks the radius sweep kept views in, so that
/// a test of the sweep can tell it really ran.
fn agrees_swept(s: &gen::Scenario, what: std::fmt::Arguments) -> u64 {
    let (_, world) = check::world_against_oracle(s).unwrap_or_else(|e| panic!("{what}: {e}"));
    let paths = world.path_counts().expect("debug builds count paths");
    paths.get(lockgrid_kernel::coverage::Path::SweepSwept)
}

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
        agrees(&s, format_args!("{visibility:?}"));
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
                let s = gen::town(seed, 80, visibility, hysteresis, movers, 24);
                agrees(
                    &s,
                    format_args!("{visibility:?}, hysteresis {hysteresis}, {movers} movers"),
                );
            }
        }
    }
}

/// Towns under a throttle that never makes an Update due, as the bench's
/// comparable row runs: subjects are paired only for the views they
/// enter, leave or re-rank, and in grid mode one that stayed in its cell
/// only with the observers of cells holding full views.
#[test]
fn towns_with_rare_updates_match_oracle() {
    for visibility in [Visibility::Radius, Visibility::Grid] {
        for (seed, movers, max_view) in [(21, 6, 24), (22, 24, 8), (23, 40, 16)] {
            let mut s = gen::town(seed, 60, visibility, 0, movers, max_view);
            s.config.update_interval = u64::MAX;
            s.config.move_epsilon = Fix::MAX;
            s.config.dir_epsilon = 32768;
            agrees(
                &s,
                format_args!("{visibility:?}, {movers} movers, views of {max_view}"),
            );
        }
    }
}

proptest! {
    #![proptest_config(lockgrid_tests::cases(8))]

    /// Towns of any view size, hysteresis and stir.
    #[test]
    fn random_towns_match_oracle(
        seed in any::<u64>(),
        radius in any::<bool>(),
        hysteresis in prop_oneof![Just(0), 0..40i32],
        movers in 1..30u64,
        max_view in 1..48u32,
    ) {
        let visibility = if radius { Visibility::Radius } else { Visibility::Grid };
        let s = gen::town(seed, 50, visibility, hysteresis, movers, max_view);
        check::against_oracle(&s).map_err(TestCaseError::fail)?;
    }
}

/// A culled view whose crowd walks off in one calm tick: its margin runs
/// out, the view is ranked again with too few left to cull and keeps no
/// margin (none is left anywhere), and a subject arriving later between
/// the old margin's end and the enter distance must still be seen.
#[test]
fn a_crowd_that_walks_off_leaves_no_margin_behind() {
    for visibility in [Visibility::Radius, Visibility::Grid] {
        let config = Config {
            origin: Pos::from_ints(0, 0),
            cell_size: Fix::from_num(100),
            width_cells: 8,
            height_cells: 8,
            visibility,
            max_entities: 64,
            max_observers: 64,
            max_view: 3,
            ..Config::default()
        };
        let observer = |id, pos| Spawn {
            observer: true,
            radius: Fix::from_num(100),
            ..Spawn::npc(id, pos)
        };
        let step = |id, x, y| {
            Command::Move(Move {
                id,
                pos: Pos::from_ints(x, y),
                dir: 0,
                speed: Fix::ZERO,
            })
        };
        // Tick 1: the observer, a crowd of 12 in a row 10 to 65 units
        // away, a latecomer far off, and 30 idle observers elsewhere so
        // that later ticks are calm.
        let mut first = vec![Command::Spawn(observer(1, Pos::from_ints(410, 410)))];
        for k in 0..12 {
            let pos = Pos::from_ints(420 + 5 * k, 410);
            first.push(Command::Spawn(Spawn::npc(10 + k as u64, pos)));
        }
        first.push(Command::Spawn(Spawn::npc(30, Pos::from_ints(750, 750))));
        for k in 0..30 {
            first.push(Command::Spawn(observer(
                40 + k,
                Pos::from_ints(20 + 2 * k as i32, 20),
            )));
        }
        let ticks = vec![
            first,
            // The observer steps: its crowd is ranked again, in a calm tick.
            vec![step(1, 411, 410)],
            // All but one of the crowd walk off: too few are left to fill
            // the view from its margin, and too few to need culling.
            (11..22)
                .map(|id| step(id, 750, 100 + 5 * id as i32))
                .collect(),
            // The latecomer arrives 70 units away: it must enter.
            vec![step(30, 481, 410)],
            vec![step(30, 482, 410)],
        ];
        let s = gen::Scenario { config, ticks };
        agrees(&s, format_args!("{visibility:?}"));
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
                agrees(
                    &s,
                    format_args!("{visibility:?}, max_view {max_view}, {movers} movers"),
                );
            }
        }
        agrees(
            &gen::swarm(6, 30, visibility),
            format_args!("{visibility:?} swarm"),
        );
    }
}

/// Dense worlds where everything walks: grid mode pairs the few subjects
/// that cross a cell border, edits most views several times over and
/// streams every view, edited or not, into fresh storage.
#[test]
fn dense_walks_match_oracle() {
    for visibility in [Visibility::Grid, Visibility::Radius] {
        let s = gen::dense_walk(31, 12, visibility);
        agrees(&s, format_args!("{visibility:?}"));
    }
}

/// Worlds where nearly everything steps a little every tick, in radius
/// mode without hysteresis: views are edited by the pairs that crossed a
/// radius, found in one sweep, except where a view is or would become
/// full, or its observer's interest misses a layer some subject lacks, or
/// a jump, despawn or respawn makes the tick rebuild every view.
#[test]
fn walking_worlds_match_oracle() {
    for (seed, max_view) in [(41, 256), (42, 30), (43, 12), (44, 256)] {
        let s = gen::walkers(seed, 40, max_view);
        agrees(&s, format_args!("seed {seed}, max_view {max_view}"));
        let s = gen::walkers_settling(seed, 40, max_view);
        agrees(
            &s,
            format_args!("settling, seed {seed}, max_view {max_view}"),
        );
    }
}

proptest! {
    #![proptest_config(lockgrid_tests::cases(24))]

    /// Walks the sweep keeps, under any band, spread over any number of
    /// layers, seen by observers of any interest (every layer, all but the
    /// last, the first alone, or a mask of their own), with one radius or
    /// the walkers' three, views of any size.
    #[test]
    fn walks_of_any_band_layers_and_interest_match_oracle(
        seed in any::<u64>(),
        band in prop_oneof![Just(0), 0..40i32],
        layers in 1..5u32,
        interest in 0..4u32,
        one_radius in any::<bool>(),
        max_view in prop_oneof![Just(256u32), 8..64u32],
    ) {
        let mut s = gen::walkers_settling(seed, 16, max_view);
        s.config.hysteresis = Fix::from_num(band);
        for command in s.ticks.iter_mut().flatten() {
            if let Command::Spawn(spawn) = command {
                spawn.layers = 1 << (spawn.id % u64::from(layers));
                spawn.interest = match interest {
                    0 => u32::MAX,
                    1 => !(1 << (layers - 1)),
                    2 => 1,
                    _ => (spawn.id as u32 % 15) + 1,
                };
                if one_radius {
                    spawn.radius = Fix::from_num(100);
                }
            }
        }
        check::against_oracle(&s).map_err(TestCaseError::fail)?;
    }
}

/// The same walks with a hysteresis band: the sweep also finds the pairs
/// that crossed a stay distance outward, and each view it edits says
/// whether a subject that stood in the band was visible. Bands narrower
/// and wider than a tick's steps; the sweep must really have run.
#[test]
fn walking_worlds_with_hysteresis_match_oracle() {
    let mut swept = 0;
    for (seed, max_view, band) in [(51, 256, 3), (52, 30, 10), (53, 256, 25), (54, 12, 10)] {
        for (what, s) in [
            ("walkers", gen::walkers(seed, 40, max_view)),
            ("settling", gen::walkers_settling(seed, 40, max_view)),
        ] {
            let config = Config {
                hysteresis: Fix::from_num(band),
                ..s.config
            };
            let s = gen::Scenario { config, ..s };
            swept += agrees_swept(&s, format_args!("{what}, seed {seed}, band {band}"));
        }
    }
    assert!(swept > 0, "the sweep never ran with a band");
}

/// A subject that despawns and comes back under the same id, in another
/// slot, in a tick the sweep keeps views with a hysteresis band: the views
/// that held it must see it leave and enter again, though both of its
/// slots carry its id (the view's check by id alone took the newcomer for
/// the one it held, and dropped its Enter).
#[test]
fn a_subject_back_under_its_id_reenters_swept_views_with_a_band() {
    let mut s = gen::walkers_settling(71, 30, 256);
    s.config.hysteresis = Fix::from_num(10);
    for tick in [8, 16, 24] {
        let commands = &mut s.ticks[tick];
        let Some(at) = commands.iter().position(|c| matches!(c, Command::Move(_))) else {
            continue;
        };
        let Command::Move(m) = commands[at] else {
            continue;
        };
        let back = Command::Spawn(Spawn::npc(m.id, m.pos));
        commands.splice(at..=at, [Command::Despawn { id: m.id }, back]);
    }
    assert!(agrees_swept(&s, format_args!("respawned under its id")) > 0);
}

/// Worlds whose entities share no layer, seen by observers interested in
/// every layer any of them has: views are still every subject around, so
/// the sweep keeps them and rebuilds skip the interest test. Then the
/// same with one entity in no layer, which no one may see.
#[test]
fn entities_in_layers_of_their_own_match_oracle() {
    let own_layers = |mut s: gen::Scenario, layerless: Option<u64>| {
        for command in s.ticks.iter_mut().flatten() {
            if let Command::Spawn(spawn) = command {
                // The walkers' 0b11 become 0b10: no bit left in common.
                spawn.layers = match spawn.layers {
                    0b11 => 0b10,
                    _ if spawn.id % 3 == 0 => 0b10,
                    other => other,
                };
                if Some(spawn.id) == layerless {
                    spawn.layers = 0;
                }
            }
        }
        s
    };
    let mut swept = 0;
    for layerless in [None, Some(7)] {
        for (seed, band) in [(61, 0), (62, 10)] {
            let mut s = own_layers(gen::walkers_settling(seed, 30, 256), layerless);
            s.config.hysteresis = Fix::from_num(band);
            let what = format_args!("walkers {seed}, band {band}, {layerless:?}");
            swept += agrees_swept(&s, what);
        }
        for visibility in [Visibility::Grid, Visibility::Radius] {
            let s = own_layers(gen::dense_walk(63, 6, visibility), layerless);
            agrees(&s, format_args!("dense walk {visibility:?}, {layerless:?}"));
        }
    }
    assert!(swept > 0, "the sweep never ran");
}

/// Walks where every observer's interest leaves out a layer a quarter of
/// the entities are in (hidden, say): the sweep finds crossings by
/// distance alone, and each view drops the subjects of no interest from
/// its changes. With and without a band, with one radius (where radii
/// differ, such views are rebuilt instead: the walkers' own radii).
#[test]
fn observers_blind_to_a_layer_match_oracle() {
    let mut swept = 0;
    for (seed, band, one_radius) in [(81, 0, true), (82, 10, true), (83, 0, false)] {
        let mut s = gen::walkers_settling(seed, 30, 256);
        s.config.hysteresis = Fix::from_num(band);
        for command in s.ticks.iter_mut().flatten() {
            if let Command::Spawn(spawn) = command {
                spawn.layers = if spawn.id % 4 == 0 { 0b10 } else { 0b01 };
                spawn.interest = 0b01;
                if one_radius {
                    spawn.radius = Fix::from_num(100);
                }
            }
        }
        swept += agrees_swept(&s, format_args!("seed {seed}, band {band}"));
    }
    assert!(swept > 0, "the sweep never ran");
}

/// The subject with the largest id (`u64::MAX`) in a view the sweep edits
/// while slots are out of id order: the merge took its key for "no change
/// left" and dropped it from the view without a Leave (found by
/// `radius_mode_matches_oracle`).
#[test]
fn the_largest_id_stays_in_a_view_the_sweep_edits() {
    let config = Config {
        origin: Pos::from_ints(0, 0),
        cell_size: Fix::from_num(0.25002),
        width_cells: 1,
        height_cells: 1,
        visibility: Visibility::Radius,
        hysteresis: Fix::ZERO,
        update_interval: 0,
        move_epsilon: Fix::ZERO,
        dir_epsilon: 0,
        max_entities: 4,
        max_observers: 2,
        max_view: 2,
        max_visible: None,
    };
    let at = Pos::from_ints(0, 0);
    let npc = |id| {
        Command::Spawn(Spawn {
            radius: Fix::ZERO,
            ..Spawn::npc(id, at)
        })
    };
    let observer = |id| {
        Command::Spawn(Spawn {
            observer: true,
            radius: Fix::ZERO,
            ..Spawn::npc(id, at)
        })
    };
    let ticks = vec![
        vec![npc(1)],
        vec![npc(u64::MAX), Command::Despawn { id: 1 }, observer(2)],
        vec![npc(1), Command::Despawn { id: 1 }],
    ];
    agrees(&gen::Scenario { config, ticks }, format_args!("radius 0"));
}

/// Worlds whose `max_visible` cuts views in their busiest ticks: every
/// observer, in ascending id, keeps at most the room the others leave it,
/// and the tick after a cut rebuilds every view. Bounds from a quarter of
/// the most the views hold to a little above it, so that some ticks cut
/// and some do not.
#[test]
fn bounded_visible_pairs_match_oracle() {
    let mut cut = 0;
    for visibility in [Visibility::Grid, Visibility::Radius] {
        let scenarios = [
            ("busy", gen::busy(21, 20, visibility)),
            ("dense walk", gen::dense_walk(22, 8, visibility)),
            ("swarm", gen::swarm(23, 15, visibility)),
            ("town", gen::town(24, 25, visibility, 10, 6, 24)),
            ("calm", gen::calm(25, 20, visibility, 40, 256)),
        ];
        for (what, s) in scenarios {
            for share in [(1, 4), (1, 2), (9, 10), (11, 10)] {
                let s = gen::within_visible(s.clone(), share);
                let (_, world) = check::world_against_oracle(&s)
                    .unwrap_or_else(|e| panic!("{what} {visibility:?} {share:?}: {e}"));
                let paths = world.path_counts().expect("debug builds count paths");
                cut += paths.get(lockgrid_kernel::coverage::Path::ObserverWithinRoom);
            }
        }
    }
    for (seed, max_view) in [(46, 256), (47, 12)] {
        for share in [(1, 3), (4, 5)] {
            let s = gen::within_visible(gen::walkers_settling(seed, 25, max_view), share);
            agrees(
                &s,
                format_args!("walkers settling {seed}/{max_view} {share:?}"),
            );
        }
    }
    assert!(cut > 0, "no view was ever cut to its room");
}
