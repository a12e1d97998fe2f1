//! Random scenarios.
//!
//! Proptest strategies draw abstract operations ("walk slot 3 a little to the
//! left", "teleport slot 5", "spawn at the world's far edge"), which are then
//! turned into concrete [`Command`]s against the drawn [`Config`]. Keeping
//! the operations abstract lets proptest shrink a failure to a few readable
//! commands, and keeps most commands inside the world so the interesting
//! cases (borders, hysteresis bands, crowds) actually happen.

use std::collections::BTreeMap;

use lockgrid_kernel::{
    Command, Config, Dir, EntityId, Fix, Move, Pos, Spawn, Visibility, MAX_RADIUS,
};
use proptest::prelude::*;

/// A config and the commands of each tick; the first entry is tick 1.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// The world's config.
    pub config: Config,
    /// Commands per tick.
    pub ticks: Vec<Vec<Command>>,
}

/// The ids scenarios use, by slot: small ones first, then the extremes.
pub const IDS: [EntityId; 16] = [
    1,
    2,
    3,
    4,
    5,
    6,
    0,
    u64::MAX,
    7,
    8,
    1 << 32,
    u64::MAX - 1,
    9,
    10,
    11,
    12,
];

/// The id of a slot: [`IDS`] first, then `1000 + slot`.
pub fn id_of(slot: u8) -> EntityId {
    IDS.get(usize::from(slot))
        .copied()
        .unwrap_or(1000 + u64::from(slot))
}

/// How big and how constrained a generated scenario is.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Most ticks.
    pub ticks: usize,
    /// Most commands in one tick.
    pub commands: usize,
    /// How many distinct ids (at most 255).
    pub ids: usize,
    /// Most cells along each axis.
    pub cells: u32,
    /// Capacities large enough never to reject (for order-independence tests).
    pub roomy: bool,
    /// Only this visibility mode, or both.
    pub mode: Option<Visibility>,
}

impl Shape {
    /// Two dozen ticks of up to 8 commands over 10 ids, both modes, small capacities.
    pub const DEFAULT: Shape = Shape {
        ticks: 24,
        commands: 8,
        ids: 10,
        cells: 8,
        roomy: false,
        mode: None,
    };
}

impl Default for Shape {
    fn default() -> Self {
        Shape::DEFAULT
    }
}

/// A place in or near the world.
#[derive(Clone, Copy, Debug)]
enum Place {
    /// A point inside the world, as fractions (of 65536) of its extent.
    Inside(u16, u16),
    /// A point of a half-cell lattice near the origin: entities share points
    /// and distances, so crowds, culling ties and exact cell borders happen.
    Lattice(u8, u8),
    /// One of a few hand-picked border cases, some of them outside.
    Edge(u8),
}

/// Where a move goes.
#[derive(Clone, Copy, Debug)]
enum Target {
    /// Anywhere: a teleport.
    Place(Place),
    /// A short walk from the last position, in sixteenths of a cell.
    Step(i8, i8),
    /// The same position again.
    Stay,
}

/// How a move changes the heading.
#[derive(Clone, Copy, Debug)]
enum Turn {
    Keep,
    By(i16),
    To(u16),
}

/// A spawn's radius.
#[derive(Clone, Copy, Debug)]
enum Radius {
    /// In sixteenths of a cell.
    Cells16(u8),
    Max,
    Negative,
    TooBig,
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Spawn {
        slot: Slot,
        at: Place,
        observer: bool,
        radius: Radius,
        layers: u32,
        interest: u32,
        dir: u16,
        speed: i8,
    },
    Move {
        slot: Slot,
        to: Target,
        turn: Turn,
        speed: i8,
    },
    Despawn {
        slot: Slot,
    },
}

fn fix_raw(raw: i64) -> Fix {
    Fix::from_bits(raw)
}

fn place() -> impl Strategy<Value = Place> {
    prop_oneof![
        6 => (any::<u16>(), any::<u16>()).prop_map(|(x, y)| Place::Inside(x, y)),
        3 => (any::<u8>(), any::<u8>()).prop_map(|(x, y)| Place::Lattice(x, y)),
        1 => (0u8..8).prop_map(Place::Edge),
    ]
}

fn target() -> impl Strategy<Value = Target> {
    prop_oneof![
        2 => place().prop_map(Target::Place),
        6 => (-24i8..=24, -24i8..=24).prop_map(|(x, y)| Target::Step(x, y)),
        1 => (-1i8..=1, -1i8..=1).prop_map(|(x, y)| Target::Step(x, y)),
        2 => Just(Target::Stay),
    ]
}

fn turn() -> impl Strategy<Value = Turn> {
    prop_oneof![
        4 => Just(Turn::Keep),
        2 => (-400i16..=400).prop_map(Turn::By),
        1 => any::<u16>().prop_map(Turn::To),
    ]
}

fn speed() -> impl Strategy<Value = i8> {
    prop_oneof![30 => 0i8..=8, 1 => Just(-1i8), 1 => any::<i8>()]
}

fn radius() -> impl Strategy<Value = Radius> {
    prop_oneof![
        40 => (0u8..=64).prop_map(Radius::Cells16),
        1 => Just(Radius::Max),
        1 => Just(Radius::Negative),
        1 => Just(Radius::TooBig),
    ]
}

fn mask() -> impl Strategy<Value = u32> {
    prop_oneof![6 => Just(u32::MAX), 3 => Just(1u32), 2 => Just(2u32), 1 => Just(3u32), 1 => Just(0u32)]
}

/// Which id a command names: usually one the generator believes is alive
/// (for moves and despawns) or free (for spawns), sometimes any.
#[derive(Clone, Copy, Debug)]
struct Slot {
    index: u8,
    aimed: bool,
}

fn slot(ids: usize) -> impl Strategy<Value = Slot> {
    (0..ids as u8, prop::bool::weighted(0.9)).prop_map(|(index, aimed)| Slot { index, aimed })
}

fn op(ids: usize) -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (slot(ids), place(), any::<bool>(), radius(), mask(), mask(), any::<u16>(), speed()).prop_map(
            |(slot, at, observer, radius, layers, interest, dir, speed)| Op::Spawn {
                slot,
                at,
                observer,
                radius,
                layers,
                interest,
                dir,
                speed,
            }
        ),
        7 => (slot(ids), target(), turn(), speed())
            .prop_map(|(slot, to, turn, speed)| Op::Move { slot, to, turn, speed }),
        1 => slot(ids).prop_map(|slot| Op::Despawn { slot }),
    ]
}

/// Configs across both modes, negative and fractional origins, tiny and
/// large cells, hysteresis, throttle settings and (unless `roomy`) small
/// capacities.
pub fn config(shape: Shape) -> impl Strategy<Value = Config> {
    let origin = prop_oneof![
        2 => Just(0i64),
        3 => (-3000i64..3000, 0i64..65536).prop_map(|(i, f)| (i << 16) + f),
        1 => Just(-(1i64 << 40)),
    ];
    let cell = prop_oneof![
        3 => Just(100i64 << 16),
        3 => (1i64..=200).prop_map(|c| c << 16),
        2 => (1i64 << 12)..(300i64 << 16),
    ];
    let mode = match shape.mode {
        Some(m) => Just(m).boxed(),
        None => prop_oneof![Just(Visibility::Grid), Just(Visibility::Radius)].boxed(),
    };
    let hysteresis = prop_oneof![2 => Just(0u16), 3 => any::<u16>()];
    let throttle = (
        prop_oneof![12 => 0u64..=4, 1 => Just(u64::MAX), 1 => any::<u64>()],
        // Fractions of half a cell; 65535 stands for "never by distance".
        prop_oneof![2 => Just(0u16), 6 => any::<u16>(), 1 => Just(u16::MAX)],
        prop_oneof![1 => Just(0u16), 1 => Just(182u16), 1 => any::<u16>()],
    );
    let capacity = (
        prop_oneof![1 => 1u32..=3, 3 => 4u32..=14],
        any::<u32>(),
        any::<u32>(),
        any::<u32>(),
    );
    (
        (origin.clone(), origin),
        cell,
        (1..=shape.cells.max(1), 1..=shape.cells.max(1)),
        mode,
        hysteresis,
        throttle,
        capacity,
    )
        .prop_map(
            move |(
                (ox, oy),
                cell,
                (w, h),
                visibility,
                hyst,
                (interval, move_eps, dir_eps),
                (cap, o, v, b),
            )| {
                let (max_entities, max_observers) = if shape.roomy {
                    (256, 256)
                } else {
                    (cap, o % (cap + 1))
                };
                Config {
                    origin: Pos::new(fix_raw(ox), fix_raw(oy)),
                    cell_size: fix_raw(cell),
                    width_cells: w,
                    height_cells: h,
                    visibility,
                    // Up to two cells; a band wider than the radius is legal.
                    hysteresis: fix_raw(scale(cell * 2, hyst)),
                    update_interval: interval,
                    move_epsilon: if move_eps == u16::MAX {
                        Fix::MAX
                    } else {
                        fix_raw(scale(cell / 2, move_eps))
                    },
                    dir_epsilon: dir_eps,
                    max_entities,
                    max_observers,
                    // Small views happen often, so culling does.
                    max_view: if v % 3 == 0 {
                        max_entities
                    } else {
                        (v % 5).min(max_entities)
                    },
                    // A third of the worlds bound their visible pairs,
                    // mostly below what their views want, so the bound cuts.
                    max_visible: (b % 3 == 0).then_some(b / 3 % 24),
                }
            },
        )
}

/// `len * frac / 65536`.
fn scale(len: i64, frac: u16) -> i64 {
    (i128::from(len) * i128::from(frac) / 65536) as i64
}

/// Random scenarios of the given shape.
pub fn scenario(shape: Shape) -> impl Strategy<Value = Scenario> {
    let ids = shape.ids.clamp(1, 255);
    let ticks = proptest::collection::vec(
        proptest::collection::vec(op(ids), 0..=shape.commands),
        1..=shape.ticks,
    );
    (config(shape), ticks).prop_map(move |(config, ops)| materialise(config, ids as u8, &ops))
}

/// What the generator remembers of a slot between commands, so walks start
/// from where the entity last was asked to be.
#[derive(Clone, Copy)]
struct Last {
    pos: Pos,
    dir: Dir,
}

fn materialise(config: Config, ids: u8, ticks: &[Vec<Op>]) -> Scenario {
    let cell = config.cell_size.to_bits();
    let extent = |n: u32| i128::from(cell) * i128::from(n);
    let (ox, oy) = (config.origin.x.to_bits(), config.origin.y.to_bits());
    let (ex, ey) = (extent(config.width_cells), extent(config.height_cells));
    let at = |p: Place| -> Pos {
        let raw = |o: i64, e: i128, f: u16| (i128::from(o) + e * i128::from(f) / 65536) as i64;
        match p {
            Place::Inside(fx, fy) => Pos::new(fix_raw(raw(ox, ex, fx)), fix_raw(raw(oy, ey, fy))),
            Place::Lattice(i, j) => {
                let half = i128::from(cell / 2);
                // Only a 4 × 4 patch of it, so entities crowd together.
                let n = |cells: u32| (2 * i128::from(cells)).min(4);
                let x = i128::from(ox) + half * (i128::from(i) % n(config.width_cells));
                let y = i128::from(oy) + half * (i128::from(j) % n(config.height_cells));
                Pos::new(fix_raw(x as i64), fix_raw(y as i64))
            }
            Place::Edge(k) => {
                let far_x = (i128::from(ox) + ex) as i64;
                let far_y = (i128::from(oy) + ey) as i64;
                let mid_x =
                    (i128::from(ox) + i128::from(cell) * i128::from(config.width_cells / 2)) as i64;
                let (x, y) = match k {
                    0 => (ox, oy),
                    1 => (ox - 1, oy),
                    2 => (far_x - 1, far_y - 1),
                    3 => (far_x, oy),
                    4 => (ox, far_y),
                    5 => (i64::MIN, oy),
                    6 => (ox, i64::MAX),
                    _ => (mid_x, far_y - 1),
                };
                Pos::new(fix_raw(x), fix_raw(y))
            }
        }
    };
    let speed = |s: i8| fix_raw(i64::from(s) << 14);
    let mut last: BTreeMap<u8, Last> = BTreeMap::new();
    // Slots the generator believes alive (and whether each is an observer),
    // tracked by the spawn rules so that most moves name a live entity.
    let mut alive: BTreeMap<u8, bool> = BTreeMap::new();
    let mut out = Vec::with_capacity(ticks.len());
    for ops in ticks {
        let mut commands = Vec::with_capacity(ops.len());
        for &op in ops {
            // Moves name a live slot, spawns a free one, unless the op is unaimed.
            let pick = |s: Slot, alive: &BTreeMap<u8, bool>, want_alive: bool| -> u8 {
                let pool: Vec<u8> = (0..ids)
                    .filter(|i| alive.contains_key(i) == want_alive)
                    .collect();
                if s.aimed && !pool.is_empty() {
                    pool[usize::from(s.index) % pool.len()]
                } else {
                    s.index
                }
            };
            match op {
                Op::Spawn {
                    slot,
                    at: place,
                    observer,
                    radius,
                    layers,
                    interest,
                    dir,
                    speed: s,
                } => {
                    let slot = pick(slot, &alive, false);
                    let pos = at(place);
                    let radius = match radius {
                        Radius::Cells16(k) => fix_raw(cell / 16 * i64::from(k)),
                        Radius::Max => MAX_RADIUS,
                        Radius::Negative => fix_raw(-1),
                        Radius::TooBig => fix_raw(MAX_RADIUS.to_bits() + 1),
                    };
                    let spawn = Spawn {
                        id: id_of(slot),
                        pos,
                        dir,
                        speed: speed(s),
                        observer,
                        radius,
                        layers,
                        interest,
                    };
                    let observers = alive.values().filter(|o| **o).count() as u32;
                    let fits = !alive.contains_key(&slot)
                        && spawn.speed >= Fix::ZERO
                        && (Fix::ZERO..=MAX_RADIUS).contains(&radius)
                        && config.cell_of(pos).is_some()
                        && (alive.len() as u32) < config.max_entities
                        && (!observer || observers < config.max_observers);
                    if fits {
                        last.insert(slot, Last { pos, dir });
                        alive.insert(slot, observer);
                    }
                    commands.push(Command::Spawn(spawn));
                }
                Op::Move {
                    slot,
                    to,
                    turn,
                    speed: s,
                } => {
                    let slot = pick(slot, &alive, true);
                    let prev = last.get(&slot).copied().unwrap_or(Last {
                        pos: at(Place::Inside(32768, 32768)),
                        dir: 0,
                    });
                    let pos = match to {
                        Target::Place(p) => at(p),
                        Target::Step(dx, dy) => {
                            let step = |p: Fix, d: i8| {
                                fix_raw(p.to_bits().saturating_add(cell / 16 * i64::from(d)))
                            };
                            let ahead = Pos::new(step(prev.pos.x, dx), step(prev.pos.y, dy));
                            let back = Pos::new(step(prev.pos.x, -dx), step(prev.pos.y, -dy));
                            // Walk back from the edge most of the time; the rest runs out of bounds.
                            if config.cell_of(ahead).is_none() && dx % 4 != 0 {
                                back
                            } else {
                                ahead
                            }
                        }
                        Target::Stay => prev.pos,
                    };
                    let dir = match turn {
                        Turn::Keep => prev.dir,
                        Turn::By(d) => prev.dir.wrapping_add_signed(d),
                        Turn::To(d) => d,
                    };
                    if config.cell_of(pos).is_some() {
                        last.insert(slot, Last { pos, dir });
                    }
                    commands.push(Command::Move(Move {
                        id: id_of(slot),
                        pos,
                        dir,
                        speed: speed(s),
                    }));
                }
                Op::Despawn { slot } => {
                    let slot = pick(slot, &alive, true);
                    alive.remove(&slot);
                    commands.push(Command::Despawn { id: id_of(slot) });
                }
            }
        }
        out.push(commands);
    }
    Scenario { config, ticks: out }
}

/// A small, seeded, portable random number generator (SplitMix64), for
/// tests that need randomness outside proptest.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `1 / n`.
    pub fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// Reorders one tick's commands: commands about different entities are
/// shuffled, commands about the same entity keep their relative order.
pub fn shuffle_across_entities(commands: &[Command], rng: &mut Rng) -> Vec<Command> {
    let mut owners: Vec<EntityId> = commands.iter().map(Command::entity).collect();
    for i in (1..owners.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        owners.swap(i, j);
    }
    let mut queues: BTreeMap<EntityId, std::collections::VecDeque<Command>> = BTreeMap::new();
    for c in commands {
        queues.entry(c.entity()).or_default().push_back(*c);
    }
    owners
        .into_iter()
        .map(|id| {
            queues
                .get_mut(&id)
                .and_then(std::collections::VecDeque::pop_front)
                .expect("one queued command per owner slot")
        })
        .collect()
}

/// A busy deterministic scenario for load and allocation tests: hundreds of
/// walkers, observers, a crowd far beyond `max_view` in one spot, teleports
/// across the map, and despawn/respawn churn every tick, all in a world with
/// a negative origin.
pub fn busy(seed: u64, ticks: usize, visibility: Visibility) -> Scenario {
    const ENTITIES: u64 = 400;
    const CROWD: u64 = 80;
    let config = Config {
        origin: Pos::from_ints(-1600, -1600),
        cell_size: Fix::from_num(100),
        width_cells: 32,
        height_cells: 32,
        visibility,
        hysteresis: Fix::from_num(25),
        max_entities: 512,
        max_observers: 64,
        max_view: 24,
        ..Config::default()
    };
    let mut rng = Rng::new(seed);
    let coord = |rng: &mut Rng| Fix::from_num(rng.below(3199) as i64 - 1600);
    let crowd_spot = Pos::from_ints(100, 100);
    let spawn = |id: u64, pos: Pos| Spawn {
        observer: id.is_multiple_of(8),
        radius: Fix::from_num(150),
        layers: 1 << (id % 3),
        interest: if id.is_multiple_of(5) {
            0b011
        } else {
            u32::MAX
        },
        ..Spawn::npc(id, pos)
    };
    let mut first = Vec::new();
    let mut pos: Vec<Pos> = Vec::new();
    for id in 0..ENTITIES {
        let p = if id < CROWD {
            Pos::new(
                crowd_spot.x + Fix::from_num(id % 9),
                crowd_spot.y + Fix::from_num(id / 9),
            )
        } else {
            Pos::new(coord(&mut rng), coord(&mut rng))
        };
        pos.push(p);
        first.push(Command::Spawn(spawn(id, p)));
    }
    let mut out = vec![first];
    for _ in 1..ticks {
        let mut commands = Vec::new();
        for id in 0..ENTITIES {
            let i = id as usize;
            let r = rng.below(100);
            if r < 40 {
                // A walk of up to 20 units, staying inside the world.
                let step = |c: Fix, d: i64| {
                    (c + Fix::from_num(d)).clamp(Fix::from_num(-1600), Fix::from_num(1599))
                };
                let p = Pos::new(
                    step(pos[i].x, rng.below(41) as i64 - 20),
                    step(pos[i].y, rng.below(41) as i64 - 20),
                );
                pos[i] = p;
                commands.push(Command::Move(Move {
                    id,
                    pos: p,
                    dir: rng.next_u64() as u16,
                    speed: Fix::from_num(rng.below(5)),
                }));
            } else if r < 42 {
                let p = Pos::new(coord(&mut rng), coord(&mut rng));
                pos[i] = p;
                commands.push(Command::Move(Move {
                    id,
                    pos: p,
                    dir: 0,
                    speed: Fix::ZERO,
                }));
            } else if r < 43 {
                commands.push(Command::Despawn { id });
                commands.push(Command::Spawn(spawn(id, pos[i])));
            } else if r < 44 && id < CROWD {
                // Crowd members step back into the crowd.
                let p = Pos::new(crowd_spot.x + Fix::from_num(id % 7), crowd_spot.y);
                pos[i] = p;
                commands.push(Command::Move(Move {
                    id,
                    pos: p,
                    dir: 1,
                    speed: Fix::ZERO,
                }));
            }
        }
        // A few rejected commands every tick as well.
        commands.push(Command::Move(Move {
            id: 10_000,
            pos: crowd_spot,
            dir: 0,
            speed: Fix::ZERO,
        }));
        commands.push(Command::Spawn(spawn(0, crowd_spot)));
        commands.push(Command::Move(Move {
            id: 1,
            pos: Pos::from_ints(5000, 0),
            dir: 0,
            speed: Fix::ZERO,
        }));
        out.push(commands);
    }
    Scenario { config, ticks: out }
}

/// A calm deterministic scenario: most entities stand still while a few
/// `movers` per tick step (some across the hysteresis band), stop, or
/// despawn and come back, so observers mostly update their views from the
/// changed subjects around them rather than rebuild. A cluster in one spot
/// keeps some views full when `max_view` is below about 40.
pub fn calm(
    seed: u64,
    ticks: usize,
    visibility: Visibility,
    movers: u64,
    max_view: u32,
) -> Scenario {
    let config = Config {
        hysteresis: Fix::from_num(25),
        max_view,
        ..at_rest_config(visibility)
    };
    let spawn = |id: u64, pos: Pos| Spawn {
        observer: id % 3 != 2,
        radius: Fix::from_num(60 + (id % 4) as i64 * 20),
        layers: 1 << (id % 3),
        interest: if id.is_multiple_of(7) {
            0b001
        } else {
            u32::MAX
        },
        ..Spawn::npc(id, pos)
    };
    let mut rng = Rng::new(seed);
    let cluster = |id: u64| Pos::from_ints(400 + (id % 6) as i32 * 3, 400 + (id / 6) as i32 * 3);
    let pos = at_rest_layout(&mut rng, 240, 40, cluster);
    // Steps of up to 40 units: across bands and cells, not the world.
    let stir = Stir {
        movers,
        churn: 20,
        step: 40,
        jumps: false,
    };
    stirred(rng, config, pos, spawn, ticks, stir)
}

/// A town square: a crowd far larger than `max_view` at rest on a lattice
/// (so that many of its distances tie), a few entities a tick stepping a
/// few units and stopping again, now and then one walking off or arriving
/// from anywhere, despawning or coming back. Full views (`max_view` well
/// under the crowd's 160) then follow the steps around their cut-off far
/// more often than anything forces them to be ranked again.
pub fn town(
    seed: u64,
    ticks: usize,
    visibility: Visibility,
    hysteresis: i32,
    movers: u64,
    max_view: u32,
) -> Scenario {
    let config = Config {
        hysteresis: Fix::from_num(hysteresis),
        max_view,
        ..at_rest_config(visibility)
    };
    let spawn = |id: u64, pos: Pos| Spawn {
        observer: id % 4 != 3,
        radius: Fix::from_num(80 + (id % 2) as i64 * 40),
        layers: 1 << (id % 2),
        interest: if id.is_multiple_of(9) { 0b01 } else { u32::MAX },
        ..Spawn::npc(id, pos)
    };
    let mut rng = Rng::new(seed);
    let crowd = |id: u64| Pos::from_ints(370 + (id % 13) as i32 * 5, 370 + (id / 13) as i32 * 5);
    let pos = at_rest_layout(&mut rng, 200, 160, crowd);
    let stir = Stir {
        movers,
        churn: 40,
        step: 3,
        jumps: true,
    };
    stirred(rng, config, pos, spawn, ticks, stir)
}

/// The world of [`calm`] and [`town`]: 800 × 800 units in cells of 100.
fn at_rest_config(visibility: Visibility) -> Config {
    Config {
        origin: Pos::from_ints(0, 0),
        cell_size: Fix::from_num(100),
        width_cells: 8,
        height_cells: 8,
        visibility,
        max_entities: 256,
        max_observers: 256,
        ..Config::default()
    }
}

/// A position anywhere in the world of [`at_rest_config`], and a
/// coordinate clamped into it.
fn anywhere(rng: &mut Rng) -> Pos {
    Pos::new(inside(rng.below(800) as i64), inside(rng.below(800) as i64))
}

fn inside(c: i64) -> Fix {
    Fix::from_num(c.clamp(0, 799))
}

/// `entities` positions: the first `crowd` from `crowd_at`, the rest anywhere.
fn at_rest_layout(
    rng: &mut Rng,
    entities: u64,
    crowd: u64,
    crowd_at: impl Fn(u64) -> Pos,
) -> Vec<Pos> {
    let at = |id| {
        if id < crowd {
            crowd_at(id)
        } else {
            anywhere(rng)
        }
    };
    (0..entities).map(at).collect()
}

/// How the entities of a world at rest are stirred each tick.
struct Stir {
    /// How many draw an action per tick.
    movers: u64,
    /// One draw in `churn` despawns (and half of those spawn again at
    /// once), one spawns (a duplicate unless despawned before).
    churn: u64,
    /// The largest step per axis, in units.
    step: i64,
    /// Whether one draw in `churn` jumps anywhere instead of stepping.
    jumps: bool,
}

/// Spawns everyone at `pos` on tick 1, then stirs them for `ticks − 1`.
fn stirred(
    mut rng: Rng,
    config: Config,
    mut pos: Vec<Pos>,
    spawn: impl Fn(u64, Pos) -> Spawn,
    ticks: usize,
    stir: Stir,
) -> Scenario {
    let entities = pos.len() as u64;
    let first = (0..entities).map(|id| Command::Spawn(spawn(id, pos[id as usize])));
    let mut out = vec![first.collect::<Vec<_>>()];
    for _ in 1..ticks {
        let mut commands = Vec::new();
        for _ in 0..stir.movers {
            let id = rng.below(entities);
            let i = id as usize;
            match rng.below(stir.churn) {
                0 => {
                    commands.push(Command::Despawn { id });
                    if rng.one_in(2) {
                        commands.push(Command::Spawn(spawn(id, pos[i])));
                    }
                }
                1 => commands.push(Command::Spawn(spawn(id, pos[i]))),
                k => {
                    pos[i] = if stir.jumps && k == 2 {
                        anywhere(&mut rng)
                    } else {
                        let reach = 2 * stir.step as u64 + 1;
                        let step = |c: Fix, rng: &mut Rng| {
                            inside(c.to_num::<i64>() + rng.below(reach) as i64 - stir.step)
                        };
                        Pos::new(step(pos[i].x, &mut rng), step(pos[i].y, &mut rng))
                    };
                    commands.push(Command::Move(Move {
                        id,
                        pos: pos[i],
                        dir: rng.next_u64() as u16,
                        speed: Fix::from_num(rng.below(3)),
                    }));
                }
            }
        }
        out.push(commands);
    }
    Scenario { config, ticks: out }
}

/// The benchmark's uniform random walk at a tenth of its size: a dense
/// world of observers (about 16 to a cell), every one stepping up to 5
/// units per axis every tick, and one a tick jumping anywhere. In grid mode
/// only the few that cross a cell border are paired, yet each edits dozens
/// of large views: most views are edited several times over, some not at
/// all, and the tick streams every view into fresh storage.
pub fn dense_walk(seed: u64, ticks: usize, visibility: Visibility) -> Scenario {
    const ENTITIES: u64 = 1000;
    let config = Config {
        max_entities: ENTITIES as u32,
        max_observers: ENTITIES as u32,
        max_view: 512,
        ..at_rest_config(visibility)
    };
    let mut rng = Rng::new(seed);
    let mut pos: Vec<Pos> = (0..ENTITIES).map(|_| anywhere(&mut rng)).collect();
    let spawn = |id: u64, at: Pos| {
        Command::Spawn(Spawn {
            observer: true,
            radius: Fix::from_num(100),
            ..Spawn::npc(id, at)
        })
    };
    let mut out = vec![(0..ENTITIES)
        .map(|id| spawn(id, pos[id as usize]))
        .collect::<Vec<_>>()];
    for _ in 1..ticks {
        let jumper = rng.below(ENTITIES) as usize;
        let commands = (0..ENTITIES as usize).map(|i| {
            pos[i] = if i == jumper {
                anywhere(&mut rng)
            } else {
                let step =
                    |c: Fix, rng: &mut Rng| inside(c.to_num::<i64>() + rng.below(11) as i64 - 5);
                Pos::new(step(pos[i].x, &mut rng), step(pos[i].y, &mut rng))
            };
            Command::Move(Move {
                id: i as u64,
                pos: pos[i],
                dir: rng.next_u64() as u16,
                speed: Fix::ONE,
            })
        });
        out.push(commands.collect());
    }
    Scenario { config, ticks: out }
}

/// A world where nearly everything takes a small step every tick, in
/// radius mode without hysteresis: the busy ticks whose views the kernel
/// edits by the pairs that crossed a radius instead of rebuilding them.
/// Radii of 60, 100 and 140 units; every fifth entity an NPC; every
/// thirteenth observer interested only in a layer few have (its view is
/// rebuilt); a cluster of 40 that fills views beyond `max_view` below
/// about 40; steps on a 1/256 lattice; and now and then a tick with a jump
/// anywhere, or with despawns and respawns, both of which make every view
/// be rebuilt instead (the respawns also make slots be renumbered).
pub fn walkers(seed: u64, ticks: usize, max_view: u32) -> Scenario {
    const ENTITIES: u64 = 200;
    const UNIT: i64 = 1 << 16;
    let config = Config {
        max_view,
        ..at_rest_config(Visibility::Radius)
    };
    let spawn = |id: u64, pos: Pos| Spawn {
        observer: id % 5 != 4,
        radius: Fix::from_num(60 + (id % 3) as i64 * 40),
        layers: if id.is_multiple_of(6) { 0b11 } else { 0b01 },
        interest: if id.is_multiple_of(13) {
            0b10
        } else {
            u32::MAX
        },
        ..Spawn::npc(id, pos)
    };
    let mut rng = Rng::new(seed);
    let cluster = |id: u64| Pos::from_ints(300 + (id % 8) as i32 * 4, 500 + (id / 8) as i32 * 4);
    let mut pos = at_rest_layout(&mut rng, ENTITIES, 40, cluster);
    let first = (0..ENTITIES).map(|id| Command::Spawn(spawn(id, pos[id as usize])));
    let mut out = vec![first.collect::<Vec<_>>()];
    let step = |c: Fix, rng: &mut Rng| {
        // Up to 5 units either way, in 256ths of a unit.
        let raw = c.to_bits() + (rng.below(2561) as i64 - 1280) * (UNIT / 256);
        Fix::from_bits(raw.clamp(0, 799 * UNIT))
    };
    let mut alive = vec![true; ENTITIES as usize];
    for tick in 1..ticks {
        let mut commands = Vec::new();
        let (jumper, churned) = (tick % 7 == 3, tick % 9 == 5);
        // A few log out or back in, where the tick is not churned.
        let logins = if tick % 4 == 1 && !churned { 2 } else { 0 };
        for _ in 0..logins {
            let id = rng.below(ENTITIES);
            let i = id as usize;
            commands.push(match alive[i] {
                true => Command::Despawn { id },
                false => {
                    pos[i] = anywhere(&mut rng);
                    Command::Spawn(spawn(id, pos[i]))
                }
            });
            alive[i] = !alive[i];
        }
        for id in 0..ENTITIES {
            let i = id as usize;
            if !alive[i] {
                continue;
            }
            // Enough respawns (each into another slot) that slots are
            // renumbered every few of these ticks.
            if churned && rng.one_in(5) {
                commands.push(Command::Despawn { id });
                commands.push(Command::Spawn(spawn(id, pos[i])));
                continue;
            }
            if rng.one_in(20) {
                continue; // Stands still this tick.
            }
            pos[i] = if jumper && id == 7 {
                anywhere(&mut rng)
            } else {
                Pos::new(step(pos[i].x, &mut rng), step(pos[i].y, &mut rng))
            };
            commands.push(Command::Move(Move {
                id,
                pos: pos[i],
                dir: rng.next_u64() as u16,
                speed: Fix::ONE,
            }));
        }
        out.push(commands);
    }
    Scenario { config, ticks: out }
}

/// [`walkers`] with the throttle of the benchmark's comparable row: a
/// step is never due, only the settling Update of one that stands still
/// after moving (one in twenty a tick), so the few due subjects are
/// looked up in the views the sweep keeps rather than walked for.
pub fn walkers_settling(seed: u64, ticks: usize, max_view: u32) -> Scenario {
    let mut s = walkers(seed, ticks, max_view);
    s.config.update_interval = u64::MAX;
    s.config.move_epsilon = Fix::MAX;
    s.config.dir_epsilon = 32768;
    s
}

/// A crowd among NPCs where many subjects move each tick but fewer than
/// there are observers, so each mover is paired with the observers around
/// it rather than every view rebuilt, and pairing has enough subjects to
/// be split into tasks: 1 200 observers (radii of 50 to 90 units) and
/// 1 300 NPCs in a square world of `side` units and 8 × 8 cells, a fresh
/// `movers` of them (fewer than the observers) stepping up to `stride`
/// units a tick (radius mode: too few observers for the sweep). With a
/// `max_view` below what views hold, full views are paired with every
/// mover around them too. In a world of 400 units, strides of a few radii
/// make more pairs than the kernel keeps room for.
pub fn crowd_pairing(
    seed: u64,
    (visibility, max_view, side): (Visibility, u32, i64),
    (movers, stride): (u64, u64),
) -> Scenario {
    const ENTITIES: u64 = 2500;
    const TICKS: usize = 6;
    let config = Config {
        cell_size: Fix::from_num(side / 8),
        max_entities: ENTITIES as u32,
        max_observers: ENTITIES as u32,
        max_view,
        ..at_rest_config(visibility)
    };
    let spawn = |id: u64, pos: Pos| Spawn {
        observer: id % 25 < 12,
        radius: Fix::from_num(50 + (id % 5) as i64 * 10),
        ..Spawn::npc(id, pos)
    };
    let inside = |c: i64| Fix::from_num(c.clamp(0, side - 1));
    let mut rng = Rng::new(seed);
    let mut pos: Vec<Pos> = (0..ENTITIES)
        .map(|_| {
            let mut at = || inside(rng.below(side as u64) as i64);
            Pos::new(at(), at())
        })
        .collect();
    let first = (0..ENTITIES).map(|id| Command::Spawn(spawn(id, pos[id as usize])));
    let mut out = vec![first.collect::<Vec<_>>()];
    for _ in 1..TICKS {
        let mut commands = Vec::new();
        for _ in 0..movers {
            let id = rng.below(ENTITIES);
            let p = &mut pos[id as usize];
            let mut step = |c: Fix| {
                inside(c.to_num::<i64>() + rng.below(2 * stride + 1) as i64 - stride as i64)
            };
            *p = Pos::new(step(p.x), step(p.y));
            commands.push(Command::Move(Move {
                id,
                pos: *p,
                dir: 0,
                speed: Fix::ONE,
            }));
        }
        out.push(commands);
    }
    Scenario { config, ticks: out }
}

/// A swarm: every entity an observer in one small spot, and most of them
/// stepping every tick but fewer than all, so each tick makes more
/// observer–subject events than the kernel keeps room for per entity and it
/// must fall back to rebuilding the affected views.
pub fn swarm(seed: u64, ticks: usize, visibility: Visibility) -> Scenario {
    const ENTITIES: u64 = 48;
    const MOVERS: u64 = 40;
    let config = Config {
        origin: Pos::from_ints(0, 0),
        cell_size: Fix::from_num(100),
        width_cells: 4,
        height_cells: 4,
        visibility,
        max_entities: ENTITIES as u32,
        max_observers: ENTITIES as u32,
        max_view: 64,
        ..Config::default()
    };
    let mut rng = Rng::new(seed);
    let mut pos: Vec<Pos> = (0..ENTITIES)
        .map(|id| Pos::from_ints(150 + (id % 8) as i32 * 2, 150 + (id / 8) as i32 * 2))
        .collect();
    let spawn = |id: u64| {
        Command::Spawn(Spawn {
            observer: true,
            radius: Fix::from_num(100),
            ..Spawn::npc(id, pos[id as usize])
        })
    };
    let mut out = vec![(0..ENTITIES).map(spawn).collect::<Vec<_>>()];
    for _ in 1..ticks {
        let mut commands = Vec::new();
        let skip = rng.below(ENTITIES);
        for k in 0..MOVERS {
            let i = ((skip + k) % ENTITIES) as usize;
            let d = |rng: &mut Rng| Fix::from_num(rng.below(5) as i64 - 2);
            pos[i] = Pos::new(pos[i].x + d(&mut rng), pos[i].y + d(&mut rng));
            commands.push(Command::Move(Move {
                id: i as u64,
                pos: pos[i],
                dir: rng.next_u64() as u16,
                speed: Fix::ONE,
            }));
        }
        out.push(commands);
    }
    Scenario { config, ticks: out }
}

/// The dense grid-mode walk where a tenth of the walkers, drawn anew
/// each tick, stand still, under a throttle that spares the movers (as
/// the aoi bench's comparable row has it): the Updates due are the
/// settling ones of those that stopped, few enough that views take them
/// from the cells around them rather than walking every entry.
pub fn grid_settling(seed: u64, ticks: usize) -> Scenario {
    let mut s = dense_walk(seed, ticks, Visibility::Grid);
    s.config.update_interval = u64::MAX;
    s.config.move_epsilon = Fix::MAX;
    s.config.dir_epsilon = 32768;
    for (t, commands) in s.ticks.iter_mut().enumerate().skip(2) {
        commands.retain(|c| !(c.entity() + t as u64).is_multiple_of(10));
    }
    s
}

/// `s` with `max_visible` set to `num / den` of the most view entries its
/// world holds together at the end of any tick without the bound, so that
/// the bound cuts views in its busiest ticks and not in its calmest.
pub fn within_visible(mut s: Scenario, (num, den): (u64, u64)) -> Scenario {
    let mut world = lockgrid_kernel::World::new(s.config).expect("a valid scenario config");
    let mut most = 0u64;
    let mut sink = lockgrid_kernel::CountingSink::default();
    for commands in &s.ticks {
        world.step(commands, &mut sink);
        let held = world
            .entities()
            .filter(|e| e.observer)
            .filter_map(|e| world.view(e.id).map(|v| v.count() as u64))
            .sum::<u64>();
        most = most.max(held);
    }
    let bound = most * num / den;
    s.config.max_visible = Some(u32::try_from(bound).expect("small scenarios"));
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_keeps_per_entity_order() {
        let cmds: Vec<Command> = (0..40)
            .map(|i| {
                Command::Move(Move {
                    id: i % 4,
                    pos: Pos::from_ints(i as i32, 0),
                    dir: 0,
                    speed: Fix::ZERO,
                })
            })
            .collect();
        let mut rng = Rng::new(7);
        let shuffled = shuffle_across_entities(&cmds, &mut rng);
        assert_ne!(shuffled, cmds, "40 commands over 4 entities should move");
        for id in 0..4 {
            let a: Vec<_> = cmds.iter().filter(|c| c.entity() == id).collect();
            let b: Vec<_> = shuffled.iter().filter(|c| c.entity() == id).collect();
            assert_eq!(a, b);
        }
    }
}
