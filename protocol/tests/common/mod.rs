//! Shared test helpers: a seeded RNG, a seeded network emulator, event generators.
#![allow(dead_code)]

pub mod canonical;
pub mod crowd;
pub mod lan;

use std::collections::BTreeMap;

use lockgrid_kernel::{CommandKind, EntityId, Event, Fix, Pos, RejectReason};
use lockgrid_protocol::{Instant, Seen, View};

/// splitmix64: tiny, seeded, reproducible.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x853c_49e6_748f_ea9b)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// Uniform in `lo..=hi`.
    pub fn range_i64(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.below((hi - lo) as u64 + 1) as i64)
    }

    /// True with probability `p` (0.0..=1.0), decided in integers.
    pub fn chance(&mut self, per_million: u64) -> bool {
        self.below(1_000_000) < per_million
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// A seeded, sans-IO network: datagrams are queued with a delivery time;
/// loss, duplication and latency jitter (hence reordering) come from the RNG.
pub struct Net {
    pub rng: Rng,
    /// Loss probability, per million.
    pub loss: u64,
    /// Duplication probability, per million.
    pub dup: u64,
    /// Base one-way latency, microseconds.
    pub latency: u64,
    /// Extra latency drawn uniformly in `0..=jitter`, microseconds.
    pub jitter: u64,
    /// Largest datagram the network carries; larger ones fail the test.
    pub mtu: usize,
    queue: BTreeMap<(u64, u64), (u32, u32, Vec<u8>)>,
    serial: u64,
    pub delivered: u64,
    pub dropped: u64,
}

impl Net {
    pub fn new(seed: u64, mtu: usize) -> Self {
        Net {
            rng: Rng::new(seed),
            loss: 0,
            dup: 0,
            latency: 20_000,
            jitter: 0,
            mtu,
            queue: BTreeMap::new(),
            serial: 0,
            delivered: 0,
            dropped: 0,
        }
    }

    pub fn send(&mut self, now: Instant, from: u32, to: u32, bytes: &[u8]) {
        assert!(
            bytes.len() <= self.mtu,
            "datagram of {} bytes exceeds the mtu {}",
            bytes.len(),
            self.mtu
        );
        if self.rng.chance(self.loss) {
            self.dropped += 1;
            return;
        }
        let copies = if self.rng.chance(self.dup) { 2 } else { 1 };
        for _ in 0..copies {
            let at = now.as_micros() + self.latency + self.rng.below(self.jitter + 1);
            self.serial += 1;
            self.queue
                .insert((at, self.serial), (from, to, bytes.to_vec()));
        }
    }

    pub fn next_delivery(&self) -> Option<Instant> {
        self.queue
            .keys()
            .next()
            .map(|&(t, _)| Instant::from_micros(t))
    }

    /// The next datagram due at or before `now`: (from, to, bytes).
    pub fn pop_due(&mut self, now: Instant) -> Option<(u32, u32, Vec<u8>)> {
        let (&key, _) = self.queue.iter().next()?;
        if key.0 > now.as_micros() {
            return None;
        }
        self.delivered += 1;
        self.queue.remove(&key)
    }

    pub fn is_idle(&self) -> bool {
        self.queue.is_empty()
    }
}

pub fn fix(raw: i64) -> Fix {
    Fix::from_bits(raw)
}

pub fn random_seen(rng: &mut Rng) -> Seen {
    Seen {
        pos: Pos::new(
            fix(rng.range_i64(-1 << 30, 1 << 30)),
            fix(rng.range_i64(-1 << 30, 1 << 30)),
        ),
        dir: rng.next_u64() as u16,
        speed: fix(rng.range_i64(0, 10 << 16)),
        layers: rng.next_u64() as u32,
    }
}

/// Changes some of a state's fields (maybe none, maybe extreme values).
pub fn perturb(rng: &mut Rng, s: Seen) -> Seen {
    let mut n = s;
    if rng.chance(700_000) {
        let d = if rng.chance(50_000) {
            i64::MAX
        } else {
            rng.range_i64(-3 << 16, 3 << 16)
        };
        n.pos.x = fix(s.pos.x.to_bits().wrapping_add(d));
        n.pos.y = fix(s
            .pos
            .y
            .to_bits()
            .wrapping_add(rng.range_i64(-3 << 16, 3 << 16)));
    }
    if rng.chance(400_000) {
        n.dir = rng.next_u64() as u16;
    }
    if rng.chance(100_000) {
        n.speed = fix(rng.next_u64() as i64);
    }
    n
}

/// One tick of random events for `observer` against the model view
/// `model`, in contract order; applies them to the model.
pub fn random_tick(
    rng: &mut Rng,
    observer: EntityId,
    model: &mut BTreeMap<EntityId, Seen>,
    id_space: u64,
) -> Vec<Event> {
    let mut events = Vec::new();
    for _ in 0..rng.below(3) {
        events.push(Event::Rejected {
            entity: rng.next_u64() >> rng.below(64),
            command: [CommandKind::Spawn, CommandKind::Move, CommandKind::Despawn]
                [rng.below(3) as usize],
            reason: RejectReason::ALL[rng.below(5) as usize],
        });
    }
    let visible: Vec<EntityId> = model.keys().copied().collect();
    let mut leaves = Vec::new();
    for &id in &visible {
        if rng.chance(150_000) {
            leaves.push(id);
        }
    }
    let mut enters = BTreeMap::new();
    for _ in 0..rng.below(12) {
        let id = rng.below(id_space);
        let visible_after_leave = model.contains_key(&id) && !leaves.contains(&id);
        if id != observer && !visible_after_leave {
            enters.insert(id, random_seen(rng));
        }
    }
    let mut updates = Vec::new();
    for &id in &visible {
        if !leaves.contains(&id) && !enters.contains_key(&id) && rng.chance(600_000) {
            updates.push((id, perturb(rng, model[&id])));
        }
    }
    for &id in &leaves {
        model.remove(&id);
        events.push(Event::Leave {
            observer,
            subject: id,
        });
    }
    for (&id, s) in &enters {
        model.insert(id, *s);
        events.push(Event::Enter {
            observer,
            subject: id,
            pos: s.pos,
            dir: s.dir,
            speed: s.speed,
            layers: s.layers,
        });
    }
    for (id, s) in updates {
        let layers = model[&id].layers;
        model.insert(id, Seen { layers, ..s });
        events.push(Event::Update {
            observer,
            subject: id,
            pos: s.pos,
            dir: s.dir,
            speed: s.speed,
        });
    }
    events
}

/// The view's contents as a map, for comparisons.
pub fn view_map(v: &View) -> BTreeMap<EntityId, Seen> {
    v.iter().map(|(id, s)| (id, *s)).collect()
}

use lockgrid_kernel::{Command, Move, Spawn, Visibility};
use lockgrid_protocol::{
    ClientLimits, DisconnectReason, Frame, InputEntry, InputFrame, InputRefusal, RefusedInput,
    TickBatch, Welcome, WorldParams, MAX_REFUSALS_PER_FRAME,
};

pub fn random_command(rng: &mut Rng) -> Command {
    let id = rng.next_u64() >> rng.below(64);
    let pos = Pos::new(
        fix(rng.next_u64() as i64 >> rng.below(64)),
        fix(rng.next_u64() as i64 >> rng.below(64)),
    );
    match rng.below(3) {
        0 => Command::Spawn(random_spawn(rng, id)),
        1 => Command::Move(Move {
            id,
            pos,
            dir: rng.next_u64() as u16,
            speed: fix(rng.next_u64() as i64 >> rng.below(64)),
        }),
        _ => Command::Despawn { id },
    }
}

/// A random spawn of `id`.
pub fn random_spawn(rng: &mut Rng, id: u64) -> Spawn {
    Spawn {
        id,
        pos: Pos::new(
            fix(rng.next_u64() as i64 >> rng.below(64)),
            fix(rng.next_u64() as i64 >> rng.below(64)),
        ),
        dir: rng.next_u64() as u16,
        speed: fix(rng.next_u64() as i64 >> rng.below(64)),
        observer: rng.chance(500_000),
        radius: fix(rng.next_u64() as i64 >> rng.below(64)),
        layers: rng.next_u64() as u32,
        interest: rng.next_u64() as u32,
    }
}

/// Random client limits, each stated or not.
pub fn random_limits(rng: &mut Rng) -> ClientLimits {
    ClientLimits {
        max_speed: rng
            .chance(500_000)
            .then(|| fix(rng.next_u64() as i64 >> rng.below(64))),
        burst_us: rng.chance(500_000).then(|| rng.next_u64() >> rng.below(64)),
        moves_per_sec: rng.chance(500_000).then(|| rng.next_u64() as u32),
        budget_bytes_per_sec: rng.chance(500_000).then(|| rng.next_u64() as u32),
    }
}

/// One frame of every kind, with random fields; byte fields borrow from `store`.
pub fn random_frames<'a>(rng: &mut Rng, store: &'a [u8]) -> Vec<Frame<'a>> {
    let mut slice = |max: usize| {
        let len = rng.below(max.min(store.len()) as u64 + 1) as usize;
        let at = rng.below((store.len() - len) as u64 + 1) as usize;
        &store[at..at + len]
    };
    let token = slice(256);
    let payload = slice(store.len());
    let mut rng2 = rng.clone();
    let r = &mut rng2;
    let mut tick = r.next_u64() >> r.below(64) >> 2;
    let entries = (0..r.below(5))
        .map(|_| {
            tick += 1 + r.below(5);
            InputEntry {
                tick,
                commands: (0..r.below(4)).map(|_| random_command(r)).collect(),
            }
        })
        .collect();
    let parts = 1 + r.below(1024) as u16;
    let entity = r.next_u64() >> r.below(64);
    let frames = vec![
        Frame::Padding,
        Frame::Hello {
            version: r.next_u64() as u8,
            nonce: r.next_u64(),
            token,
        },
        Frame::Input(InputFrame {
            first_seq: r.next_u64() >> r.below(64) >> 1,
            entries,
        }),
        Frame::Ack {
            tick: r.next_u64() >> r.below(64),
        },
        Frame::Ping {
            stamp: r.next_u64() >> r.below(64),
        },
        Frame::Bye,
        Frame::Welcome(Welcome {
            conn_id: r.next_u64() as u32,
            nonce: r.next_u64(),
            entity,
            spawn: random_spawn(r, entity),
            limits: random_limits(r),
            tick: r.next_u64() >> r.below(64),
            tick_interval_us: r.next_u64() >> r.below(64),
            window: r.next_u64() as u32,
            world: WorldParams {
                origin: Pos::new(
                    fix(r.next_u64() as i64 >> r.below(64)),
                    fix(r.next_u64() as i64),
                ),
                cell_size: fix(r.next_u64() as i64 >> r.below(64)),
                width_cells: r.next_u64() as u32,
                height_cells: r.next_u64() as u32,
                visibility: if r.chance(500_000) {
                    Visibility::Grid
                } else {
                    Visibility::Radius
                },
                hysteresis: fix(r.next_u64() as i64 >> r.below(64)),
                max_view: r.next_u64() as u32,
            },
        }),
        Frame::TickBatch(TickBatch {
            tick: r.next_u64() >> r.below(64),
            part: r.below(u64::from(parts)) as u16,
            parts,
            digest: r.next_u64(),
            payload,
        }),
        Frame::Pong {
            stamp: r.next_u64() >> r.below(64),
        },
        Frame::Disconnect {
            reason: DisconnectReason::from_code(r.next_u64() as u8),
        },
        Frame::Refused(
            (0..1 + r.below(MAX_REFUSALS_PER_FRAME as u64))
                .map(|_| RefusedInput {
                    seq: r.next_u64() >> r.below(64),
                    index: r.below(32) as u8,
                    reason: InputRefusal::from_code(r.next_u64() as u8),
                })
                .collect(),
        ),
    ];
    *rng = rng2;
    frames
}
