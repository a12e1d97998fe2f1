//! The node's tick never allocates in steady state: a counting global
//! allocator watches `handle_datagram` (the clients' acknowledgements and
//! one Move input each a tick, checked by the rules and queued),
//! `handle_timeout` (the tick: rules, kernel step, journal append,
//! routing and encoding), the `poll_transmit` drain and the reading of
//! its counters (`stats_into`, as the serve loop does every tick) for
//! hundreds of ticks of wandering NPCs seen by acknowledging clients, with
//! a stranger's garbage datagram refused each tick. The storage
//! keeps nothing (what a journal writes is the file system's business),
//! so what is measured is the node and the protocol around the kernel.
//! It is checked with one thread and with two, the loop then on the
//! node's pool as the serve loop runs (`Threads::run`).
//! The stats file the serve loop rewrites every second is checked too.
//!
//! This binary runs its check from `main`, without the test harness
//! (`harness = false` in `Cargo.toml`), so that no other thread allocates
//! while it measures: the harness's thread does, for example to say that a
//! test has run for over 60 seconds.

use std::alloc::System;
use std::io;

use lockgrid_host::journal::Record;
use lockgrid_host::node::{
    ClientHello, ClientInput, Node, NodeConfig, Refusal, Rules, Storage, StorageError,
};
use lockgrid_host::serve::stats::{ServeStats, StatsFile};
use lockgrid_kernel::coverage::Path;
use lockgrid_kernel::{Command, Config, EntityId, Fix, Move, Pos, Snapshot, Spawn, World};
use lockgrid_protocol::{
    Client, ClientConfig, DisconnectReason, Instant, ServerConfig, DEFAULT_MTU,
};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const CLIENTS: u32 = 40;
const NPCS: u64 = 800;
const WARM_UP: u64 = 10;
const MEASURED: u64 = 300;
/// The address of a sender that is no client.
const STRANGER: u32 = 9_999;

/// A journal that keeps nothing.
struct NullStorage;

impl Storage for NullStorage {
    fn open(&mut self) -> Result<Option<lockgrid_host::node::Opened>, StorageError> {
        Ok(None)
    }

    fn create(&mut self, _config: &Config) -> Result<(), StorageError> {
        Ok(())
    }

    fn records(
        &mut self,
    ) -> Result<Box<dyn Iterator<Item = Result<Record, StorageError>> + '_>, StorageError> {
        Ok(Box::new(std::iter::empty()))
    }

    fn append(
        &mut self,
        _tick: u64,
        _commands: &[Command],
        _digest: u64,
    ) -> Result<(), StorageError> {
        Ok(())
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        Ok(())
    }

    fn write_snapshot(&mut self, _snapshot: &Snapshot) -> Result<(), StorageError> {
        Ok(())
    }

    fn snapshots(&mut self) -> Result<Vec<u64>, StorageError> {
        Ok(Vec::new())
    }

    fn read_snapshot(&mut self, _tick: u64) -> Result<Snapshot, StorageError> {
        Err(StorageError::Io(io::Error::other("no snapshots here")))
    }

    fn close(&mut self) -> Result<(), StorageError> {
        Ok(())
    }
}

/// NPCs that each walk a step every tick, bouncing inside a square.
struct Walk {
    step: u64,
}

fn npc_pos(id: u64, step: u64) -> Pos {
    // A triangle wave per NPC, integer only, and a jitter of up to 10
    // units either way drawn anew each tick, so that views change every
    // tick and are streamed (rewritten whole), the pass that splits.
    let phase = (step + id * 37) % 200;
    let off = if phase < 100 { phase } else { 200 - phase } as i32;
    let mut z = (id << 32 | step).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z ^= z >> 29;
    let jitter = |bits: u64| (bits % 21) as i32 - 10;
    let x = 1000 + (id % 40) as i32 * 25 + off + jitter(z);
    let y = 1000 + (id / 40) as i32 * 25 + off / 2 + jitter(z >> 16);
    Pos::from_ints(x, y)
}

impl Rules for Walk {
    fn start(&mut self, _world: &World, out: &mut Vec<Command>) {
        for id in 1..=NPCS {
            // Observers too, so that with two threads a tick's views
            // are refreshed in two runs (a run takes 64 observers or more).
            out.push(Command::Spawn(Spawn {
                observer: true,
                radius: Fix::from_num(100),
                ..Spawn::npc(id, npc_pos(id, 0))
            }));
        }
    }

    fn admit(&mut self, _world: &World, _hello: &ClientHello<'_>) -> Result<(), Refusal> {
        Ok(())
    }

    fn spawn(&mut self, _world: &World, entity: EntityId, _hello: &ClientHello<'_>) -> Spawn {
        let k = (entity % 64) as i32;
        Spawn::observer(
            entity,
            Pos::from_ints(1000 + k * 20, 1200),
            Fix::from_num(300),
        )
    }

    fn check_input(
        &mut self,
        _world: &World,
        input: &ClientInput<'_>,
        out: &mut Vec<Command>,
    ) -> Result<(), Refusal> {
        out.push(*input.command);
        Ok(())
    }

    fn server_commands(&mut self, _world: &World, _tick: u64, out: &mut Vec<Command>) {
        self.step += 1;
        for id in 1..=NPCS {
            out.push(Command::Move(Move {
                id,
                pos: npc_pos(id, self.step),
                dir: 0,
                speed: Fix::from_num(1),
            }));
        }
    }

    fn left(
        &mut self,
        _world: &World,
        entity: EntityId,
        _reason: DisconnectReason,
        out: &mut Vec<Command>,
    ) {
        out.push(Command::Despawn { id: entity });
    }
}

/// With `threads` above 1 the loop runs on the node's pool, as the serve
/// loop does (`Threads::run`).
fn the_nodes_tick_does_not_allocate_in_steady_state(threads: usize) {
    let world = Config {
        width_cells: 40,
        height_cells: 40,
        ..Config::default()
    };
    let config = NodeConfig {
        server: ServerConfig::default(),
        snapshot_every: 0,
        threads,
        ..NodeConfig::default()
    };
    let t0 = Instant::from_micros(1);
    let (node, _) =
        Node::open(t0, config, &world, Walk { step: 0 }, NullStorage).expect("a new world");
    let pool = node.threads().clone();
    pool.run(|| ticks_without_allocating(node, t0, threads));
}

fn ticks_without_allocating(mut node: Node<u32, Walk, NullStorage>, t0: Instant, threads: usize) {
    let mut clients: Vec<Client<u32>> = (0..CLIENTS)
        .map(|i| {
            Client::new(ClientConfig::default(), 0, b"", u64::from(i), t0).expect("valid config")
        })
        .collect();
    let mut buf = vec![0u8; DEFAULT_MTU];
    let mut up: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut up_at: Vec<(u32, usize, usize)> = Vec::with_capacity(1 << 12);
    let mut down: Vec<u8> = Vec::with_capacity(16 << 20);
    let mut down_at: Vec<(u32, usize, usize)> = Vec::with_capacity(1 << 14);
    let mut allocated = Vec::new();
    let mut sent = 0u64;
    // The counters, read every tick as the serve loop reads them.
    let mut stats = lockgrid_host::node::NodeStats::default();
    for t in 1..=WARM_UP + MEASURED {
        let now = Instant::from_micros(1 + t * 50_000);
        up.clear();
        up_at.clear();
        // Each client sends its state every tick, standing where it was
        // spawned.
        for c in &mut clients {
            if let Some(spawn) = c.welcome().map(|w| w.spawn) {
                let m = Move {
                    id: spawn.id,
                    pos: spawn.pos,
                    dir: 0,
                    speed: Fix::ZERO,
                };
                // A full queue (nothing acknowledged lately) skips a tick.
                let _ = c.send_input(t, &[Command::Move(m)]);
            }
        }
        for (i, c) in clients.iter_mut().enumerate() {
            while let Some(tx) = c.poll_transmit(now, &mut buf).expect("mtu buffer") {
                up_at.push((i as u32, up.len(), tx.len));
                up.extend_from_slice(&buf[..tx.len]);
            }
        }
        down.clear();
        down_at.clear();
        let region = Region::new(GLOBAL);
        for &(from, at, len) in &up_at {
            node.handle_datagram(now, from, &up[at..at + len]);
        }
        // A stranger's garbage each tick: refused and counted (Malformed).
        node.handle_datagram(now, STRANGER, b"not a lockgrid packet");
        let ran = node.handle_timeout(now).expect("storage keeps nothing");
        while let Some(tx) = node.poll_transmit(now, &mut buf).expect("mtu buffer") {
            down_at.push((tx.destination, down.len(), tx.len));
            down.extend_from_slice(&buf[..tx.len]);
        }
        node.stats_into(&mut stats);
        let s = region.change();
        assert!(ran.is_some(), "a tick is due every 50 ms");
        if t > WARM_UP {
            sent += down_at.len() as u64;
            if (s.allocations, s.reallocations, s.deallocations) != (0, 0, 0) {
                allocated.push(format!("tick {t}: {s:?}"));
            }
        }
        for &(to, at, len) in &down_at {
            if let Some(c) = clients.get_mut(to as usize) {
                c.handle_datagram(now, 0, &down[at..at + len]);
            }
        }
        for c in &mut clients {
            while c.poll_event().is_some() {}
        }
    }
    assert!(
        allocated.is_empty(),
        "{threads} threads: {} of {MEASURED} ticks allocated, first: {:?}",
        allocated.len(),
        &allocated[..allocated.len().min(5)]
    );
    // Every tick streamed its views: with two threads, the split pass.
    if let Some(counts) = node.world().path_counts() {
        assert!(counts.get(Path::ViewsStreamed) > MEASURED, "{counts:?}");
    }
    assert_eq!(node.clients().count(), CLIENTS as usize, "all joined");
    assert!(
        stats.refused.get(&Refusal::Malformed).copied().unwrap_or(0) > MEASURED,
        "the stranger's datagrams were counted: {:?}",
        stats.refused
    );
    let inputs: u64 = node
        .server()
        .connections()
        .filter_map(|c| node.server().conn_stats(c))
        .map(|s| s.inputs_delivered)
        .sum();
    assert!(
        inputs > MEASURED * u64::from(CLIENTS),
        "the clients' inputs were delivered: {inputs}"
    );
    assert!(
        sent >= MEASURED * u64::from(CLIENTS),
        "every client was sent each tick: {sent}"
    );
}

/// The serve loop rewrites its stats file every second: after the first
/// write, with buffers kept, a write allocates nothing.
fn the_stats_file_is_rewritten_without_allocating() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut file = StatsFile::new(dir.path());
    let mut stats = ServeStats {
        running: true,
        refused: [("too_fast", 0), ("flood", 0)]
            .map(|(k, v)| (k.to_owned(), v))
            .into(),
        snapshot_error: Some("no room on the disk, for now".to_owned()),
        ..ServeStats::default()
    };
    file.write(&stats).expect("first write");
    for second in 1..=20u64 {
        stats.tick = second * 20;
        stats.packets_in += 12_345 * second;
        if let Some(n) = stats.refused.get_mut("too_fast") {
            *n += second;
        }
        stats
            .snapshot_error
            .clone_from(&Some(format!("no room, second {second}")));
        let region = Region::new(GLOBAL);
        file.write(&stats).expect("write");
        let s = region.change();
        assert_eq!(
            (s.allocations, s.reallocations, s.deallocations),
            (0, 0, 0),
            "second {second}: {s:?}"
        );
    }
    assert_eq!(ServeStats::read(dir.path()).expect("read back"), stats);
}

/// Run without the test harness: see the module docs.
fn main() {
    the_stats_file_is_rewritten_without_allocating();
    println!("the_stats_file_is_rewritten_without_allocating: ok");
    // Last: a dropped pool's threads end on their own time, freeing what
    // they held, which a check running after them would count.
    for threads in [1, 2] {
        the_nodes_tick_does_not_allocate_in_steady_state(threads);
        println!("the_nodes_tick_does_not_allocate_in_steady_state (threads: {threads}): ok");
    }
}
