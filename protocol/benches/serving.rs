//! The server side of a lockgrid server, without sockets: the kernel's
//! `World` and the protocol `Server`, driven in-process by N real protocol
//! `Client`s that walk (one Move input a tick each) and acknowledge what
//! they receive, over a perfect instant link.
//!
//! Per tick it prints the server's CPU time split into the kernel step,
//! routing and encoding (`push_tick`), transmit (draining `poll_transmit`)
//! and acknowledgement bookkeeping with input delivery (`handle_datagram`
//! of every client packet), timers (`handle_timeout` when `poll_timeout`
//! has passed, as a driver calls it), per client and per event; the cost
//! of one `poll_timeout` call (a driver makes one per loop iteration);
//! bytes and datagrams
//! per client; allocations per tick in each of those calls (a counting
//! global allocator). The reference line is what encoding each client's
//! events of the tick alone costs with `batch::encode_part` into one
//! reused buffer (no framing, no packets, no bookkeeping).
//!
//! Two layouts (`tests/common/crowd.rs`): a uniform walk (10 000 NPCs and
//! the clients over 2 000 × 2 000) and a hotspot crowd (1 000 NPCs and
//! the clients in 500 × 500). Every figure is the median over the measured
//! ticks.
//!
//! Run with `cargo bench -p lockgrid-protocol --bench serving`; words after
//! `--` keep only the rows whose name (`uniform walk 10000 NPCs 1000 clients`)
//! contains them all (`-- uniform " 1000 clients"`).

#[path = "../tests/common/crowd.rs"]
#[allow(dead_code)]
mod crowd;

use std::alloc::System;
use std::time::Instant as Clock;

use crowd::{Layout, Walkers};
use lockgrid_kernel::{Command, Config, EntityId, Event, Fix, Spawn, World};
use lockgrid_protocol::batch::encode_part;
use lockgrid_protocol::{
    Client, ClientConfig, ClientLimits, Instant, Server, ServerConfig, ServerEvent, View,
    WorldParams, DEFAULT_MTU, HEADER_LEN,
};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

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

/// Entity ids of clients start here; NPCs are 1..=npcs.
const CLIENT_BASE: EntityId = 1 << 32;
/// Ticks before measuring: every client connected, views filled.
const WARMUP: u64 = 30;
/// Largest batch payload of a part: the MTU less the header and a
/// TickBatch frame's overhead (code, tick, part, parts, digest, length).
const PART_BUDGET: usize = DEFAULT_MTU - HEADER_LEN - (1 + 10 + 2 + 2 + 8 + 3);
/// `poll_timeout` calls timed each tick, as a driver loop makes one per
/// iteration.
const POLL_CALLS: u64 = 100;

/// One phase's time (ns) and allocations in one tick.
#[derive(Clone, Copy, Default)]
struct Phase {
    ns: u64,
    allocs: u64,
}

impl Phase {
    fn add(&mut self, ns: u128, region: &Region<'_, System>) {
        let s = region.change();
        self.ns += ns as u64;
        self.allocs += (s.allocations + s.reallocations) as u64;
    }
}

#[derive(Default)]
struct TickFigures {
    kernel: Phase,
    push: Phase,
    transmit: Phase,
    handle: Phase,
    timeout: Phase,
    /// One `poll_timeout` call, averaged over `POLL_CALLS` calls.
    poll_timeout_ns: u64,
    reference_ns: u64,
    events: u64,
    bytes: u64,
    datagrams: u64,
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn world_config(npcs: usize, clients: usize) -> Config {
    Config {
        max_entities: (npcs + clients + 16) as u32,
        max_observers: (clients + 16) as u32,
        ..crowd::config()
    }
}

/// The view events of `observer` in `views` (contract order: by observer).
fn observer_events(views: &[Event], observer: EntityId) -> &[Event] {
    let v0 = views.partition_point(|e| e.order_key().is_some_and(|k| k.0 < observer));
    let v1 = views.partition_point(|e| e.order_key().is_some_and(|k| k.0 <= observer));
    &views[v0..v1]
}

fn run(layout: Layout, npcs: usize, n: usize, ticks: u64) -> Vec<TickFigures> {
    let cfg = world_config(npcs, n);
    let mut world = World::new(cfg).expect("valid config");
    let server_config = ServerConfig {
        max_connections: n + 16,
        max_pending_bytes: 64 << 20,
        ..ServerConfig::default()
    };
    let mut server: Server<u32> =
        Server::new(server_config, WorldParams::from(&cfg)).expect("valid config");
    let mut walkers = Walkers::new(layout, npcs, 7);
    // The clients walk like the NPCs, each sending its own Move.
    let mut client_walk = Walkers::new(layout, n, 11);
    let client_spawns: Vec<Spawn> = client_walk
        .spawns()
        .into_iter()
        .enumerate()
        .map(|(i, c)| match c {
            Command::Spawn(s) => Spawn::observer(CLIENT_BASE + i as u64, s.pos, Fix::from_num(300)),
            _ => unreachable!("spawns are spawns"),
        })
        .collect();
    let mut clients: Vec<Client<u32>> = (0..n)
        .map(|i| {
            Client::new(
                ClientConfig::default(),
                0,
                b"",
                i as u64,
                Instant::from_micros(1),
            )
            .expect("ok")
        })
        .collect();
    let mut spawned = vec![false; n];
    // The reference encoder's copy of every client's view.
    let mut shadows: Vec<View> = (0..n).map(|_| View::new()).collect();
    let mut part = vec![0u8; PART_BUDGET];

    let mut commands = walkers.spawns();
    let mut moves = Vec::with_capacity(n);
    let mut events = Vec::with_capacity(1 << 20);
    let mut buf = vec![0u8; DEFAULT_MTU];
    let mut up: Vec<(u32, Vec<u8>)> = Vec::new();
    let mut down: Vec<u8> = Vec::with_capacity(64 << 20);
    let mut down_at: Vec<(u32, usize, usize)> = Vec::new();
    let mut out = Vec::new();
    for t in 1..=WARMUP + ticks {
        let now = Instant::from_micros(1 + t * 50_000);
        let mut f = TickFigures::default();
        // Clients: this tick's Move, then their packets (inputs and acks).
        moves.clear();
        client_walk.step(&mut moves);
        for (i, c) in clients.iter_mut().enumerate() {
            if spawned[i] {
                if let Command::Move(mut m) = moves[i] {
                    m.id = CLIENT_BASE + i as u64;
                    // A full queue (no acks yet) only skips a step.
                    let _ = c.send_input(t, &[Command::Move(m)]);
                }
            }
        }
        up.clear();
        for (i, c) in clients.iter_mut().enumerate() {
            while let Some(tx) = c.poll_transmit(now, &mut buf).expect("mtu buffer") {
                up.push((i as u32, buf[..tx.len].to_vec()));
            }
        }
        let region = Region::new(GLOBAL);
        let began = Clock::now();
        for (from, d) in &up {
            server.handle_datagram(now, *from, d);
        }
        f.handle.add(began.elapsed().as_nanos(), &region);
        // A driver calls handle_timeout when poll_timeout has passed.
        let region = Region::new(GLOBAL);
        let began = Clock::now();
        if server.poll_timeout().is_some_and(|d| d <= now) {
            server.handle_timeout(now);
        }
        f.timeout.add(began.elapsed().as_nanos(), &region);
        while let Some(e) = server.poll_event() {
            match e {
                ServerEvent::Connecting { conn, from, .. } => {
                    let spawn = client_spawns[from as usize];
                    server
                        .accept(conn, &spawn, ClientLimits::NONE)
                        .expect("fresh entity");
                    commands.push(Command::Spawn(spawn));
                    spawned[from as usize] = true;
                }
                ServerEvent::Input { .. } => commands.extend_from_slice(server.input_commands()),
                ServerEvent::Disconnected { conn, reason, .. } => {
                    panic!("{conn} disconnected: {reason:?}")
                }
            }
        }
        walkers.step(&mut commands);
        events.clear();
        let region = Region::new(GLOBAL);
        let began = Clock::now();
        let report = world.step(&commands, &mut events);
        f.kernel.add(began.elapsed().as_nanos(), &region);
        commands.clear();

        let region = Region::new(GLOBAL);
        let began = Clock::now();
        server
            .push_tick(now, report.tick, report.digest, &events)
            .expect("kernel order");
        f.push.add(began.elapsed().as_nanos(), &region);

        down.clear();
        down_at.clear();
        let region = Region::new(GLOBAL);
        let began = Clock::now();
        while let Some(tx) = server.poll_transmit(now, &mut buf).expect("mtu buffer") {
            let at = down.len();
            down.extend_from_slice(&buf[..tx.len]);
            down_at.push((tx.destination, at, tx.len));
        }
        f.transmit.add(began.elapsed().as_nanos(), &region);
        let began = Clock::now();
        for _ in 0..POLL_CALLS {
            std::hint::black_box(std::hint::black_box(&server).poll_timeout());
        }
        f.poll_timeout_ns = began.elapsed().as_nanos() as u64 / POLL_CALLS;
        f.bytes = down.len() as u64;
        f.datagrams = down_at.len() as u64;

        // The reference: every client's events of this tick, encoded alone.
        let views = &events[events.partition_point(|e| matches!(e, Event::Rejected { .. }))..];
        let began = Clock::now();
        for (i, shadow) in shadows.iter_mut().enumerate() {
            let mut rest = observer_events(views, CLIENT_BASE + i as u64);
            f.events += rest.len() as u64;
            while !rest.is_empty() {
                let p = encode_part(rest, shadow, &mut part).expect("kernel order");
                std::hint::black_box(&part[..p.len]);
                rest = &rest[p.consumed..];
            }
        }
        f.reference_ns = began.elapsed().as_nanos() as u64;

        for &(to, at, len) in &down_at {
            clients[to as usize].handle_datagram(now, 0, &down[at..at + len]);
        }
        for c in &mut clients {
            while let Some(e) = c.poll_event() {
                std::hint::black_box(&e);
            }
        }
        if t > WARMUP {
            out.push(f);
        }
    }
    for (i, c) in clients.iter().enumerate() {
        assert_eq!(c.view(), &shadows[i], "client {i} saw what was sent");
    }
    out
}

fn main() {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    println!(
        "server side in-process: kernel step + protocol Server, real walking clients acking over a perfect instant link; medians per tick"
    );
    println!();
    println!(
        "| workload | clients | events/client | kernel ns/client | push_tick ns/client | poll_transmit ns/client | handle_datagram ns/client | handle_timeout ns/client | server ns/client | server ns/event | encode_part alone ns/client | server / encode | bytes/client | datagrams/client | allocs/tick kernel, push, transmit, handle, timeout | poll_timeout ns/call |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|");
    let runs: [(Layout, usize, usize, u64); 4] = [
        (Layout::Uniform, 10_000, 1_000, 100),
        (Layout::Hotspot, 1_000, 1_000, 100),
        (Layout::Uniform, 10_000, 10_000, 20),
        (Layout::Hotspot, 1_000, 10_000, 10),
    ];
    for (layout, npcs, n, ticks) in runs {
        let label = format!("{} {npcs} NPCs {n} clients", layout.name());
        if !filters.iter().all(|f| label.contains(f.as_str())) {
            continue;
        }
        let figs = run(layout, npcs, n, ticks);
        let med = |g: fn(&TickFigures) -> u64| median(figs.iter().map(g).collect());
        let per = n as f64;
        let (kernel, push, transmit, handle, timeout) = (
            med(|f| f.kernel.ns),
            med(|f| f.push.ns),
            med(|f| f.transmit.ns),
            med(|f| f.handle.ns),
            med(|f| f.timeout.ns),
        );
        let server = med(|f| f.kernel.ns + f.push.ns + f.transmit.ns + f.handle.ns + f.timeout.ns);
        let protocol = med(|f| f.push.ns + f.transmit.ns + f.handle.ns + f.timeout.ns);
        let reference = med(|f| f.reference_ns);
        let events = med(|f| f.events);
        println!(
            "| {} ({npcs} NPCs) | {n} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.1} | {:.0} | {:.2} (protocol alone {:.2}) | {:.0} | {:.2} | {}, {}, {}, {}, {} | {} |",
            layout.name(),
            events as f64 / per,
            kernel as f64 / per,
            push as f64 / per,
            transmit as f64 / per,
            handle as f64 / per,
            timeout as f64 / per,
            server as f64 / per,
            server as f64 / events.max(1) as f64,
            reference as f64 / per,
            server as f64 / reference.max(1) as f64,
            protocol as f64 / reference.max(1) as f64,
            med(|f| f.bytes) as f64 / per,
            med(|f| f.datagrams) as f64 / per,
            med(|f| f.kernel.allocs),
            med(|f| f.push.allocs),
            med(|f| f.transmit.allocs),
            med(|f| f.handle.allocs),
            med(|f| f.timeout.allocs),
            med(|f| f.poll_timeout_ns),
        );
    }
}
