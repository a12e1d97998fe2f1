//! The server's tick path never allocates in steady state: a counting
//! global allocator watches `push_tick`, `poll_transmit`, `handle_timeout`,
//! the clients' packets (`handle_datagram`: acknowledgements and one Move
//! input each a tick), the delivery of those inputs (`poll_event`,
//! `input_commands`) and the refusal of one in five (`refuse_input`, told
//! in Refused frames) for hundreds of ticks of walking NPCs seen by
//! acknowledging clients, with and without a bandwidth budget, with and
//! without connect tokens (every packet sealed both ways), on a link
//! that loses one of the server's datagrams a tick (so parts are sent
//! again).
//!
//! Capacities are fixed when the server is built or grow when a client is
//! accepted: its shadow view has room for the world's `max_view`, its
//! backlog for 8 pending ticks, and it adds packet records and part
//! blocks to pools all connections share; parts are staged in one buffer
//! the server sizes at construction. So the check starts 10 ticks in,
//! once the clients are connected and the server's queues (sized by how
//! many connections there are) have settled, and a view that fills long
//! after connecting allocates nothing (checked separately).
//!
//! This binary runs its check from `main`, without the test harness
//! (`harness = false` in `Cargo.toml`), so that no other thread allocates
//! while it measures: the harness's thread does, for example to say that a
//! test has run for over 60 seconds.

mod common;

use std::alloc::System;

use common::crowd::{config, Layout, Walkers};
use common::lan::{key, server_socket, PROTOCOL_ID, UNIX_AT_ZERO};
use lockgrid_kernel::{Command, Config, EntityId, Fix, Move, Pos, Spawn, World};
use lockgrid_protocol::token::{ConnectToken, TokenParams};
use lockgrid_protocol::{
    Client, ClientConfig, ClientLimits, InputRefusal, Instant, Server, ServerConfig, ServerEvent,
    ServerSecurity, WorldParams, DEFAULT_MTU,
};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const CLIENTS: usize = 60;
const WARM_UP: u64 = 10;
const MEASURED: u64 = 300;

/// The entity of the client at address `i`.
fn client_entity(i: u32) -> EntityId {
    100_000 + u64::from(i)
}

/// A client at address `i`: with a connect token for its entity when the
/// server is `sealed` (every packet then sealed both ways).
fn client(i: usize, sealed: bool) -> Client<u32> {
    let now = Instant::from_micros(1);
    if !sealed {
        return Client::new(ClientConfig::default(), 0, b"", i as u64, now).expect("valid config");
    }
    let servers = [server_socket()];
    let params = TokenParams {
        protocol_id: PROTOCOL_ID,
        create_unix_secs: UNIX_AT_ZERO,
        expire_unix_secs: UNIX_AT_ZERO + 600,
        client_id: client_entity(i as u32),
        server_addresses: &servers,
        user_data: b"",
    };
    let mut seed = i as u8;
    let token = ConnectToken::generate(&key(), &params, |b| {
        for x in b {
            seed = seed.wrapping_mul(31).wrapping_add(7);
            *x = seed;
        }
    })
    .expect("valid token");
    Client::with_token(ClientConfig::default(), 0, &token, now).expect("valid config")
}

/// Records, for tick `t`, each named part of it that allocated.
fn note_allocations(allocated: &mut Vec<String>, t: u64, parts: [(&str, stats_alloc::Stats); 2]) {
    for (what, s) in parts {
        if (s.allocations, s.reallocations, s.deallocations) != (0, 0, 0) {
            allocated.push(format!("tick {t} {what}: {s:?}"));
        }
    }
}

/// Runs one server and fails on any allocation in its measured ticks.
fn steady_state_is_allocation_free(
    name: &str,
    layout: Layout,
    npcs: usize,
    budget: Option<u32>,
    sealed: bool,
) {
    let cfg = config();
    let mut world = World::new(cfg).expect("valid config");
    let server_config = ServerConfig {
        budget_bytes_per_sec: budget,
        ..ServerConfig::default()
    };
    let params = WorldParams::from(&cfg);
    let mut server: Server<u32> = if sealed {
        let security = ServerSecurity::new(key(), PROTOCOL_ID, vec![server_socket()], UNIX_AT_ZERO);
        Server::with_security(server_config, params, security).expect("valid config")
    } else {
        Server::new(server_config, params).expect("valid config")
    };
    let mut walkers = Walkers::new(layout, npcs, 3);
    let mut clients: Vec<Client<u32>> = (0..CLIENTS).map(|i| client(i, sealed)).collect();
    let mut commands = walkers.spawns();
    commands.reserve(npcs + 2 * CLIENTS);
    let mut events = Vec::with_capacity(1 << 18);
    let mut buf = vec![0u8; DEFAULT_MTU];
    // Datagrams, each (address, start, len) in one flat buffer.
    let mut up: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut up_at: Vec<(u32, usize, usize)> = Vec::with_capacity(1 << 12);
    let mut down: Vec<u8> = Vec::with_capacity(16 << 20);
    let mut down_at: Vec<(u32, usize, usize)> = Vec::with_capacity(1 << 14);
    let (mut sent, mut allocated) = (0u64, Vec::new());
    let (mut dropped, mut inputs) = (0u64, 0u64);
    let mut grown_after_warm_up = 0;
    for t in 1..=WARM_UP + MEASURED {
        let now = Instant::from_micros(1 + t * 50_000);
        let measured = t > WARM_UP;
        if t == WARM_UP + 1 {
            grown_after_warm_up = server.stats().pool_grown;
        }
        up.clear();
        up_at.clear();
        // Each client sends its state every tick, standing where it was
        // spawned; the NPCs around it walk.
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
        let region = Region::new(GLOBAL);
        for &(from, at, len) in &up_at {
            server.handle_datagram(now, from, &up[at..at + len]);
        }
        server.handle_timeout(now);
        while let Some(e) = server.poll_event() {
            match e {
                ServerEvent::Input { conn, seq, .. } => {
                    if measured {
                        inputs += 1;
                    }
                    // The host refuses one input in five, as rules refuse
                    // moves in play: the refusal travels in a Refused frame.
                    if seq % 5 == 0 {
                        server
                            .refuse_input(conn, seq, 0, InputRefusal::TooFast)
                            .expect("open connection");
                    } else {
                        commands.extend_from_slice(server.input_commands());
                    }
                }
                ServerEvent::Connecting { conn, from, .. } => {
                    let id = client_entity(from);
                    let at = walkers.observer_spot(u64::from(from), CLIENTS as u64);
                    let spawn = Spawn::observer(id, at, Fix::from_num(300));
                    server
                        .accept(conn, &spawn, ClientLimits::NONE)
                        .expect("fresh entity");
                    commands.push(Command::Spawn(spawn));
                }
                other => panic!("{name}: unexpected {other:?}"),
            }
        }
        let handled = region.change();
        walkers.step(&mut commands);
        events.clear();
        let report = world.step(&commands, &mut events);
        commands.clear();

        down.clear();
        down_at.clear();
        let region = Region::new(GLOBAL);
        let w = &world;
        server
            .push_tick_located(now, report.tick, report.digest, &events, |id| {
                w.entity(id).map(|e| e.pos)
            })
            .expect("kernel order");
        while let Some(tx) = server.poll_transmit(now, &mut buf).expect("mtu buffer") {
            down_at.push((tx.destination, down.len(), tx.len));
            down.extend_from_slice(&buf[..tx.len]);
        }
        let ticked = region.change();
        if measured {
            sent += down_at.len() as u64;
            note_allocations(
                &mut allocated,
                t,
                [("acks and inputs", handled), ("tick", ticked)],
            );
        }
        // Each tick one client loses its first datagram (each client one
        // in CLIENTS ticks): its parts are sent again. Losses far apart
        // keep the depth of unacknowledged ticks bounded, as on a steady
        // link; a run of losses deeper than any before needs more room.
        let unlucky = (t % CLIENTS as u64) as u32;
        let mut first = true;
        for &(to, at, len) in &down_at {
            if to == unlucky && first {
                first = false;
                dropped += 1;
                continue;
            }
            clients[to as usize].handle_datagram(now, 0, &down[at..at + len]);
        }
        for c in &mut clients {
            while c.poll_event().is_some() {}
        }
    }
    assert!(
        allocated.is_empty(),
        "{name}: {} of {MEASURED} ticks allocated, first: {:?}",
        allocated.len(),
        &allocated[..allocated.len().min(5)]
    );
    assert_eq!(
        server.stats().pool_grown,
        grown_after_warm_up,
        "{name}: the pools stayed as they were"
    );
    let retransmitted: u64 = server
        .connections()
        .filter_map(|c| server.conn_stats(c))
        .map(|s| s.parts_retransmitted)
        .sum();
    assert_eq!(server.connections().count(), CLIENTS, "{name}: all stayed");
    // Nearly every client's input of every measured tick arrived (a lost
    // datagram can delay acknowledgements, and a full queue skip a step).
    assert!(
        inputs > MEASURED * CLIENTS as u64 * 9 / 10,
        "{name}: inputs were delivered: {inputs}"
    );
    assert!(sent > MEASURED * CLIENTS as u64, "{name}: the server sent");
    let refusals_heard: u64 = clients.iter().map(|c| c.stats().refused).sum();
    assert!(
        refusals_heard > MEASURED * CLIENTS as u64 / 6,
        "{name}: refusals were told: {refusals_heard}"
    );
    assert!(
        dropped > 0 && retransmitted > 0,
        "{name}: losses were repaired"
    );
}

/// A connection's view fills up long after it connected, one subject a
/// tick, then two hundred at once, in a tick of several parts: its shadow
/// view had room for the world's `max_view` from the moment it was
/// accepted, it brought part blocks and packet records to the server's
/// pools, and the parts are staged in one buffer the server sized when
/// it was built, so nothing grows. The same for a view of 4 500 subjects
/// in a world whose `max_view` is 5 000, a hundred a tick, then 500.
fn a_view_that_fills_after_connecting_allocates_nothing() {
    view_fills_after_connecting(config(), 300, 100, 1);
    let wide = Config {
        max_view: 5_000,
        max_observers: 4,
        ..config()
    };
    view_fills_after_connecting(wide, 4_500, 40, 100);
}

/// `npcs` NPCs far away walk into the client's view, `per_tick` a tick for
/// `ticks` ticks, then the rest at once; no tick allocates.
fn view_fills_after_connecting(cfg: Config, npcs: u64, ticks: u64, per_tick: u64) {
    const SETTLE: u64 = 20;
    let mut world = World::new(cfg).expect("valid config");
    let mut server: Server<u32> =
        Server::new(ServerConfig::default(), WorldParams::from(&cfg)).expect("valid config");
    let mut client = client(0, false);
    // NPCs far from the client, in the world's first cells, and near it:
    // within the cells around the client's, (2 050, 2 050).
    let far = |i: u64| Pos::from_ints(50 + (i % 30) as i32 * 3, 50 + (i / 30) as i32 * 3);
    let near = |i: u64| Pos::from_ints(1_910 + (i % 70) as i32 * 4, 1_910 + (i / 70) as i32 * 4);
    let mut commands: Vec<Command> = (1..=npcs)
        .map(|id| Command::Spawn(Spawn::npc(id, far(id))))
        .collect();
    let mut events = Vec::with_capacity(1 << 12);
    let mut buf = vec![0u8; DEFAULT_MTU];
    let mut up: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut up_at: Vec<usize> = Vec::with_capacity(64);
    let mut down: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut down_at: Vec<(usize, usize)> = Vec::with_capacity(64);
    let mut allocated = Vec::new();
    let mut most_datagrams = 0;
    for t in 1..=SETTLE + ticks + 10 {
        let now = Instant::from_micros(1 + t * 50_000);
        // From SETTLE on, `per_tick` NPCs a tick walk into the client's
        // view and stay; after `ticks` ticks, the rest come at once.
        let ids = match t.saturating_sub(SETTLE) {
            0 => 1..1,
            n if n <= ticks => (n - 1) * per_tick + 1..n * per_tick + 1,
            n if n == ticks + 1 => (n - 1) * per_tick + 1..npcs + 1,
            _ => 1..1,
        };
        for id in ids {
            commands.push(Command::Move(Move {
                id,
                pos: near(id),
                dir: 0,
                speed: Fix::ZERO,
            }));
        }
        up.clear();
        up_at.clear();
        while let Some(tx) = client.poll_transmit(now, &mut buf).expect("mtu buffer") {
            up_at.push(tx.len);
            up.extend_from_slice(&buf[..tx.len]);
        }
        let region = Region::new(GLOBAL);
        let mut at = 0;
        for &len in &up_at {
            server.handle_datagram(now, 0, &up[at..at + len]);
            at += len;
        }
        server.handle_timeout(now);
        while let Some(e) = server.poll_event() {
            if let ServerEvent::Connecting { conn, .. } = e {
                let spawn = Spawn::observer(
                    client_entity(0),
                    Pos::from_ints(2_050, 2_050),
                    Fix::from_num(100),
                );
                server
                    .accept(conn, &spawn, ClientLimits::NONE)
                    .expect("fresh entity");
                commands.push(Command::Spawn(spawn));
            }
        }
        let handled = region.change();
        events.clear();
        let report = world.step(&commands, &mut events);
        commands.clear();
        down.clear();
        down_at.clear();
        let region = Region::new(GLOBAL);
        server
            .push_tick(now, report.tick, report.digest, &events)
            .expect("kernel order");
        while let Some(tx) = server.poll_transmit(now, &mut buf).expect("mtu buffer") {
            down_at.push((down.len(), tx.len));
            down.extend_from_slice(&buf[..tx.len]);
        }
        let ticked = region.change();
        most_datagrams = most_datagrams.max(down_at.len());
        if t > SETTLE {
            note_allocations(&mut allocated, t, [("acks", handled), ("tick", ticked)]);
        }
        for &(at, len) in &down_at {
            client.handle_datagram(now, 0, &down[at..at + len]);
        }
        while client.poll_event().is_some() {}
    }
    assert_eq!(client.view().len() as u64, npcs, "every NPC came into view");
    assert!(
        allocated.is_empty(),
        "{} of {} ticks allocated, first: {:?}",
        allocated.len(),
        ticks + 10,
        &allocated[..allocated.len().min(5)]
    );
    assert!(
        most_datagrams >= 2,
        "the crowd came in one tick of several parts"
    );
}

fn the_servers_tick_path_does_not_allocate_in_steady_state() {
    steady_state_is_allocation_free("uniform", Layout::Uniform, 4_000, None, false);
    steady_state_is_allocation_free("hotspot", Layout::Hotspot, 600, None, false);
    let budget = Some(32 * 1024);
    steady_state_is_allocation_free("hotspot 32 KiB/s", Layout::Hotspot, 600, budget, false);
    steady_state_is_allocation_free("hotspot sealed", Layout::Hotspot, 600, None, true);
    // The counter itself works: a visible allocation is seen.
    let region = Region::new(GLOBAL);
    let v = std::hint::black_box(vec![1u8; 64]);
    drop(v);
    assert_eq!(region.change().allocations, 1);
}

/// Run without the test harness: see the module docs.
fn main() {
    the_servers_tick_path_does_not_allocate_in_steady_state();
    println!("the_servers_tick_path_does_not_allocate_in_steady_state: ok");
    a_view_that_fills_after_connecting_allocates_nothing();
    println!("a_view_that_fills_after_connecting_allocates_nothing: ok");
}
