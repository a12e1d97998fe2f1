//! Every path of the kernel's tick plan (`kernel/src/plan.rs`) and every
//! special case around it is reached by scenarios that are checked against
//! the oracle tick by tick: a path no scenario reaches fails here, by name.
//!
//! The kernel counts paths in debug builds (the default for `cargo test`)
//! or with its `path-coverage` feature.

use lockgrid_host::threads::Threads;
use lockgrid_kernel::coverage::{Path, PathCounts};
use lockgrid_kernel::{Command, Config, Fix, Move, Pos, Spawn, Visibility};
use lockgrid_tests::{check, gen};

fn observer(id: u64, x: i32, y: i32) -> Command {
    Command::Spawn(Spawn::observer(
        id,
        Pos::from_ints(x, y),
        Fix::from_num(100),
    ))
}

fn npc(id: u64, x: i32, y: i32) -> Command {
    Command::Spawn(Spawn::npc(id, Pos::from_ints(x, y)))
}

fn step(id: u64, x: i32, y: i32) -> Command {
    Command::Move(Move {
        id,
        pos: Pos::from_ints(x, y),
        dir: 0,
        speed: Fix::ZERO,
    })
}

/// A full world in which a tick despawns subjects an observer sees and
/// spawns more than the spare slots hold: the last spawn takes over a
/// slot freed in the same tick, so every observer around the despawned
/// subject that had it is rebuilt rather than paired.
fn slot_taken_over() -> gen::Scenario {
    let config = Config {
        max_entities: 64,
        max_observers: 64,
        ..Config::default()
    };
    // Forty idle observers far apart, and 24 NPCs around the first.
    let mut first: Vec<Command> = (0..40)
        .map(|i| {
            observer(
                1 + i,
                150 + 300 * (i as i32 % 20),
                150 + 3000 * (i as i32 / 20),
            )
        })
        .collect();
    first.extend((41..=64).map(|id| npc(id, 100 + id as i32, 160)));
    // Nine go, nine come: the world keeps an eighth more slots (eight).
    let mut second: Vec<Command> = (41..=49).map(|id| Command::Despawn { id }).collect();
    second.extend((100..=108).map(|id| npc(id, id as i32, 170)));
    gen::Scenario {
        config,
        ticks: vec![first, second, vec![step(100, 120, 170)]],
    }
}

/// A world of 64 (72 slots) in which one tick despawns 16 subjects that
/// observers see, more than the nine it lists to pair: every view is
/// rebuilt instead, and the next tick, with one despawn, pairs again.
fn many_gone(visibility: Visibility) -> gen::Scenario {
    let config = Config {
        visibility,
        max_entities: 64,
        max_observers: 64,
        ..Config::default()
    };
    let mut first: Vec<Command> = (1..=16)
        .map(|i| observer(i, 150 + 40 * i as i32, 150))
        .collect();
    first.extend((17..=64).map(|id| npc(id, 100 + 9 * id as i32, 160 + id as i32 % 7)));
    let second: Vec<Command> = (20..36).map(|id| Command::Despawn { id }).collect();
    let third = vec![Command::Despawn { id: 40 }, step(41, 500, 170)];
    gen::Scenario {
        config,
        ticks: vec![first, second, third],
    }
}

/// A radius-mode world of 16 × 16 cells whose views hold 3 subjects,
/// with room enough for it to be sorted into squares.
fn small_views() -> Config {
    Config {
        visibility: Visibility::Radius,
        width_cells: 16,
        height_cells: 16,
        max_entities: 320,
        max_observers: 320,
        max_view: 3,
        ..Config::default()
    }
}

/// Radius mode without hysteresis, every entity an observer stepping a
/// little (the sweep's tick), and two subjects stepping into a view one
/// short of `max_view`: the sweep holds its changes, but applying them
/// would overfill the view, which is rebuilt (and culled) instead.
fn swept_view_overfills() -> gen::Scenario {
    let config = small_views();
    let mut first = vec![
        observer(1, 800, 800),
        observer(2, 760, 800),
        observer(3, 840, 800),
        observer(4, 800, 902),
        observer(5, 800, 698),
    ];
    let far = |i: i32| {
        (
            100 + 300 * (i % 5),
            100 + 300 * (i / 5) + if i / 5 >= 2 { 600 } else { 0 },
        )
    };
    for i in 0..15 {
        let (x, y) = far(i);
        first.push(observer(10 + i as u64, x.min(1500), y.min(1500)));
    }
    // Everyone steps one unit east; 4 and 5 step three units towards 1.
    let mut second = vec![
        step(1, 801, 800),
        step(2, 761, 800),
        step(3, 841, 800),
        step(4, 801, 899),
        step(5, 801, 701),
    ];
    for i in 0..15 {
        let (x, y) = far(i);
        second.push(step(10 + i as u64, x.min(1500) + 1, y.min(1500)));
    }
    gen::Scenario {
        config,
        ticks: vec![first, second],
    }
}

/// The sweep's tick with the throttle of the benchmark's comparable row,
/// where a view the sweep keeps overfills while a subject within its
/// radius is due: 5 stood still after a step, so it is due its settling
/// Update, and 1 steps towards 4 and 5 at once. 1's view is rebuilt and
/// culled to 2, 3 and 4, the nearest, so 5, though due and within 1's
/// radius, must get no Update there.
fn swept_view_overfills_while_due() -> gen::Scenario {
    let config = Config {
        update_interval: u64::MAX,
        move_epsilon: Fix::MAX,
        dir_epsilon: 32768,
        ..small_views()
    };
    let far = |i: i32| (100 + 300 * (i % 5), 100 + 300 * (i / 5));
    let mut ticks = vec![vec![
        observer(1, 800, 800),
        observer(2, 760, 800),
        observer(3, 840, 800),
        observer(4, 800, 903),
        observer(5, 803, 904),
    ]];
    ticks[0].extend((0..15).map(|i| observer(10 + i as u64, far(i).0, far(i).1)));
    for t in 1..=2 {
        let mut commands = vec![
            step(1, 801, if t == 1 { 800 } else { 804 }),
            step(2, 760 + t, 800),
            step(3, 840 + t, 800),
            step(4, 800 + t, 903),
        ];
        // 5 steps once, then stands: due the tick after.
        if t == 1 {
            commands.push(step(5, 803, 903));
        }
        commands.extend((0..15).map(|i| step(10 + i as u64, far(i).0 + t, far(i).1)));
        ticks.push(commands);
    }
    gen::Scenario { config, ticks }
}

/// A dense walk in radius mode with hysteresis where a tenth of the
/// entities never move after the first step: most subjects change, not
/// quite as many as there are observers, so they are paired, and their
/// pairs outgrow the room kept for them. Room for more than twice as many
/// entities as there are observers rules the sweep out (the pairs' room
/// per entity shrinks as the room grows, so it stays the same).
fn pairs_overflow() -> gen::Scenario {
    let mut s = gen::dense_walk(37, 6, Visibility::Radius);
    s.config.hysteresis = Fix::from_num(10);
    s.config.max_entities = 2 * s.config.max_observers + 1;
    for commands in s.ticks.iter_mut().skip(2) {
        commands.retain(|c| c.entity() % 10 != 0);
    }
    s
}

/// Radius mode, views of up to 8 in a room of 40 (a ring of 72): four
/// observers that see one subject each, then five that see 8, 8, 8, 8
/// and 4. A pass lays the views out one after another in id order; edit
/// ticks then take all but one subject out of the fifth view and every one
/// out of the sixth to eighth, leaving 31 entries of holes between the
/// fifth and the ninth; and a last pass gives the first four seven
/// subjects more each. By the fifth view the pass has written 28 more
/// than it has read, and the free entries ahead of it end at the fifth's
/// old run, so it slides the fifth and the ninth up past the holes.
fn unread_views_slid() -> gen::Scenario {
    let config = Config {
        visibility: Visibility::Radius,
        max_entities: 80,
        max_observers: 9,
        max_view: 8,
        max_visible: Some(40),
        ..Config::default()
    };
    let x = |k: u64| 150 + 300 * (k as i32 - 1);
    let far = |id: u64| (150 + 20 * (id as i32 % 200), 5000);
    let seen = [1, 1, 1, 1, 8, 8, 8, 8, 4];
    let mut first: Vec<Command> = (1..=9).map(|k| observer(k, x(k), 150)).collect();
    for (k, &n) in (1..=9).zip(&seen) {
        first.extend((0..n).map(|j| npc(100 * k + j, x(k) + 10 + 3 * j as i32, 160)));
    }
    // Seven more for each of the first four, out of sight for now.
    let newcomers: Vec<u64> = (1..=4)
        .flat_map(|k| (0..7).map(move |j| 1000 + 10 * k + j))
        .collect();
    first.extend(newcomers.iter().map(|&id| npc(id, far(id).0, far(id).1)));
    // Every subject in sight steps: a pass writes every view in id order.
    let lay_out: Vec<Command> = (1..=9u64)
        .zip(&seen)
        .flat_map(|(k, &n)| (0..n).map(move |j| step(100 * k + j, x(k) + 11 + 3 * j as i32, 160)))
        .collect();
    // Fewer movers a tick than observers: views are edited in place.
    let leaving: Vec<u64> = (501..508)
        .chain(600..608)
        .chain(700..708)
        .chain(800..808)
        .collect();
    let mut ticks = vec![first, lay_out];
    for chunk in leaving.chunks(7) {
        ticks.push(
            chunk
                .iter()
                .map(|&id| step(id, far(id).0, far(id).1))
                .collect(),
        );
    }
    ticks.push(
        newcomers
            .iter()
            .map(|&id| {
                let k = (id - 1000) / 10;
                step(id, x(k) - 10 - 3 * (id % 10) as i32, 140)
            })
            .collect(),
    );
    gen::Scenario { config, ticks }
}

/// Grid mode, views of up to 8: twelve observers stacked on one point
/// (their views full: everyone ties at distance 0) and twenty walkers in
/// a row through the cells around it and away from it. A few walkers
/// step each tick, fewer than there are observers, so they are paired;
/// most stay in their cells, and those are paired only with the cells
/// that hold full views: near the spot they change the stacked views'
/// rankings, far from it nothing. Updates are rare, as in the bench's
/// comparable row: a subject due one is paired with every observer.
fn spot_in_grid() -> gen::Scenario {
    let config = Config {
        max_entities: 64,
        max_observers: 64,
        max_view: 8,
        update_interval: u64::MAX,
        move_epsilon: Fix::MAX,
        dir_epsilon: 32768,
        ..Config::default()
    };
    let mut first: Vec<Command> = (1..=12).map(|id| observer(id, 550, 550)).collect();
    let walker = |k: i32, t: i32| (320 + 60 * k + 7 * (t % 3), 540 + 9 * (t % 2));
    first.extend((0..20).map(|k| {
        let (x, y) = walker(k, 0);
        observer(100 + k as u64, x, y)
    }));
    let mut ticks = vec![first];
    for t in 1..8 {
        ticks.push(
            (0..20)
                .filter(|k| (k + t) % 4 == 0)
                .map(|k| {
                    let (x, y) = walker(k, t);
                    step(100 + k as u64, x, y)
                })
                .collect(),
        );
    }
    gen::Scenario { config, ticks }
}

/// Runs `s` against the oracle and adds the paths its world took.
fn checked(total: &mut PathCounts, s: &gen::Scenario, what: &str) {
    let (_, world) = check::world_against_oracle(s).unwrap_or_else(|e| panic!("{what}: {e}"));
    let counts = world
        .path_counts()
        .expect("path counts need debug assertions or the kernel's path-coverage feature");
    total.add(counts);
}

/// [`checked`], and the same scenario stepped again with two threads,
/// which must give the serial events and digests: for the paths only a
/// tick split into tasks takes.
fn checked_in_threads(total: &mut PathCounts, s: &gen::Scenario, what: &str) {
    let (ticks, _) = check::world_against_oracle(s).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut world = check::world(s).unwrap_or_else(|e| panic!("{what}: {e}"));
    world.reserve_width(2);
    let threads = Threads::new(2);
    for (t, (commands, want)) in s.ticks.iter().zip(&ticks).enumerate() {
        let mut events = Vec::new();
        let report = world.step_with(commands, &mut events, &threads);
        assert!(
            events == want.events && report.digest == want.digest,
            "{what}: tick {} with two threads differs from the serial tick",
            t + 1
        );
    }
    total.add(world.path_counts().expect("debug builds count paths"));
}

#[test]
fn every_planned_path_is_reached_and_checked_against_the_oracle() {
    let mut total = PathCounts::default();
    for visibility in [Visibility::Grid, Visibility::Radius] {
        checked(&mut total, &gen::busy(7, 30, visibility), "busy");
        checked(
            &mut total,
            &gen::dense_walk(31, 8, visibility),
            "dense walk",
        );
        checked(&mut total, &gen::swarm(6, 20, visibility), "swarm");
        for (seed, movers, max_view) in [(1, 1, 32), (4, 40, 256), (5, 150, 256)] {
            let s = gen::calm(seed, 30, visibility, movers, max_view);
            checked(&mut total, &s, "calm");
        }
        for hysteresis in [0, 25] {
            let s = gen::town(12, 40, visibility, hysteresis, 6, 24);
            checked(&mut total, &s, "town");
        }
        // Bounds on the visible pairs that cut views in the busiest ticks.
        let s = gen::within_visible(gen::busy(8, 20, visibility), (2, 3));
        checked(&mut total, &s, "busy within a bound");
        let s = gen::within_visible(gen::town(13, 30, visibility, 0, 6, 24), (3, 4));
        checked(&mut total, &s, "town within a bound");
    }
    for (seed, max_view) in [(41, 256), (43, 12)] {
        checked(&mut total, &gen::walkers(seed, 30, max_view), "walkers");
        let s = gen::walkers_settling(seed, 30, max_view);
        checked(&mut total, &s, "walkers settling");
    }
    checked(&mut total, &slot_taken_over(), "slot taken over");
    for visibility in [Visibility::Grid, Visibility::Radius] {
        checked(&mut total, &many_gone(visibility), "many gone");
    }
    checked(&mut total, &swept_view_overfills(), "swept view overfills");
    let s = swept_view_overfills_while_due();
    checked(&mut total, &s, "swept view overfills while due");
    checked(&mut total, &pairs_overflow(), "pairs overflow");
    checked(&mut total, &unread_views_slid(), "unread views slid");
    checked(&mut total, &spot_in_grid(), "spot in grid");
    checked(
        &mut total,
        &gen::grid_settling(39, 10),
        "grid walk settling",
    );
    // Many movers among more observers: pairing split into tasks.
    let s = gen::crowd_pairing(37, (Visibility::Radius, 256, 800), (600, 6));
    checked_in_threads(&mut total, &s, "crowd pairing");
    let missing: Vec<Path> = total.missing().collect();
    assert!(
        missing.is_empty(),
        "paths no scenario reached: {missing:?}\nall counts: {:?}",
        Path::ALL.map(|p| (p, total.get(p)))
    );
}
