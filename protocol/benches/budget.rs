//! What a per-client bandwidth budget buys and costs: bytes per client per
//! second, staleness of the nearest and farthest tenth of each view, and
//! the server's encoding time per client per tick, at budgets of 8, 32 and
//! 128 KiB/s, with no limit (paced, but every Update fits) and with
//! today's send-everything path (no budget configured); and 8 KiB/s with
//! every weight 1 (the host does not say where observers are), to show
//! what nearness does.
//!
//! Two layouts (`tests/common/crowd.rs`): a hotspot crowd (1 000 NPCs in
//! a 500 × 500 square) and a uniform walk (10 000 NPCs over 2 000 × 2 000);
//! 50 motionless observers stand inside the NPCs' area; every NPC walks up
//! to 2 units a tick, so the kernel makes every visible NPC due every tick.
//! The link is perfect and instant (each tick's packets are applied and
//! acknowledged before the next tick), so staleness comes from the budget
//! alone. Staleness of a subject in a client's view: ticks since the
//! client's copy last equalled the subject's state in the kernel.
//!
//! Run with `cargo bench -p lockgrid-protocol --bench budget`; words after
//! `--` keep only the rows whose layout and budget name contain them all
//! (`-- hotspot "8 KiB"`).

#[path = "../tests/common/crowd.rs"]
#[allow(dead_code)]
mod crowd;

use std::collections::BTreeMap;
use std::time::Instant as Clock;

use crowd::{config, Layout, Walkers};
use lockgrid_kernel::{Command, EntityId, Fix, Spawn, World};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientLimits, Instant, Server, ServerConfig, ServerEvent,
    WorldParams, DEFAULT_MTU,
};

/// splitmix64, as the tests' (`crowd` draws from it).
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed ^ 0x853c_49e6_748f_ea9b)
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    fn range_i64(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.below((hi - lo) as u64 + 1) as i64)
    }

    fn chance(&mut self, per_million: u64) -> bool {
        self.below(1_000_000) < per_million
    }
}

const CLIENTS: u64 = 50;
const WARMUP: u64 = 20;
const TICKS: u64 = 200;
const TICKS_PER_SEC: u64 = 20;

struct Figures {
    bytes_per_client_sec: f64,
    near: (f64, u32),
    far: (f64, u32),
    view: f64,
    encode_ns: f64,
    /// Ticks until every copy was exact after the walkers stopped.
    settle: u64,
}

fn mean_p99(v: &mut [u32]) -> (f64, u32) {
    if v.is_empty() {
        return (0.0, 0);
    }
    v.sort_unstable();
    let mean = v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64;
    let p99 = v[(v.len() * 99 / 100).min(v.len() - 1)];
    (mean, p99)
}

fn run(layout: Layout, npcs: usize, budget: Option<u32>, located: bool) -> Figures {
    let cfg = config();
    let mut world = World::new(cfg).expect("valid config");
    let server_config = ServerConfig {
        budget_bytes_per_sec: budget,
        max_pending_bytes: 64 << 20,
        ..ServerConfig::default()
    };
    let mut server: Server<u32> =
        Server::new(server_config, WorldParams::from(&cfg)).expect("valid config");
    let mut walkers = Walkers::new(layout, npcs, 7);
    let mut clients: Vec<Client<u32>> = (0..CLIENTS)
        .map(|i| {
            Client::new(ClientConfig::default(), 0, b"", i, Instant::from_micros(1)).expect("ok")
        })
        .collect();
    let mut entity_of: BTreeMap<u32, EntityId> = BTreeMap::new();
    // (client, subject) → last tick the client's copy equalled the kernel's state.
    let mut matched: Vec<BTreeMap<EntityId, u64>> = vec![BTreeMap::new(); CLIENTS as usize];
    let mut commands = walkers.spawns();
    let mut events = Vec::new();
    let mut buf = vec![0u8; DEFAULT_MTU];
    let (mut near, mut far) = (Vec::new(), Vec::new());
    let (mut bytes, mut encode_ns, mut view_sum, mut view_n) = (0u64, 0u128, 0u64, 0u64);
    let mut order: Vec<(i128, EntityId)> = Vec::new();
    let stop = WARMUP + TICKS;
    let mut settle = None;
    let mut t = 0u64;
    while settle.is_none() && t < stop + 2_000 {
        t += 1;
        let now = Instant::from_micros(1 + t * 50_000);
        for (i, c) in clients.iter_mut().enumerate() {
            while let Some(tx) = c.poll_transmit(now, &mut buf).expect("mtu buffer") {
                server.handle_datagram(now, i as u32, &buf[..tx.len]);
            }
        }
        while let Some(e) = server.poll_event() {
            if let ServerEvent::Connecting { conn, from, .. } = e {
                let id = 100_000 + u64::from(from);
                let at = walkers.observer_spot(u64::from(from), CLIENTS);
                let spawn = Spawn::observer(id, at, Fix::from_num(300));
                server
                    .accept(conn, &spawn, ClientLimits::NONE)
                    .expect("fresh entity");
                entity_of.insert(from, id);
                commands.push(Command::Spawn(spawn));
            }
        }
        if t < stop {
            walkers.step(&mut commands);
        }
        events.clear();
        let report = world.step(&commands, &mut events);
        commands.clear();
        let measured = t > WARMUP && t <= stop;
        let began = Clock::now();
        let w = &world;
        server
            .push_tick_located(now, report.tick, report.digest, &events, |id| {
                located.then(|| w.entity(id).map(|e| e.pos)).flatten()
            })
            .expect("kernel order");
        let mut down = Vec::new();
        while let Some(tx) = server.poll_transmit(now, &mut buf).expect("mtu buffer") {
            down.push((tx.destination, buf[..tx.len].to_vec()));
        }
        if measured {
            encode_ns += began.elapsed().as_nanos();
            bytes += down.iter().map(|d| d.1.len() as u64).sum::<u64>();
        }
        for (to, d) in &down {
            clients[*to as usize].handle_datagram(now, 0, d);
        }
        let tick = report.tick;
        let mut exact = true;
        for (i, c) in clients.iter_mut().enumerate() {
            while let Some(e) = c.poll_event() {
                std::hint::black_box(matches!(e, ClientEvent::Tick { .. }));
            }
            let Some(&me) = entity_of.get(&(i as u32)) else {
                continue;
            };
            let Some(me_pos) = world.entity(me).map(|e| e.pos) else {
                continue;
            };
            let m = &mut matched[i];
            m.retain(|id, _| c.view().contains(*id));
            order.clear();
            for (id, seen) in c.view().iter() {
                let Some(k) = world.entity(id) else { continue };
                let last = m.entry(id).or_insert(tick);
                if (k.pos, k.dir, k.speed) == (seen.pos, seen.dir, seen.speed) {
                    *last = tick;
                } else {
                    exact = false;
                }
                let dx = i128::from(k.pos.x.to_bits() - me_pos.x.to_bits());
                let dy = i128::from(k.pos.y.to_bits() - me_pos.y.to_bits());
                order.push((dx * dx + dy * dy, id));
            }
            if !measured || order.is_empty() {
                continue;
            }
            order.sort_unstable();
            let tenth = order.len().div_ceil(10);
            view_sum += order.len() as u64;
            view_n += 1;
            for &(_, id) in &order[..tenth] {
                near.push((tick - m[&id]) as u32);
            }
            for &(_, id) in &order[order.len() - tenth..] {
                far.push((tick - m[&id]) as u32);
            }
        }
        if t >= stop && exact && clients.iter().all(|c| c.applied_tick() == tick) {
            settle = Some(t - stop);
        }
    }
    let per = (CLIENTS * TICKS) as f64;
    Figures {
        bytes_per_client_sec: bytes as f64 / per * TICKS_PER_SEC as f64,
        near: mean_p99(&mut near),
        far: mean_p99(&mut far),
        view: view_sum as f64 / view_n.max(1) as f64,
        encode_ns: encode_ns as f64 / per,
        settle: settle.unwrap_or(u64::MAX),
    }
}

fn main() {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    println!(
        "{CLIENTS} motionless observers, {TICKS} ticks at {TICKS_PER_SEC} Hz, perfect instant link; staleness in ticks"
    );
    for (layout, npcs) in [(Layout::Hotspot, 1_000usize), (Layout::Uniform, 10_000)] {
        println!();
        println!("{} ({npcs} NPCs)", layout.name());
        println!(
            "| budget | bytes/client/s | view | near tenth mean / p99 | far tenth mean / p99 | encode ns/client/tick | settle ticks |"
        );
        println!(
            "|--------|---------------:|-----:|----------------------:|---------------------:|----------------------:|-------------:|"
        );
        let runs: [(&str, Option<u32>, bool); 6] = [
            ("send-everything", None, true),
            ("unlimited (paced)", Some(u32::MAX), true),
            ("128 KiB/s", Some(128 * 1024), true),
            ("32 KiB/s", Some(32 * 1024), true),
            ("8 KiB/s", Some(8 * 1024), true),
            ("8 KiB/s, weights 1", Some(8 * 1024), false),
        ];
        for (name, budget, located) in runs {
            let label = format!("{} {name}", layout.name());
            if !filters.iter().all(|f| label.contains(f.as_str())) {
                continue;
            }
            // Best encoding time of three runs; the other figures are deterministic.
            let mut f = run(layout, npcs, budget, located);
            for _ in 0..2 {
                let g = run(layout, npcs, budget, located);
                f.encode_ns = f.encode_ns.min(g.encode_ns);
            }
            println!(
                "| {name} | {:.0} | {:.0} | {:.2} / {} | {:.2} / {} | {:.0} | {} |",
                f.bytes_per_client_sec,
                f.view,
                f.near.0,
                f.near.1,
                f.far.0,
                f.far.1,
                f.encode_ns,
                f.settle
            );
        }
    }
}
