//! A tick stepped with the host's threads (`World::step_with`) gives
//! exactly the serial tick's events, in the same order, and digest, for
//! every width from 1 to 4, with real threads and with a fork that runs
//! its tasks backwards; so does a tick whose events are handed over in
//! parts (`World::step_in_parts`), once merged by observer; and the split
//! parts (the radius-mode sweep, and the pass that refreshes every view,
//! in both modes) really run in these scenarios.

use std::cell::Cell;
use std::collections::BTreeMap;

use lockgrid_host::threads::Threads;
use lockgrid_kernel::coverage::Path;
use lockgrid_kernel::{contract_order, Backwards, Config, Event, Fix, Fork, Visibility, World};
use lockgrid_tests::gen;

/// A fork that counts its joins: in grid mode every join is a split pass
/// over the views (the sweep never runs there).
struct Counted<F> {
    fork: F,
    joins: Cell<u64>,
}

impl<F: Fork> Fork for Counted<F> {
    fn width(&self) -> usize {
        self.fork.width()
    }

    fn join(&self, tasks: &mut [&mut (dyn FnMut() + Send)]) {
        self.joins.set(self.joins.get() + 1);
        self.fork.join(tasks);
    }
}

/// Steps `s` serially and with `fork`, tick by tick; returns how many
/// ticks the forked world swept and split its pairing, and how many
/// joins it made.
fn same_as_serial<F: Fork>(s: &gen::Scenario, fork: F, what: &str) -> (u64, u64, u64) {
    let fork = Counted {
        fork,
        joins: Cell::new(0),
    };
    let fork = &fork;
    let mut serial = World::new(s.config).expect("generated configs are valid");
    let mut forked = World::new(s.config).expect("generated configs are valid");
    assert_eq!(forked.reserve_width(4), 4);
    let mut parted = World::new(s.config).expect("generated configs are valid");
    assert_eq!(parted.reserve_width(4), 4);
    for (t, commands) in s.ticks.iter().enumerate() {
        let (mut want, mut got) = (Vec::<Event>::new(), Vec::<Event>::new());
        let a = serial.step(commands, &mut want);
        let b = forked.step_with(commands, &mut got, fork);
        // Every third tick, one part fewer than the width: then every
        // event goes to the sink, in the serial order.
        let width = fork.width();
        let n = if t % 3 == 2 && width > 1 {
            width - 1
        } else {
            4
        };
        let (mut sink, mut parts) = (Vec::<Event>::new(), vec![Vec::<Event>::new(); n]);
        let c = parted.step_in_parts(commands, &mut sink, &mut parts, fork);
        assert_eq!(c, a, "{what}: tick {} report, in parts", t + 1);
        if n < width {
            assert!(
                parts.iter().all(Vec::is_empty),
                "{what}: tick {}: too few parts, yet used",
                t + 1
            );
            assert_eq!(sink, want, "{what}: tick {}, too few parts", t + 1);
        }
        let merged = merge_parts(sink, &parts, &format!("{what}: tick {}", t + 1));
        assert_eq!(merged, want, "{what}: tick {}, in parts", t + 1);
        if got != want {
            let at = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
            panic!(
                "{what}: tick {}: {} events against the serial {}; first difference at {at}: {:?} against {:?}",
                t + 1,
                got.len(),
                want.len(),
                got.get(at),
                want.get(at)
            );
        }
        assert_eq!(b, a, "{what}: tick {} report", t + 1);
    }
    let counts = forked.path_counts().expect("debug builds count paths");
    let (swept, paired) = (counts.get(Path::SweepSwept), counts.get(Path::PairingSplit));
    if what.starts_with("crowd pairing overflows") && fork.width() > 1 {
        // Tasks ran out of room, and so did the serial redo: the events
        // above are those of pairing redone serially.
        let overflowed = counts.get(Path::PairsOverflowed);
        assert!(overflowed > 0 && paired == 0, "{what}: split pairing kept");
    }
    (swept, paired, fork.joins.get())
}

/// What `World::step_in_parts` sent to its sink and its parts, merged
/// into one stream: checks that every place holds whole observers, in
/// contract order, and that no observer is in two places; then a stable
/// sort by observer, the sink first, is the serial order.
fn merge_parts(sink: Vec<Event>, parts: &[Vec<Event>], what: &str) -> Vec<Event> {
    let mut seen = BTreeMap::new();
    for (place, events) in std::iter::once(&sink).chain(parts).enumerate() {
        assert!(
            events.is_sorted_by(|a, b| contract_order(a, b).is_le()),
            "{what}: place {place} is out of contract order"
        );
        for observer in events.iter().filter_map(|e| e.order_key()).map(|k| k.0) {
            let first = *seen.entry(observer).or_insert(place);
            assert_eq!(first, place, "{what}: observer {observer} in two places");
        }
    }
    PARTED.with(|n| n.set(n.get() + parts.iter().map(Vec::len).sum::<usize>() as u64));
    let mut all = sink;
    all.extend(parts.iter().flatten().copied());
    // Stable: rejections keep their input order, observers their events'.
    all.sort_by_key(|e| e.order_key().map(|k| k.0));
    all
}

thread_local! {
    /// Events the parts received, so the tests know the parted pass ran.
    static PARTED: Cell<u64> = const { Cell::new(0) };
}

fn scenarios() -> Vec<(String, gen::Scenario)> {
    let mut all = Vec::new();
    for (seed, max_view) in [(41, 256), (42, 30), (44, 256)] {
        all.push((
            format!("walkers {seed}/{max_view}"),
            gen::walkers(seed, 30, max_view),
        ));
        all.push((
            format!("walkers settling {seed}/{max_view}"),
            gen::walkers_settling(seed, 30, max_view),
        ));
    }
    // With a hysteresis band: every swept change is checked against the
    // view it would change, on the tasks' threads too.
    for (seed, band) in [(46, 10), (47, 25)] {
        let s = gen::walkers_settling(seed, 30, 256);
        let config = Config {
            hysteresis: Fix::from_num(band),
            ..s.config
        };
        let what = format!("walkers settling {seed}, band {band}");
        all.push((what, gen::Scenario { config, ..s }));
    }
    for seed in [31, 32] {
        all.push((
            format!("dense walk {seed}"),
            gen::dense_walk(seed, 8, Visibility::Radius),
        ));
    }
    all.push(("swarm".into(), gen::swarm(6, 20, Visibility::Radius)));
    // Grid mode: views kept, walked and edited by their pairs in a split
    // pass over every view.
    for seed in [33, 34] {
        all.push((
            format!("dense walk {seed}, grid"),
            gen::dense_walk(seed, 8, Visibility::Grid),
        ));
    }
    all.push(("swarm, grid".into(), gen::swarm(7, 20, Visibility::Grid)));
    // More observers than movers: pairing, split into tasks by subject;
    // in grid mode with full views, whose observers are paired too.
    // Strides of a radius: more pairs than a task's share of the room
    // holds (and than the whole room), paired serially instead.
    let crowd = gen::crowd_pairing;
    let s = crowd(37, (Visibility::Radius, 256, 800), (600, 6));
    all.push(("crowd pairing".into(), s));
    let s = crowd(38, (Visibility::Grid, 150, 800), (600, 6));
    all.push(("crowd pairing, grid".into(), s));
    let s = crowd(39, (Visibility::Radius, 512, 400), (1190, 300));
    all.push(("crowd pairing overflows".into(), s));
    // Few due: views that stayed in their cell take their Updates from the
    // cells around them, on the tasks' threads too.
    all.push(("settling, grid".into(), gen::grid_settling(36, 10)));
    // Bounded visible pairs: a split pass lays its ranges out by the most
    // each view can come to, and ticks where that could pass the bound
    // run serially, cutting views to their room.
    for share in [(1, 2), (9, 10), (11, 10)] {
        let what = format!("walkers within {}/{} bound", share.0, share.1);
        all.push((what, gen::within_visible(gen::walkers(45, 30, 256), share)));
        let what = format!("dense walk within {}/{} bound, grid", share.0, share.1);
        let s = gen::within_visible(gen::dense_walk(35, 8, Visibility::Grid), share);
        all.push((what, s));
    }
    all
}

#[test]
fn every_width_gives_the_serial_events_and_digests() {
    for width in 1..=4 {
        let (mut swept, mut paired, mut split, mut bounded) = (0, 0, 0, 0);
        for (what, s) in scenarios() {
            let (sweeps, pairings, joins) =
                same_as_serial(&s, Threads::new(width), &format!("{what}, width {width}"));
            swept += sweeps;
            paired += pairings;
            split += u64::from(what.ends_with("grid") && joins > 0);
            bounded += u64::from(what.contains("bound, grid") && joins > 0);
        }
        assert!(
            width == 1 || bounded > 0,
            "width {width}: no pass with bounded visible pairs was split"
        );
        assert!(
            swept > 0,
            "width {width}: no tick swept, the split is untested"
        );
        assert!(
            width == 1 || split > 0,
            "width {width}: no grid-mode pass was split"
        );
        assert!(
            width == 1 || paired > 0,
            "width {width}: no tick split its pairing"
        );
        let parted = PARTED.with(Cell::take);
        assert!(
            width == 1 || parted > 0,
            "width {width}: no part received an event"
        );
    }
}

#[test]
fn the_order_tasks_run_in_does_not_matter() {
    for width in 2..=4 {
        let (mut swept, mut paired, mut split) = (0, 0, 0);
        for (what, s) in scenarios() {
            let (sweeps, pairings, joins) =
                same_as_serial(&s, Backwards(width), &format!("{what}, backwards {width}"));
            swept += sweeps;
            paired += pairings;
            split += u64::from(what.ends_with("grid") && joins > 0);
        }
        assert!(
            swept > 0,
            "width {width}: no tick swept, the split is untested"
        );
        assert!(
            width == 1 || split > 0,
            "width {width}: no grid-mode pass was split"
        );
        assert!(paired > 0, "width {width}: no tick split its pairing");
        let parted = PARTED.with(Cell::take);
        assert!(
            width == 1 || parted > 0,
            "width {width}: no part received an event"
        );
    }
}
