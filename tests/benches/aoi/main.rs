//! AOI benchmark: lockgrid against real peer crates on identical workloads.
//!
//! ```text
//! cargo bench -p lockgrid-tests --bench aoi                       # full run
//! cargo bench -p lockgrid-tests --bench aoi -- --quick            # smoke run
//! cargo bench -p lockgrid-tests --bench aoi -- --workload uniform-10k --mode radius
//! cargo bench -p lockgrid-tests --bench aoi -- --workload uniform-10k --lockgrid-only --ticks 20
//! cargo bench -p lockgrid-tests --bench aoi -- --workload mixed,dense,stopgo,radius-mix
//! ```
//!
//! Workloads (`workload.rs`): `uniform-1k`, `uniform-10k`, `uniform-100k`
//! (everyone walks), `hotspot-10k`, `teleport-10k`, `npc-10k`, `calm-10k`,
//! `town-10k`, `churn-10k`; `mixed1-10k` and `mixed10-10k` (the uniform
//! walk with 1% or 10% staying put each tick), `mixed-int-10k` (whole-unit
//! steps in −5..=5, so 1 in 121 moves to where it stands), `dense-50k` and
//! `dense-cull-50k` (five times the density, without and with crowd
//! culling), `stopgo-10k` (runs of 5–40 ticks walking, then standing) and
//! `radius-mix-10k` (view radii of 50–150 units, 1% staying put);
//! `spawn-points-10k` (a tenth standing on two spots, each on one exact
//! point, views of 256: cut-offs among hundreds of ties).
//!
//! Every contender is fed the same seeded command stream. The peers
//! (flat_spatial, kiddo, rstar, a plain grid with mark-diff views, a
//! cross-linked list as KBEngine and BigWorld build it, brute force) go
//! through one shared adapter
//! that turns neighbour queries into Enter/Leave events exactly as the
//! kernel defines them; before a peer is timed, its visible sets are checked
//! against the kernel's for several ticks, and a peer that disagrees is not
//! reported. The comparable lockgrid row runs with a throttle under which
//! Updates are (almost) never due, so both sides do the same work; the full
//! tick with the default throttle is its own row. Output is Markdown.

mod adapter;
mod crosslist;
mod joins;
mod measure;
mod peers;
mod plain_grid;
mod workload;

use std::fmt::Write as _;

use lockgrid_host::threads::Threads;
use lockgrid_kernel::{
    Command, Config, EntityId, Event, EventSink, Fork, Visibility, World, MAX_WIDTH,
};

use adapter::{Adapter, Peer};
use measure::{floor_ns_per_pair, live_bytes, measured, Evictor, Samples, Tally};
use workload::{Kind, Spec, Stream};

const USAGE: &str = "usage: aoi [--quick] [--workload NAME[,NAME..]] [--mode grid|radius]
           [--lockgrid-only [--full-tick]] [--cold] [--ticks N] [--threads N [--joins]]
           [--max-visible auto|none|N]
  --quick      few ticks per workload, a smoke run: skips N > 10k, mixed10-10k,
               mixed-int-10k and stopgo-10k unless named, and the cross-linked
               list on teleport-10k (a teleport walks the whole lists)
  --lockgrid-only  time only the comparable lockgrid row (for profiling the kernel)
  --full-tick  with --lockgrid-only, time the full-tick row too
  --cold       sweep 64 MiB through the caches before every timed step, as the
               peers do in a full run (use with --lockgrid-only)
  --ticks      timed ticks per contender, overriding the plan
  --threads    step the kernel with this many threads (World::step_in_parts; default 1);
               above 1, the serial step runs too, on the same ticks, for the speed-up
  --joins      with --threads N above 1, time the bold row's joins and the serial work
               between them, and print their medians (the timing allocates)
  --workload   only workloads whose name contains one of these (uniform-1k, uniform-10k,
               uniform-100k, hotspot-10k, teleport-10k, npc-10k, calm-10k, town-10k,
               churn-10k, mixed1-10k, mixed10-10k, mixed-int-10k, dense-50k,
               dense-cull-50k, stopgo-10k, radius-mix-10k, spawn-points-10k); --quick
               skips the dense ones unless named. `mixedP-Nk` named in full runs the
               uniform walk of N thousand with P% staying put (P < 100)
  --mode       only this visibility mode
  --layers     spread the entities over this many layers (1 to 32; default 1), observers
               interested in all of them: the same views, without a layer all share
  --blind      with --layers K (K > 1), observers blind to the last layer: a K-th of
               the entities hidden from everyone (for the peers too)
  --hysteresis every workload with this hysteresis band in world units (radius mode:
               enter at r, leave beyond r + band; default 0), for the kernel and the
               peers alike
  --max-visible  the kernel's bound on the visible pairs of all views together, which
               is what its views reserve: auto (default) is 5/4 of the most the
               workload's views hold at the end of any timed tick, measured in an
               untimed run first, so the bound never cuts a view; none reserves
               max_view entries per observer";

struct Options {
    quick: bool,
    lockgrid_only: bool,
    full_tick: bool,
    cold: bool,
    threads: usize,
    /// Whether to time the bold row's joins (`joins.rs`).
    joins: bool,
    ticks: Option<u64>,
    only: Vec<String>,
    modes: Vec<Visibility>,
    max_visible: MaxVisible,
    /// Every workload's hysteresis band, in world units.
    hysteresis: i64,
    /// How many layers every workload's entities are spread over.
    layers: u32,
    /// Whether observers are blind to the last layer.
    blind: bool,
}

/// The kernel's `max_visible` in the bench.
#[derive(Clone, Copy)]
enum MaxVisible {
    /// 5/4 of the peak visible pairs of the ticks run.
    Auto,
    None,
    Fixed(u32),
}

fn options() -> Options {
    let mut o = Options {
        quick: false,
        lockgrid_only: false,
        full_tick: false,
        cold: false,
        threads: 1,
        joins: false,
        ticks: None,
        only: Vec::new(),
        modes: vec![Visibility::Grid, Visibility::Radius],
        max_visible: MaxVisible::Auto,
        hysteresis: 0,
        layers: 1,
        blind: false,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            // cargo bench passes --bench to harness-less targets.
            "--bench" => {}
            "--quick" => o.quick = true,
            "--lockgrid-only" => o.lockgrid_only = true,
            "--full-tick" => o.full_tick = true,
            "--cold" => o.cold = true,
            "--joins" => o.joins = true,
            "--threads" => {
                let v = args.next().and_then(|v| v.parse().ok()).filter(|&n| n >= 1);
                o.threads = v.unwrap_or_else(|| die("--threads needs a number of at least 1"));
            }
            "--ticks" => {
                let v = args.next().and_then(|v| v.parse().ok());
                o.ticks = Some(v.unwrap_or_else(|| die("--ticks needs a number")));
            }
            "--workload" => {
                let v = args
                    .next()
                    .unwrap_or_else(|| die("--workload needs a value"));
                o.only.extend(v.split(',').map(str::to_owned));
            }
            "--max-visible" => {
                o.max_visible = match args.next().as_deref() {
                    Some("auto") => MaxVisible::Auto,
                    Some("none") => MaxVisible::None,
                    Some(n) => MaxVisible::Fixed(
                        n.parse()
                            .unwrap_or_else(|_| die("--max-visible takes auto, none or a number")),
                    ),
                    None => die("--max-visible takes auto, none or a number"),
                }
            }
            "--hysteresis" => {
                let v = args.next().and_then(|v| v.parse().ok()).filter(|&h| h >= 0);
                o.hysteresis =
                    v.unwrap_or_else(|| die("--hysteresis needs a number of at least 0"));
            }
            "--layers" => {
                let v = args.next().and_then(|v| v.parse().ok());
                let v = v.filter(|k| (1..=32).contains(k));
                o.layers = v.unwrap_or_else(|| die("--layers needs a number from 1 to 32"));
            }
            "--blind" => o.blind = true,
            "--mode" => {
                o.modes = match args.next().as_deref() {
                    Some("grid") => vec![Visibility::Grid],
                    Some("radius") => vec![Visibility::Radius],
                    _ => die("--mode takes grid or radius"),
                }
            }
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            other => die(&format!("unknown argument {other:?}")),
        }
    }
    o
}

fn die(msg: &str) -> ! {
    eprintln!("{msg}\n{USAGE}");
    std::process::exit(2);
}

/// How many ticks to check, warm up and time.
#[derive(Clone, Copy)]
struct Plan {
    verify: u64,
    warm: u64,
    timed: u64,
}

fn plan(n: u32, quick: bool) -> Plan {
    match (quick, n) {
        (true, n) if n <= 10_000 => Plan {
            verify: 2,
            warm: 1,
            timed: 5,
        },
        (true, _) => Plan {
            verify: 2,
            warm: 1,
            timed: 3,
        },
        (false, n) if n <= 1_000 => Plan {
            verify: 6,
            warm: 5,
            timed: 100,
        },
        (false, n) if n <= 10_000 => Plan {
            verify: 4,
            warm: 3,
            timed: 30,
        },
        (false, _) => Plan {
            verify: 2,
            warm: 1,
            timed: 5,
        },
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum PeerKind {
    FlatSpatial,
    Kiddo,
    RstarBulk,
    RstarIncremental,
    PlainGrid,
    CrossList,
    Brute,
}

const PEERS: [PeerKind; 7] = [
    PeerKind::FlatSpatial,
    PeerKind::Kiddo,
    PeerKind::RstarBulk,
    PeerKind::RstarIncremental,
    PeerKind::PlainGrid,
    PeerKind::CrossList,
    PeerKind::Brute,
];

impl PeerKind {
    fn name(self) -> &'static str {
        match self {
            PeerKind::FlatSpatial => "flat_spatial 0.6 Grid",
            PeerKind::Kiddo => "kiddo 6.3 ImmutableKdTree, rebuilt",
            PeerKind::RstarBulk => "rstar 0.14 RTree, bulk-loaded",
            PeerKind::RstarIncremental => "rstar 0.14 RTree, remove + insert",
            PeerKind::PlainGrid => "plain-grid: counting-sort grid, mark-diff views",
            PeerKind::CrossList => "crosslist: KBEngine/BigWorld sorted x/y lists",
            PeerKind::Brute => "brute force O(N²)",
        }
    }

    /// Why this peer is left out of this workload, if it is.
    fn skipped(self, spec: &Spec, quick: bool) -> Option<&'static str> {
        match self {
            PeerKind::Brute if spec.n > 10_000 => {
                Some("skipped: O(N²) would take minutes per tick")
            }
            PeerKind::Brute if quick && spec.n > 1_000 => Some("skipped in --quick"),
            PeerKind::CrossList if quick && spec.kind == Kind::Teleport => {
                Some("skipped in --quick: teleports walk the whole lists (~1 s a tick)")
            }
            _ => None,
        }
    }
}

/// One line of a workload's table.
struct Row {
    name: String,
    outcome: Result<Measured, String>,
}

struct Measured {
    samples: Samples,
    pairs: u64,
    bytes_per_entity: f64,
}

fn main() {
    let opts = options();
    let mut specs = vec![
        Spec::new(Kind::Uniform, 1_000),
        Spec::new(Kind::Uniform, 10_000),
        Spec::new(Kind::Uniform, 100_000),
        Spec::new(Kind::Hotspot, 10_000),
        Spec::new(Kind::Teleport, 10_000),
        Spec::new(Kind::Npc, 10_000),
        Spec::new(Kind::Calm, 10_000),
        Spec::new(Kind::Town, 10_000),
        Spec::new(Kind::Churn, 10_000),
        Spec::new(Kind::Mixed(1), 10_000),
        Spec::new(Kind::Mixed(10), 10_000),
        Spec::new(Kind::MixedInt, 10_000),
        Spec::new(Kind::Dense, 50_000),
        Spec::new(Kind::DenseCull, 50_000),
        Spec::new(Kind::StopGo, 10_000),
        Spec::new(Kind::RadiusMix, 10_000),
        Spec::new(Kind::SpawnPoints, 10_000),
    ];
    if opts.only.is_empty() {
        if opts.quick {
            // The smoke run keeps one walk with entities staying put
            // (mixed1) and the per-observer radii (radius-mix) of the
            // round-2 workloads.
            specs.retain(|s| {
                s.n <= 10_000 && !matches!(s.kind, Kind::Mixed(10) | Kind::MixedInt | Kind::StopGo)
            });
        }
    } else {
        specs.retain(|s| opts.only.iter().any(|w| s.name.contains(w.as_str())));
        // Any other share staying put, when named in full (`mixed50-10k`).
        for name in &opts.only {
            if !specs.iter().any(|s| &s.name == name) {
                specs.extend(Spec::named(name));
            }
        }
    }
    for spec in &mut specs {
        spec.hysteresis = opts.hysteresis;
        spec.layers = opts.layers;
        spec.blind = opts.blind;
    }
    println!("# lockgrid AOI benchmark\n");
    println!(
        "mode: {}; cpu: {}; threads available: {}\n",
        if opts.quick { "quick" } else { "full" },
        cpu_model(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let mut summary = Summary::default();
    for spec in &specs {
        for &mode in &opts.modes {
            run_workload(spec, mode, &opts, &mut summary);
        }
    }
    summary.print(opts.lockgrid_only);
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|m| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn mode_name(mode: Visibility) -> &'static str {
    match mode {
        Visibility::Grid => "grid",
        Visibility::Radius => "radius",
    }
}

/// What the closing summary needs from one workload and mode.
struct Line {
    workload: String,
    mode: Visibility,
    /// lockgrid's comparable and full-tick medians, ms (the full tick is
    /// not timed with `--lockgrid-only`).
    lockgrid_ms: f64,
    full_ms: Option<f64>,
    /// The fastest agreeing peer's median (ms) and name.
    fastest: Option<(f64, String)>,
    ns_per_pair: f64,
    /// The floor's ns per pair, and the visible pairs it was measured over.
    floor: f64,
    pairs: u64,
}

/// Figures the closing summary compares against the targets.
#[derive(Default)]
struct Summary {
    lines: Vec<Line>,
    max_allocs: f64,
}

impl Summary {
    fn line(&self, workload: &str, mode: Visibility) -> Option<&Line> {
        self.lines
            .iter()
            .find(|l| l.workload == workload && l.mode == mode)
    }

    fn print(&self, lockgrid_only: bool) {
        println!("## Against the targets of issue 5\n");
        for l in &self.lines {
            let peer = match &l.fastest {
                Some((ms, who)) => format!(
                    "lockgrid is {:.2}× as fast as the fastest peer ({who})",
                    ms / l.lockgrid_ms
                ),
                None if lockgrid_only => "peers not run".into(),
                None => "no peer agreed".into(),
            };
            let full = match l.full_ms {
                Some(ms) => format!(
                    "; the full tick with Updates takes {:.2}× the comparable one",
                    ms / l.lockgrid_ms
                ),
                None => String::new(),
            };
            println!(
                "- {} {}: {peer}; {:.1} ns/visible pair = {:.1}× the floor{full}",
                l.workload,
                mode_name(l.mode),
                l.ns_per_pair,
                l.ns_per_pair / l.floor,
            );
        }
        for mode in [Visibility::Grid, Visibility::Radius] {
            if let (Some(a), Some(b)) = (
                self.line("uniform-10k", mode),
                self.line("uniform-100k", mode),
            ) {
                let floor_ns = |l: &Line| l.floor * l.pairs as f64;
                println!(
                    "- growth 10k → 100k, {}: tick time × {:.1} for 10× the entities \
                     (linear is × 10); the floor's pass over the same pairs grows × {:.1}",
                    mode_name(mode),
                    b.lockgrid_ms / a.lockgrid_ms,
                    floor_ns(b) / floor_ns(a)
                );
            }
        }
        println!(
            "- allocations per lockgrid step (both rows, every workload run), at most: {}",
            self.max_allocs
        );
    }
}

fn run_workload(spec: &Spec, mode: Visibility, opts: &Options, summary: &mut Summary) {
    let quick = opts.quick;
    let mut p = plan(spec.n, quick);
    if let Some(t) = opts.ticks {
        p.timed = t.max(1);
    }
    let observers = spec.observers();
    // One pool for both threaded rows, started before any row is built so
    // that no row's bytes count its threads.
    let threads = Threads::new(opts.threads);
    let brute_timed = p.timed.min(if spec.n > 1_000 { 5 } else { 30 });
    eprintln!("running {} {} ...", spec.name, mode_name(mode));
    let max_visible = match opts.max_visible {
        MaxVisible::Auto => {
            let peak = peak_visible(spec, mode, p.warm + p.timed);
            Some(u32::try_from(peak * 5 / 4).unwrap_or(u32::MAX))
        }
        MaxVisible::None => None,
        MaxVisible::Fixed(n) => Some(n),
    };
    let spec = &Spec {
        max_visible,
        ..spec.clone()
    };

    // With --joins, the bold row times its joins (`joins.rs`).
    let timing_joins = opts.joins && opts.threads > 1;
    // Check every peer first; only those that agree are timed.
    let mut lineup: Vec<(String, Result<Entry, String>)> = Vec::new();
    lineup.push((
        "**lockgrid** (Updates throttled away: same work as the peers)".into(),
        Ok(Entry::new(p.timed, || {
            let kernel = Kernel::new(spec, mode, true, &threads);
            match timing_joins {
                true => kernel.timing_joins(),
                false => kernel,
            }
        })),
    ));
    let full = !opts.lockgrid_only || opts.full_tick;
    if full {
        lineup.push((
            "lockgrid, full tick (default throttle, with Updates)".into(),
            Ok(Entry::new(p.timed, || {
                Kernel::new(spec, mode, false, &threads)
            })),
        ));
    }
    // With threads, the serial step runs on the same ticks, interleaved,
    // so that the speed-up is measured in one run: the rows from `serial`
    // on are the serial ones, in the same order as the threaded ones.
    let serial = lineup.len();
    if opts.threads > 1 {
        lineup.push((
            "lockgrid, 1 thread (the serial step of the bold row)".into(),
            Ok(Entry::new(p.timed, || {
                Kernel::new(spec, mode, true, &Threads::new(1))
            })),
        ));
        if full {
            lineup.push((
                "lockgrid, full tick, 1 thread".into(),
                Ok(Entry::new(p.timed, || {
                    Kernel::new(spec, mode, false, &Threads::new(1))
                })),
            ));
        }
    }
    let lockgrid_rows = lineup.len();
    for kind in PEERS {
        let skipped = match kind.skipped(spec, quick) {
            _ if opts.lockgrid_only => Some("skipped: --lockgrid-only"),
            why => why,
        };
        let entry = match skipped {
            Some(why) => Err(why.to_owned()),
            None => match kind {
                PeerKind::FlatSpatial => peer_entry(spec, mode, p, peers::FlatSpatial::new),
                PeerKind::Kiddo => peer_entry(spec, mode, p, peers::Kiddo::new),
                PeerKind::RstarBulk => peer_entry(spec, mode, p, peers::Rstar::bulk),
                PeerKind::RstarIncremental => peer_entry(spec, mode, p, peers::Rstar::incremental),
                PeerKind::PlainGrid => {
                    peer_entry(spec, mode, p, || plain_grid::PlainGrid::new(spec.cells()))
                }
                PeerKind::CrossList => {
                    peer_entry(spec, mode, p, || crosslist::CrossList::new(mode))
                }
                PeerKind::Brute => peer_entry(
                    spec,
                    mode,
                    Plan {
                        timed: brute_timed,
                        ..p
                    },
                    peers::Brute::new,
                ),
            },
        };
        if let Err(why) = &entry {
            if why.starts_with("DISAGREES") {
                eprintln!("{}: {why}", kind.name());
            }
        }
        lineup.push((kind.name().to_owned(), entry));
    }

    // Time them in turn on one command stream, rotating who goes first, so
    // that load from elsewhere on the machine hits every contender alike.
    let mut stream = Stream::new(spec);
    let mut commands = Vec::new();
    let mut live: Vec<&mut Entry> = lineup
        .iter_mut()
        .filter_map(|(_, e)| e.as_mut().ok())
        .collect();
    let mut evictor = opts.cold.then(Evictor::new);
    // On one of the pool's threads, as `lockgrid serve` runs its loop: the
    // threaded rows' joins then allocate nothing (`lockgrid_host::threads`).
    threads.run(|| {
        for tick in 1..=p.warm + p.timed {
            stream.next_tick(&mut commands);
            let n = live.len();
            for k in 0..n {
                let e = &mut live[(k + tick as usize) % n];
                if tick > p.warm + e.timed {
                    continue;
                }
                let mut tally = Tally::default();
                if let Some(evictor) = &mut evictor {
                    evictor.sweep();
                }
                let before = live_bytes();
                let (_, dt, allocs) = measured(|| e.contender.step(&commands, &mut tally));
                e.bytes += live_bytes() - before;
                if tick > p.warm {
                    e.samples.push(dt, allocs, tally);
                }
            }
        }
    });

    let (lg_ms, pairs, floor) = {
        let lg = lineup[0].1.as_ref().expect("lockgrid is always timed");
        (
            lg.samples.median_ms(),
            lg.contender.visible_pairs(),
            lg.contender.floor(),
        )
    };
    let mut full_ms = None;
    let mut joins = None;
    let mut serial_ms = (None, None);
    let mut max_candidates = 0;
    let mut fastest: Option<(f64, String)> = None;
    let mut rows = Vec::new();
    for (k, (name, entry)) in lineup.into_iter().enumerate() {
        let outcome = entry.map(|e| {
            max_candidates = max_candidates.max(e.contender.max_candidates());
            let ms = e.samples.median_ms();
            if k < lockgrid_rows && !(k == 0 && timing_joins) {
                summary.max_allocs = summary.max_allocs.max(e.samples.allocs_per_tick());
            }
            if k == 0 {
                joins = e.contender.joins(e.timed);
            }
            match k {
                1 if full => full_ms = Some(ms),
                _ if k == serial && serial < lockgrid_rows => serial_ms.0 = Some(ms),
                _ if k == serial + 1 && full && serial + 1 < lockgrid_rows => {
                    serial_ms.1 = Some(ms)
                }
                _ => {}
            }
            if k >= lockgrid_rows && fastest.as_ref().is_none_or(|f| ms < f.0) {
                fastest = Some((ms, name.clone()));
            }
            Measured {
                pairs: e.contender.visible_pairs(),
                bytes_per_entity: (e.bytes - e.contender.excluded_bytes()) as f64
                    / f64::from(spec.n),
                samples: e.samples,
            }
        });
        rows.push(Row { name, outcome });
    }

    let mut out = String::new();
    let cells = spec.cells();
    let max_view = spec.max_view(mode);
    let radius = match spec.radii() {
        (lo, hi) if lo == hi => format!("radius {lo}"),
        (lo, hi) => format!("radii {lo}–{hi} (one per observer)"),
    };
    let _ = writeln!(out, "### {} · {}\n", spec.name, mode_name(mode));
    let _ = writeln!(
        out,
        "N = {} ({} observers), world {} × {} units ({} × {} cells of 100), {radius}, \
         hysteresis {}, entities in {} layer(s){}, max_view {max_view}. Ticks: {} checked against the kernel, then per \
         contender {} warm-up and {} timed (brute force: at most {}). Visible pairs at the \
         last tick: {} ({:.1} per observer).",
        spec.n,
        observers,
        spec.side,
        spec.side,
        cells,
        cells,
        spec.hysteresis,
        spec.layers,
        if spec.blind { ", observers blind to the last" } else { "" },
        p.verify,
        p.warm,
        p.timed,
        p.timed.min(if spec.n > 1_000 { 5 } else { 30 }),
        pairs,
        pairs as f64 / f64::from(observers)
    );
    if max_candidates > max_view as usize {
        let _ = writeln!(
            out,
            "Crowd culling is active: the largest candidate set is {max_candidates} > max_view \
             {max_view}; the kernel keeps the nearest by (dist², id) and the adapter applies \
             the same culling for every peer."
        );
    } else if max_candidates > 0 {
        let _ = writeln!(
            out,
            "Largest candidate set {max_candidates} ≤ max_view {max_view}: no culling, like for like."
        );
    }
    let views = match spec.max_visible {
        Some(n) => format!(
            "views reserve 4.5 bytes per visible pair up to max_visible = {n}, 5/4 of the most \
             this run's views held at once unless --max-visible set it: a ring of 4-byte \
             entries and an overflow of an eighth"
        ),
        None => "views reserve max_view × 4.5 bytes per observer: a ring of 4-byte \
                 entries and an overflow of an eighth"
            .to_owned(),
    };
    let _ = writeln!(
        out,
        "Bytes/entity: lockgrid's is everything `World::new` allocates ({views}); a peer's \
         is what its index holds after the last tick, the shared adapter's positions and \
         views left out. Allocations: lockgrid's are counted over `step` alone, a peer's \
         over its whole tick."
    );
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "| contender | ms/tick median | p90 | max | events/tick | of which Update | ns/visible pair | allocs/tick | bytes/entity | time ÷ lockgrid |"
    );
    let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        match &row.outcome {
            Ok(m) => {
                let s = &m.samples;
                let med = s.median_ms();
                let _ = writeln!(
                    out,
                    "| {} | {:.3} | {:.3} | {:.3} | {:.0} | {:.0} | {:.2} | {:.1} | {:.0} | {:.2} |",
                    row.name,
                    med,
                    s.p90_ms(),
                    s.max_ms(),
                    s.per_tick(s.events.total()),
                    s.per_tick(s.events.update),
                    med * 1e6 / m.pairs.max(1) as f64,
                    s.allocs_per_tick(),
                    m.bytes_per_entity,
                    med / lg_ms
                );
            }
            Err(why) => {
                let _ = writeln!(out, "| {} | {} | | | | | | | | |", row.name, why);
            }
        }
    }
    if let Some(serial) = serial_ms.0 {
        let _ = write!(
            out,
            "\n{} threads against the serial step on the same ticks: comparable {:.2}×",
            opts.threads,
            serial / lg_ms
        );
        if let (Some(serial), Some(full)) = (serial_ms.1, full_ms) {
            let _ = write!(out, ", full tick {:.2}×", serial / full);
        }
        let _ = writeln!(out);
    }
    if let Some(joins) = joins {
        let _ = writeln!(out, "\nThe bold row's joins: {joins}");
    }
    let lg_ns = lg_ms * 1e6 / pairs.max(1) as f64;
    let _ = writeln!(
        out,
        "\nFloor: one plain pass over dense position arrays computing dist² for the same \
         {pairs} pairs: {floor:.2} ns/pair; lockgrid is {:.1}× the floor.\n",
        lg_ns / floor
    );
    print!("{out}");
    summary.lines.push(Line {
        workload: spec.name.clone(),
        mode,
        lockgrid_ms: lg_ms,
        full_ms,
        fastest,
        ns_per_pair: lg_ns,
        floor,
        pairs,
    });
}

/// A contender being timed, with what it has measured so far.
struct Entry {
    contender: Box<dyn Contender>,
    /// Ticks to time (brute force gets fewer).
    timed: u64,
    samples: Samples,
    /// Heap bytes it allocated and still holds.
    bytes: i64,
}

impl Entry {
    fn new<C: Contender + 'static>(timed: u64, make: impl FnOnce() -> C) -> Entry {
        let before = live_bytes();
        let contender = Box::new(make());
        Entry {
            contender,
            timed,
            samples: Samples::default(),
            bytes: live_bytes() - before,
        }
    }
}

/// Something that runs ticks: the kernel, or a peer behind the adapter.
/// `Send`, since the timed loop runs on a thread of the kernel's pool.
trait Contender: Send {
    fn step(&mut self, commands: &[Command], tally: &mut Tally);
    fn visible_pairs(&self) -> u64;
    /// Held bytes that are not the contender's own (the shared adapter's).
    fn excluded_bytes(&self) -> i64 {
        0
    }
    fn max_candidates(&self) -> usize {
        0
    }
    /// The dense-array floor over this contender's visible pairs.
    fn floor(&self) -> f64 {
        f64::NAN
    }
    /// With `--joins`, the median shape of its last `timed` steps'
    /// joins (`joins.rs`).
    fn joins(&self, _timed: u64) -> Option<String> {
        None
    }
}

struct Kernel {
    world: World,
    threads: Threads,
    /// Where each task hands its observers' events (`World::step_in_parts`).
    parts: [Part; MAX_WIDTH],
    /// With `--joins`: the threads, timing each join, and every step's
    /// joins.
    clock: Option<(joins::JoinClock, Vec<joins::Shape>)>,
}

/// A task's tally, on a cache line of its own: parts side by side would
/// share lines between the threads counting into them.
#[derive(Clone, Copy, Default)]
#[repr(align(128))]
struct Part(Tally);

impl EventSink for Part {
    fn event(&mut self, event: Event) {
        self.0.event(event);
    }
}

impl Kernel {
    fn new(spec: &Spec, mode: Visibility, rare_updates: bool, threads: &Threads) -> Kernel {
        let mut world =
            World::new(spec.config(mode, rare_updates)).expect("workload configs are valid");
        world.reserve_width(threads.width());
        Kernel {
            world,
            threads: threads.clone(),
            parts: [Part::default(); MAX_WIDTH],
            clock: None,
        }
    }

    /// This kernel stepping through a fork that times its joins.
    fn timing_joins(self) -> Kernel {
        let clock = joins::JoinClock::new(self.threads.clone());
        Kernel {
            clock: Some((clock, Vec::new())),
            ..self
        }
    }

    /// Every live entity's index in the floor's dense arrays (its rank by
    /// id, by id: workload ids are small), the observers' indices, and the
    /// visible pairs in CSR form: offsets per observer into subject indices.
    fn pairs(&self) -> (Vec<u32>, Vec<u32>, Vec<usize>, Vec<u32>) {
        let mut ids: Vec<EntityId> = self.world.entities().map(|e| e.id).collect();
        ids.sort_unstable();
        let top = ids.last().map_or(0, |&id| id as usize + 1);
        let mut index = vec![u32::MAX; top];
        for (&id, i) in ids.iter().zip(0..) {
            index[id as usize] = i;
        }
        let (mut observers, mut offsets, mut subjects) = (Vec::new(), vec![0], Vec::new());
        for &o in &ids {
            let Some(view) = self.world.view(o) else {
                continue;
            };
            observers.push(index[o as usize]);
            subjects.extend(view.map(|s| index[s as usize]));
            offsets.push(subjects.len());
        }
        (index, observers, offsets, subjects)
    }
}

impl Contender for Kernel {
    fn step(&mut self, commands: &[Command], tally: &mut Tally) {
        match &mut self.clock {
            Some((clock, shapes)) => {
                clock.begin();
                self.world
                    .step_in_parts(commands, tally, &mut self.parts, &*clock);
                shapes.push(clock.end());
            }
            None => {
                self.world
                    .step_in_parts(commands, tally, &mut self.parts, &self.threads);
            }
        }
        for part in &mut self.parts {
            tally.add(std::mem::take(part).0);
        }
    }

    fn joins(&self, timed: u64) -> Option<String> {
        let (_, shapes) = self.clock.as_ref()?;
        let from = shapes.len().saturating_sub(timed as usize);
        joins::summary(&shapes[from..])
    }

    fn visible_pairs(&self) -> u64 {
        let views = self.world.entities().filter_map(|e| self.world.view(e.id));
        views.map(|view| view.count() as u64).sum()
    }

    fn floor(&self) -> f64 {
        let (index, observers, offsets, subjects) = self.pairs();
        let n = self.world.len() as usize;
        let (mut x, mut y) = (vec![0; n], vec![0; n]);
        for e in self.world.entities() {
            x[index[e.id as usize] as usize] = e.pos.x.to_bits();
            y[index[e.id as usize] as usize] = e.pos.y.to_bits();
        }
        floor_ns_per_pair(&x, &y, &observers, &offsets, &subjects)
    }
}

struct Peered<P: Peer> {
    adapter: Adapter,
    peer: P,
    max_candidates: usize,
}

impl<P: Peer> Contender for Peered<P> {
    fn step(&mut self, commands: &[Command], tally: &mut Tally) {
        self.adapter.step(commands, &mut self.peer, tally);
        self.max_candidates = self.max_candidates.max(self.adapter.max_candidates);
    }

    fn visible_pairs(&self) -> u64 {
        self.adapter.visible_pairs()
    }

    fn excluded_bytes(&self) -> i64 {
        self.adapter.heap_bytes() as i64
    }

    fn max_candidates(&self) -> usize {
        self.max_candidates
    }
}

/// Checks a peer against the kernel and, if it agrees, readies it for timing.
fn peer_entry<P: Peer + 'static>(
    spec: &Spec,
    mode: Visibility,
    p: Plan,
    make: impl Fn() -> P,
) -> Result<Entry, String> {
    verify(spec, mode, p.verify, make())?;
    Ok(Entry::new(p.timed, || Peered {
        adapter: Adapter::new(mode, spec.max_view(mode), spec.band_q()),
        peer: make(),
        max_candidates: 0,
    }))
}

/// The most visible pairs the workload's views hold together at the end of
/// any of its first `ticks` ticks, without a bound.
fn peak_visible(spec: &Spec, mode: Visibility, ticks: u64) -> u64 {
    let config = Config {
        max_visible: None,
        ..spec.config(mode, true)
    };
    let mut world = World::new(config).expect("workload configs are valid");
    let mut stream = Stream::new(spec);
    let (mut commands, mut peak) = (Vec::new(), 0u64);
    let mut sink = lockgrid_kernel::CountingSink::default();
    for _ in 0..ticks {
        stream.next_tick(&mut commands);
        world.step(&commands, &mut sink);
        let held = world
            .entities()
            .filter(|e| e.observer)
            .filter_map(|e| world.view(e.id).map(|v| v.count() as u64))
            .sum::<u64>();
        peak = peak.max(held);
    }
    peak
}

/// Runs the kernel and a peer side by side for `ticks` ticks and compares
/// every observer's visible set and the tick's Enter/Leave counts.
fn verify<P: Peer>(spec: &Spec, mode: Visibility, ticks: u64, mut peer: P) -> Result<(), String> {
    let mut world = World::new(spec.config(mode, true)).expect("workload configs are valid");
    let mut adapter = Adapter::new(mode, spec.max_view(mode), spec.band_q());
    let mut stream = Stream::new(spec);
    let mut commands = Vec::new();
    for tick in 1..=ticks {
        stream.next_tick(&mut commands);
        let (mut theirs, mut ours) = (Tally::default(), Tally::default());
        world.step(&commands, &mut ours);
        adapter.step(&commands, &mut peer, &mut theirs);
        for &seat in adapter.observers() {
            let o = adapter.id(seat);
            let kernel: Vec<u64> = world.view(o).map(Iterator::collect).unwrap_or_default();
            let got: Vec<u64> = adapter.view(seat).iter().map(|&s| u64::from(s)).collect();
            if kernel != got {
                let missing: Vec<u64> = kernel
                    .iter()
                    .filter(|s| !got.contains(s))
                    .copied()
                    .collect();
                let extra: Vec<u64> = got
                    .iter()
                    .filter(|s| !kernel.contains(s))
                    .copied()
                    .collect();
                return Err(format!(
                    "DISAGREES at tick {tick}, observer {o}: kernel sees {} subjects, peer {}; \
                     missing {:?}, extra {:?}",
                    kernel.len(),
                    got.len(),
                    &missing[..missing.len().min(5)],
                    &extra[..extra.len().min(5)]
                ));
            }
        }
        if (ours.enter, ours.leave) != (theirs.enter, theirs.leave) {
            return Err(format!(
                "DISAGREES at tick {tick}: kernel {} enters / {} leaves, peer {} / {}",
                ours.enter, ours.leave, theirs.enter, theirs.leave
            ));
        }
    }
    Ok(())
}
