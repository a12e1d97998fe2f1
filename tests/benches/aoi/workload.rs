//! The workloads: seeded, deterministic command streams that every contender
//! is fed identically.
//!
//! Positions live on a 1/256 lattice (`Q` units). That keeps them exact in
//! the kernel's `I48F16`, in `f32` (flat_spatial) and `f64` (kiddo, rstar),
//! and keeps every squared distance up to the largest world exact in `f64`,
//! so the float-based peers can agree with the kernel bit for bit.

use lockgrid_kernel::{Command, Config, EntityId, Fix, Move, Pos, Spawn, Visibility};
use lockgrid_tests::gen::Rng;

/// Lattice steps per world unit.
pub const Q: i64 = 256;
/// Cell edge and view radius, in world units.
pub const CELL: i64 = 100;
pub const RADIUS: i64 = 100;
/// Largest random-walk step per axis per tick, in world units.
pub const STEP: i64 = 5;
/// View capacity given to the kernel (and applied by the adapter), unless
/// the workload sets its own ([`Spec::max_view`]).
pub const MAX_VIEW: u32 = 512;
/// The view capacity of the dense workload with culling: below the visible
/// set of nearly every observer in both modes.
pub const CULL_VIEW: u32 = 256;
/// The view radii of the mixed-radius workload, in world units.
pub const RADIUS_MIX: (i64, i64) = (50, 150);
/// The spawn-point workload: how many spots, one in how many entities
/// standing on them, and the view capacity: below what a spot holds (500
/// at 10k), above what the walkers alone fill in either mode (about 80 in
/// a disc, 225 in nine cells).
pub const SPAWN_POINTS: u32 = 2;
pub const SPAWN_SHARE: u32 = 10;
pub const SPAWN_VIEW: u32 = 256;

/// A fixed-point coordinate from lattice units.
pub fn fix_of_q(q: i64) -> Fix {
    Fix::from_bits(q * (65536 / Q))
}

/// Uniform in `lo..=hi` (the tiny modulo bias does not matter here).
fn range(rng: &mut Rng, lo: i64, hi: i64) -> i64 {
    lo + rng.below((hi - lo + 1) as u64) as i64
}

/// True with probability `per_mille / 1000`.
fn chance(rng: &mut Rng, per_mille: u64) -> bool {
    rng.below(1000) < per_mille
}

/// What varies between workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Everyone walks, everyone observes.
    Uniform,
    /// 20% of the entities walk inside a 2×2-cell square in the middle.
    Hotspot,
    /// 5% of the entities (drawn anew each tick) jump anywhere.
    Teleport,
    /// Only 5% of the entities are observers.
    Npc,
    /// 5% of the entities (drawn anew each tick) take a step; the others
    /// stand still and send no command.
    Calm,
    /// The hotspot's crowd at rest: its layout, the calm workload's steps
    /// (the town square on an ordinary evening).
    Town,
    /// The uniform walk, and 1% of the entities (drawn anew each tick)
    /// leave and come back elsewhere under a fresh id, as players log out
    /// and in: entities spawn and despawn every tick, and ids lose all
    /// relation to the order they were first placed in.
    Churn,
    /// The uniform walk, but this percentage of the entities (drawn anew
    /// each tick) stays put and sends no command: `mixed1` and `mixed10`
    /// in every run, any other (`mixed50-10k`) when named.
    Mixed(u8),
    /// The uniform walk with steps of whole units, −5..=5 per axis: a zero
    /// step on both axes (1 entity in 121) is a Move to where it stands.
    MixedInt,
    /// Five times the uniform density (the world of uniform-10k holds 50 000
    /// entities, about 390 visible per observer in radius mode), everyone
    /// walking; the view capacity is large enough that nothing is culled.
    Dense,
    /// The dense walk with a view capacity of [`CULL_VIEW`]: nearly every
    /// observer keeps only its nearest.
    DenseCull,
    /// Each entity walks for a random 5–40 ticks, then stands (sends no
    /// command) for a random 5–40 ticks, and so on.
    StopGo,
    /// Observers' view radii spread over 50–150 units (half to one and a
    /// half cells), and 1% of the entities stay put each tick as in mixed1.
    RadiusMix,
    /// One entity in [`SPAWN_SHARE`] stands (sends no command) on one of
    /// [`SPAWN_POINTS`] spots, all of a spot's on the very same point, as
    /// players do at a spawn point or a banker; the others walk, through
    /// them. With a view capacity of [`SPAWN_VIEW`], the views near a spot
    /// are culled and their cut-offs fall among subjects at one distance
    /// (on the spot: everyone at distance 0), ties broken by id by the
    /// hundred; views away from the spots are not.
    SpawnPoints,
}

impl Kind {
    /// The number that seeds this kind's stream: its place in the list
    /// above, as before the mixed walks took a share (so that every stream
    /// stays the one measured before), and 100 + the share for the others.
    fn code(self) -> u64 {
        match self {
            Kind::Uniform => 0,
            Kind::Hotspot => 1,
            Kind::Teleport => 2,
            Kind::Npc => 3,
            Kind::Calm => 4,
            Kind::Town => 5,
            Kind::Churn => 6,
            Kind::Mixed(1) => 7,
            Kind::Mixed(10) => 8,
            Kind::Mixed(percent) => 100 + u64::from(percent),
            Kind::MixedInt => 9,
            Kind::Dense => 10,
            Kind::DenseCull => 11,
            Kind::StopGo => 12,
            Kind::RadiusMix => 13,
            Kind::SpawnPoints => 14,
        }
    }
}

/// One workload: a kind, a size, and a world that holds density constant
/// (2000 × 2000 units at 10 000 entities).
#[derive(Clone, Debug)]
pub struct Spec {
    pub name: String,
    pub kind: Kind,
    pub n: u32,
    /// World edge in world units.
    pub side: i64,
    pub seed: u64,
    /// The kernel's bound on the visible pairs of all views together.
    pub max_visible: Option<u32>,
    /// The hysteresis band in world units (radius mode): a subject enters
    /// at `r` and leaves beyond `r + hysteresis`.
    pub hysteresis: i64,
    /// How many layers the entities are spread over, seat `i` in layer
    /// `i % layers` alone; observers are interested in every layer, so
    /// who sees whom is the same for any count.
    pub layers: u32,
    /// Observers blind to the last of the `layers` (above 1): its
    /// entities are hidden from everyone.
    pub blind: bool,
}

impl Spec {
    /// A workload named `mixed<P>-<N>k` (`P` below 100, `N` from 1 to
    /// 100): the uniform walk of `N` thousand entities with `P`% staying
    /// put, so that any share can be measured, not only the two that every
    /// run has.
    pub fn named(name: &str) -> Option<Spec> {
        let (percent, size) = name.strip_prefix("mixed")?.split_once('-')?;
        let percent: u8 = percent.parse().ok().filter(|&p| p < 100)?;
        let thousands: u32 = size
            .strip_suffix('k')?
            .parse()
            .ok()
            .filter(|k| (1..=100).contains(k))?;
        Some(Spec::new(Kind::Mixed(percent), thousands * 1000))
    }

    pub fn new(kind: Kind, n: u32) -> Spec {
        let mixed;
        let label = match kind {
            Kind::Uniform => "uniform",
            Kind::Hotspot => "hotspot",
            Kind::Teleport => "teleport",
            Kind::Npc => "npc",
            Kind::Calm => "calm",
            Kind::Town => "town",
            Kind::Churn => "churn",
            Kind::Mixed(percent) => {
                mixed = format!("mixed{percent}");
                &mixed
            }
            Kind::MixedInt => "mixed-int",
            Kind::Dense => "dense",
            Kind::DenseCull => "dense-cull",
            Kind::StopGo => "stopgo",
            Kind::RadiusMix => "radius-mix",
            Kind::SpawnPoints => "spawn-points",
        };
        let size = if n.is_multiple_of(1000) {
            format!("{}k", n / 1000)
        } else {
            n.to_string()
        };
        // Constant density: 400 square units per entity (80 when dense).
        let per_entity = match kind {
            Kind::Dense | Kind::DenseCull => 80.0,
            _ => 400.0,
        };
        let side = (per_entity * f64::from(n)).sqrt().round() as i64;
        Spec {
            name: format!("{label}-{size}"),
            kind,
            n,
            side,
            seed: 0x6c67_6272_6964 ^ u64::from(n) ^ (kind.code() << 40),
            max_visible: None,
            hysteresis: 0,
            layers: 1,
            blind: false,
        }
    }

    pub fn is_observer(&self, i: u32) -> bool {
        self.kind != Kind::Npc || i.is_multiple_of(20)
    }

    pub fn observers(&self) -> u32 {
        (0..self.n).filter(|&i| self.is_observer(i)).count() as u32
    }

    fn is_hot(&self, i: u32) -> bool {
        matches!(self.kind, Kind::Hotspot | Kind::Town) && i.is_multiple_of(5)
    }

    /// The spot (lattice units) entity `i` stands on for good, if any:
    /// spots on a diagonal, a third of the world apart.
    fn spot(&self, i: u32) -> Option<(i64, i64)> {
        if self.kind != Kind::SpawnPoints || !i.is_multiple_of(SPAWN_SHARE) {
            return None;
        }
        let k = i64::from((i / SPAWN_SHARE) % SPAWN_POINTS + 1);
        let at = self.side * k / i64::from(SPAWN_POINTS + 1) * Q;
        Some((at, at))
    }

    /// The view capacity: [`MAX_VIEW`], except in the dense workloads,
    /// where it is above every candidate set (nothing culled) or
    /// [`CULL_VIEW`] (nearly everyone culled), and the spawn-point one
    /// ([`SPAWN_VIEW`]: views near a spot culled). In grid mode the nine
    /// cells hold about 1 125 entities at the dense workload's density.
    pub fn max_view(&self, mode: Visibility) -> u32 {
        match (self.kind, mode) {
            (Kind::Dense, Visibility::Grid) => 1_536,
            (Kind::Dense, Visibility::Radius) => 640,
            (Kind::DenseCull, _) => CULL_VIEW,
            (Kind::SpawnPoints, _) => SPAWN_VIEW,
            _ => MAX_VIEW,
        }
    }

    /// The view radii, in world units: one for all, or a range.
    pub fn radii(&self) -> (i64, i64) {
        match self.kind {
            Kind::RadiusMix => RADIUS_MIX,
            _ => (RADIUS, RADIUS),
        }
    }

    pub fn cells(&self) -> u32 {
        ((self.side + CELL - 1) / CELL) as u32
    }

    /// The half-open square (lattice units, per axis) an entity walks in.
    fn bounds(&self, i: u32) -> (i64, i64) {
        if self.is_hot(i) {
            let mid = i64::from(self.cells() / 2) * CELL;
            ((mid - CELL) * Q, (mid + CELL) * Q)
        } else {
            (0, self.side * Q)
        }
    }

    /// The hysteresis band in lattice units.
    pub fn band_q(&self) -> i64 {
        self.hysteresis * Q
    }

    /// The kernel config for this workload. `rare_updates` sets the throttle
    /// so that (almost) no Update is ever due: the kernel then does the same
    /// work as the peers, visible sets plus Enter/Leave.
    pub fn config(&self, mode: Visibility, rare_updates: bool) -> Config {
        let mut c = Config {
            origin: Pos::from_ints(0, 0),
            cell_size: fix_of_q(CELL * Q),
            width_cells: self.cells(),
            height_cells: self.cells(),
            visibility: mode,
            hysteresis: fix_of_q(self.band_q()),
            max_entities: self.n,
            max_observers: self.observers(),
            max_view: self.max_view(mode),
            max_visible: self.max_visible,
            ..Config::default()
        };
        if rare_updates {
            c.update_interval = u64::MAX;
            c.move_epsilon = Fix::MAX;
            c.dir_epsilon = 32768;
        }
        c
    }
}

/// The command stream of one workload: tick 1 spawns everyone, every later
/// tick moves everyone (in the calm and town workloads, 5% of them; in the
/// churn workload, 1% despawn and spawn again instead; in the mixed,
/// stop-and-go, mixed-radius and spawn-point workloads, those standing
/// send nothing).
/// Two streams built from one spec are identical.
pub struct Stream {
    spec: Spec,
    rng: Rng,
    /// Current positions in lattice units, by seat: the entity that holds
    /// it now (in the churn workload, a seat changes hands).
    pos: Vec<(i64, i64)>,
    /// The id holding each seat; seat `i` starts with id `i`.
    ids: Vec<EntityId>,
    next_id: EntityId,
    tick: u64,
    /// Stop-and-go: whether each seat walks, and for how many more ticks.
    phase: Vec<(bool, u32)>,
    /// Each seat's view radius in world units (observers).
    radius: Vec<i64>,
}

impl Stream {
    pub fn new(spec: &Spec) -> Stream {
        Stream {
            spec: spec.clone(),
            rng: Rng::new(spec.seed),
            pos: Vec::with_capacity(spec.n as usize),
            ids: (0..EntityId::from(spec.n)).collect(),
            next_id: EntityId::from(spec.n),
            tick: 0,
            phase: Vec::new(),
            radius: Vec::new(),
        }
    }

    /// Fills `out` with the next tick's commands.
    pub fn next_tick(&mut self, out: &mut Vec<Command>) {
        out.clear();
        self.tick += 1;
        if self.tick == 1 {
            for i in 0..self.spec.n {
                let (lo, hi) = self.spec.bounds(i);
                let p = (
                    range(&mut self.rng, lo, hi - 1),
                    range(&mut self.rng, lo, hi - 1),
                );
                self.pos.push(self.spec.spot(i).unwrap_or(p));
                // Only the workloads that use them draw these, so the
                // others' streams stay as they were.
                let (r_lo, r_hi) = self.spec.radii();
                self.radius.push(match r_lo == r_hi {
                    true => r_lo,
                    false => range(&mut self.rng, r_lo, r_hi),
                });
                if self.spec.kind == Kind::StopGo {
                    let walks = chance(&mut self.rng, 500);
                    self.phase.push((walks, range(&mut self.rng, 1, 40) as u32));
                }
                out.push(Command::Spawn(self.spawn(i)));
            }
            return;
        }
        let step = STEP * Q;
        for i in 0..self.spec.n {
            let calm = matches!(self.spec.kind, Kind::Calm | Kind::Town);
            if calm && !chance(&mut self.rng, 50) {
                continue;
            }
            let stays = match self.spec.kind {
                Kind::RadiusMix => 10,
                Kind::Mixed(percent) => 10 * u64::from(percent),
                _ => 0,
            };
            if stays > 0 && chance(&mut self.rng, stays) {
                continue;
            }
            if self.spec.spot(i).is_some() {
                continue;
            }
            if self.spec.kind == Kind::StopGo {
                let (walks, left) = &mut self.phase[i as usize];
                if *left == 0 {
                    *walks = !*walks;
                    *left = range(&mut self.rng, 5, 40) as u32;
                }
                *left -= 1;
                if !*walks {
                    continue;
                }
            }
            let (lo, hi) = self.spec.bounds(i);
            if self.spec.kind == Kind::Churn && chance(&mut self.rng, 10) {
                // The seat's entity leaves; a new one comes in elsewhere.
                out.push(Command::Despawn {
                    id: self.ids[i as usize],
                });
                self.ids[i as usize] = self.next_id;
                self.next_id += 1;
                self.pos[i as usize] = (
                    range(&mut self.rng, lo, hi - 1),
                    range(&mut self.rng, lo, hi - 1),
                );
                out.push(Command::Spawn(self.spawn(i)));
                continue;
            }
            let p = &mut self.pos[i as usize];
            if self.spec.kind == Kind::Teleport && chance(&mut self.rng, 50) {
                *p = (
                    range(&mut self.rng, lo, hi - 1),
                    range(&mut self.rng, lo, hi - 1),
                );
            } else if self.spec.kind == Kind::MixedInt {
                p.0 = reflect(p.0 + range(&mut self.rng, -STEP, STEP) * Q, lo, hi);
                p.1 = reflect(p.1 + range(&mut self.rng, -STEP, STEP) * Q, lo, hi);
            } else {
                p.0 = reflect(p.0 + range(&mut self.rng, -step, step), lo, hi);
                p.1 = reflect(p.1 + range(&mut self.rng, -step, step), lo, hi);
            }
            out.push(Command::Move(Move {
                id: self.ids[i as usize],
                pos: pos_of(*p),
                dir: 0,
                speed: Fix::ZERO,
            }));
        }
    }
}

impl Stream {
    /// The spawn of seat `i`'s entity where the seat is.
    fn spawn(&self, i: u32) -> Spawn {
        let (id, at) = (self.ids[i as usize], pos_of(self.pos[i as usize]));
        let spawn = match self.spec.is_observer(i) {
            true => Spawn::observer(id, at, fix_of_q(self.radius[i as usize] * Q)),
            false => Spawn::npc(id, at),
        };
        let layers = self.spec.layers.clamp(1, 32);
        Spawn {
            layers: 1 << (i % layers),
            interest: match self.spec.blind && layers > 1 {
                true => !(1 << (layers - 1)),
                false => u32::MAX,
            },
            ..spawn
        }
    }
}

/// Keeps a walk inside `lo..hi` by reflecting off the walls.
fn reflect(p: i64, lo: i64, hi: i64) -> i64 {
    if p < lo {
        2 * lo - p
    } else if p >= hi {
        2 * (hi - 1) - p
    } else {
        p
    }
}

fn pos_of((x, y): (i64, i64)) -> Pos {
    Pos::new(fix_of_q(x), fix_of_q(y))
}
