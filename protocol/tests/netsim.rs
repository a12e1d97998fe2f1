//! Deterministic network simulation: one server endpoint over a real kernel
//! world, many clients joining and leaving over a lossy, duplicating,
//! reordering network. After the network quiets, every client's view must
//! equal the kernel's view of its observer, state for state, and every
//! client must have received exactly its observer's events, tick by tick.
//!
//! Reproduce one seed with `LOCKGRID_NETSIM_SEED=<n> cargo test -p lockgrid-protocol --test netsim`;
//! run more with `LOCKGRID_NETSIM_SEEDS=<count>`.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::{Net, Rng};
use lockgrid_kernel::{Command, Config, EntityId, Event, Fix, Move, Pos, Spawn, Visibility, World};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientState, ConnId, DisconnectReason, Instant, Server,
    ServerConfig, ServerEvent, WorldParams,
};

const SERVER: u32 = 0;
const TICK_US: u64 = 50_000;
const NPCS: u64 = 150;
const LOAD_TICKS: u64 = 300;

/// What a client slot does over its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    /// Stays to the end.
    Stay,
    /// Says Bye at this tick.
    Leave(u64),
    /// Stops running (no Bye) at this tick; the server must time it out.
    Vanish(u64),
    /// Sends a token the host refuses.
    BadToken,
}

struct Slot {
    addr: u32,
    client: Client<u32>,
    plan: Plan,
    pos: (i64, i64),
    /// Inputs the client queued: (tick, commands).
    sent: Vec<(u64, Vec<Command>)>,
    /// Tick events the client applied: tick → (digest, events).
    applied: Vec<(u64, u64, Vec<Event>)>,
    gone: bool,
    disconnected: Option<DisconnectReason>,
}

struct Host {
    world: World,
    server: Server<u32>,
    commands: Vec<Command>,
    conn_addr: BTreeMap<ConnId, u32>,
    entity_of_addr: BTreeMap<u32, EntityId>,
    delivered: BTreeMap<u32, Vec<(u64, Vec<Command>)>>,
    disconnected: BTreeMap<u32, DisconnectReason>,
    /// Per tick: digest and all events.
    history: BTreeMap<u64, (u64, Vec<Event>)>,
    next_entity: EntityId,
}

fn params(seed: u64) -> (Config, usize, u64, u64, u64) {
    let mut rng = Rng::new(seed ^ 0xC0FFEE);
    let mut config = Config {
        origin: Pos::from_ints(-800, -800),
        cell_size: Fix::from_num(100),
        width_cells: 16,
        height_cells: 16,
        max_entities: 1024,
        max_observers: 256,
        max_view: 64,
        ..Config::default()
    };
    if seed % 3 == 1 {
        config.visibility = Visibility::Radius;
        config.hysteresis = Fix::from_num(20);
    }
    if seed % 5 == 2 {
        // Crowd culling by capacity.
        config.max_view = 8;
    }
    let mtu = [200, 300, 576, 1200][(seed % 4) as usize];
    let loss = rng.range_i64(0, 200_000) as u64;
    let dup = rng.range_i64(0, 100_000) as u64;
    let jitter = rng.range_i64(0, 60_000) as u64;
    (config, mtu, loss, dup, jitter)
}

fn in_world(config: &Config, x: i64, y: i64) -> (i64, i64) {
    let lo_x = config.origin.x.to_bits();
    let lo_y = config.origin.y.to_bits();
    let w = config.cell_size.to_bits() * i64::from(config.width_cells);
    let h = config.cell_size.to_bits() * i64::from(config.height_cells);
    (x.clamp(lo_x, lo_x + w - 1), y.clamp(lo_y, lo_y + h - 1))
}

fn token(home: (i64, i64)) -> Vec<u8> {
    let mut t = b"home".to_vec();
    t.extend_from_slice(&home.0.to_le_bytes());
    t.extend_from_slice(&home.1.to_le_bytes());
    t
}

fn parse_token(t: &[u8]) -> Option<(i64, i64)> {
    if t.len() != 20 || &t[..4] != b"home" {
        return None;
    }
    Some((
        i64::from_le_bytes(t[4..12].try_into().ok()?),
        i64::from_le_bytes(t[12..20].try_into().ok()?),
    ))
}

fn run(seed: u64) -> Result<String, String> {
    let (config, mtu, loss, dup, jitter) = params(seed);
    let mut rng = Rng::new(seed);
    let mut net = Net::new(seed.wrapping_mul(31), mtu);
    net.loss = loss;
    net.dup = dup;
    net.jitter = jitter;
    let server_config = ServerConfig {
        mtu,
        idle_timeout: Duration::from_secs(2),
        handshake_timeout: Duration::from_secs(2),
        conn_id_seed: seed,
        ..ServerConfig::default()
    };
    let client_config = ClientConfig {
        mtu,
        idle_timeout: Duration::from_secs(3),
        ..ClientConfig::default()
    };
    let mut host = Host {
        world: World::new(config).map_err(|e| e.to_string())?,
        server: Server::new(server_config, WorldParams::from(&config))
            .map_err(|e| e.to_string())?,
        commands: Vec::new(),
        conn_addr: BTreeMap::new(),
        entity_of_addr: BTreeMap::new(),
        delivered: BTreeMap::new(),
        disconnected: BTreeMap::new(),
        history: BTreeMap::new(),
        next_entity: 1_000_000,
    };
    // NPCs from tick 1.
    let mut npcs: Vec<(EntityId, (i64, i64))> = Vec::new();
    for id in 1..=NPCS {
        let p = in_world(
            &config,
            rng.range_i64(-800 << 16, 800 << 16),
            rng.range_i64(-800 << 16, 800 << 16),
        );
        npcs.push((id, p));
        host.commands.push(Command::Spawn(Spawn::npc(
            id,
            Pos::new(Fix::from_bits(p.0), Fix::from_bits(p.1)),
        )));
    }

    let mut slots: Vec<Slot> = Vec::new();
    let mut now = Instant::from_micros(1_000_000);
    let mut next_tick_at = now;
    let mut buf = vec![0u8; mtu];
    let mut last_motion_tick = 0;
    let mut ticking = true;
    let deadline = now + Duration::from_micros(TICK_US * (LOAD_TICKS + 400));

    loop {
        // Deliver due datagrams.
        while let Some((from, to, bytes)) = net.pop_due(now) {
            if to == SERVER {
                host.server.handle_datagram(now, from, &bytes);
            } else if let Some(s) = slots.iter_mut().find(|s| s.addr == to && !s.gone) {
                s.client.handle_datagram(now, from, &bytes);
            }
        }
        // Timers.
        if host.server.poll_timeout().is_some_and(|t| t <= now) {
            host.server.handle_timeout(now);
        }
        for s in slots.iter_mut().filter(|s| !s.gone) {
            if s.client.poll_timeout().is_some_and(|t| t <= now) {
                s.client.handle_timeout(now);
            }
        }
        // Server events.
        while let Some(ev) = host.server.poll_event() {
            match ev {
                ServerEvent::Connecting { conn, from, token } => match parse_token(&token) {
                    Some(home) => {
                        host.next_entity += 1;
                        let e = host.next_entity;
                        host.server
                            .accept(conn, e)
                            .map_err(|e| format!("accept: {e}"))?;
                        host.conn_addr.insert(conn, from);
                        host.entity_of_addr.insert(from, e);
                        let at = Pos::new(Fix::from_bits(home.0), Fix::from_bits(home.1));
                        host.commands.push(Command::Spawn(Spawn::observer(
                            e,
                            at,
                            Fix::from_num(150),
                        )));
                    }
                    None => host
                        .server
                        .reject(conn, DisconnectReason::TokenRejected)
                        .map_err(|e| e.to_string())?,
                },
                ServerEvent::Input {
                    conn,
                    entity,
                    tick,
                    commands,
                } => {
                    let addr = host.conn_addr[&conn];
                    if host.entity_of_addr.get(&addr) != Some(&entity) {
                        return Err(format!("input for conn {conn} tagged with entity {entity}"));
                    }
                    if commands.iter().any(|c| c.entity() != entity) {
                        return Err(format!("foreign command surfaced for {conn}"));
                    }
                    host.commands.extend(commands.iter().copied());
                    host.delivered
                        .entry(addr)
                        .or_default()
                        .push((tick, commands));
                }
                ServerEvent::Disconnected {
                    conn,
                    entity,
                    reason,
                } => {
                    if let Some(addr) = host.conn_addr.get(&conn) {
                        host.disconnected.insert(*addr, reason);
                    }
                    if let Some(id) = entity {
                        host.commands.push(Command::Despawn { id });
                    }
                }
            }
        }
        // Client events.
        for s in slots.iter_mut().filter(|s| !s.gone) {
            while let Some(ev) = s.client.poll_event() {
                match ev {
                    ClientEvent::Connected(_) => {}
                    ClientEvent::Tick {
                        tick,
                        digest,
                        events,
                    } => s.applied.push((tick, digest, events)),
                    ClientEvent::Disconnected { reason } => s.disconnected = Some(reason),
                }
            }
        }

        // The tick.
        if ticking && now >= next_tick_at {
            next_tick_at = next_tick_at + Duration::from_micros(TICK_US);
            let tick = host.world.tick() + 1;
            let loading = tick <= LOAD_TICKS;
            if loading {
                // Joins.
                if slots.len() < 60 && rng.chance(150_000) {
                    let addr = slots.len() as u32 + 1;
                    let late = tick + 40 > LOAD_TICKS;
                    let plan = match rng.below(10) {
                        6..=8 if late => Plan::Stay,
                        0..=5 => Plan::Stay,
                        6 | 7 => Plan::Leave((tick + 20 + rng.below(150)).min(LOAD_TICKS - 10)),
                        8 => Plan::Vanish((tick + 20 + rng.below(150)).min(LOAD_TICKS - 10)),
                        _ => Plan::BadToken,
                    };
                    // Homes cluster toward the middle so views overlap and grow.
                    let home = in_world(
                        &config,
                        rng.range_i64(-300 << 16, 300 << 16),
                        rng.range_i64(-300 << 16, 300 << 16),
                    );
                    let t = if plan == Plan::BadToken {
                        b"let me in".to_vec()
                    } else {
                        token(home)
                    };
                    let client =
                        Client::new(client_config, SERVER, &t, now).map_err(|e| e.to_string())?;
                    slots.push(Slot {
                        addr,
                        client,
                        plan,
                        pos: home,
                        sent: Vec::new(),
                        applied: Vec::new(),
                        gone: false,
                        disconnected: None,
                    });
                }
                // NPC random walk.
                for (id, p) in npcs.iter_mut() {
                    if rng.chance(500_000) {
                        *p = in_world(
                            &config,
                            p.0 + rng.range_i64(-3 << 16, 3 << 16),
                            p.1 + rng.range_i64(-3 << 16, 3 << 16),
                        );
                        host.commands.push(Command::Move(Move {
                            id: *id,
                            pos: Pos::new(Fix::from_bits(p.0), Fix::from_bits(p.1)),
                            dir: rng.next_u64() as u16,
                            speed: Fix::from_bits(rng.range_i64(0, 4 << 16)),
                        }));
                    }
                }
                last_motion_tick = tick;
            }
            // Clients act: move, leave or vanish.
            for s in slots.iter_mut().filter(|s| !s.gone) {
                match s.plan {
                    Plan::Leave(t) if t == tick => s.client.close(now),
                    Plan::Vanish(t) if t == tick => {
                        s.gone = true;
                        continue;
                    }
                    _ => {}
                }
                if loading && s.client.state() == ClientState::Connected && rng.chance(700_000) {
                    let Some(me) = s.client.entity() else {
                        continue;
                    };
                    s.pos = in_world(
                        &config,
                        s.pos.0 + rng.range_i64(-40 << 16, 40 << 16),
                        s.pos.1 + rng.range_i64(-40 << 16, 40 << 16),
                    );
                    let cmds = vec![Command::Move(Move {
                        id: me,
                        pos: Pos::new(Fix::from_bits(s.pos.0), Fix::from_bits(s.pos.1)),
                        dir: rng.next_u64() as u16,
                        speed: Fix::from_num(2),
                    })];
                    let t = s.client.applied_tick() + 1;
                    let t = s.sent.last().map_or(t, |l| t.max(l.0 + 1));
                    if s.client.send_input(t, &cmds).is_ok() {
                        s.sent.push((t, cmds));
                    }
                }
            }
            if loading {
                last_motion_tick = last_motion_tick.max(tick);
            }
            let mut events = Vec::new();
            let cmds = std::mem::take(&mut host.commands);
            if !cmds.is_empty() {
                last_motion_tick = tick;
            }
            let report = host.world.step(&cmds, &mut events);
            host.server
                .push_tick(now, report.tick, report.digest, &events)
                .map_err(|e| format!("push_tick {tick}: {e}"))?;
            host.history.insert(report.tick, (report.digest, events));
            if tick == LOAD_TICKS {
                // The network quiets: no more loss or duplication.
                net.loss = 0;
                net.dup = 0;
            }
        }

        // After the load, ticks continue until motion has settled (the
        // kernel's settling updates go out) and vanished clients timed out;
        // then the world stops and the network drains.
        let done = host.world.tick();
        ticking =
            !(done >= LOAD_TICKS + 60 && done >= last_motion_tick + 4 && host.commands.is_empty());
        if !ticking {
            let settled = slots
                .iter()
                .filter(|s| !s.gone && s.client.state() == ClientState::Connected)
                .all(|s| s.client.applied_tick() == done && s.client.unacked_inputs() == 0)
                && host
                    .server
                    .connections()
                    .all(|c| host.server.unacked_ticks(c) == Some(0));
            if settled {
                break;
            }
        }
        if now >= deadline {
            let clients: Vec<String> = slots
                .iter()
                .filter(|s| !s.gone && s.client.state() == ClientState::Connected)
                .filter(|s| s.client.applied_tick() != done || s.client.unacked_inputs() != 0)
                .map(|s| {
                    format!(
                        "client {} applied {} unacked inputs {}",
                        s.addr,
                        s.client.applied_tick(),
                        s.client.unacked_inputs()
                    )
                })
                .collect();
            let conns: Vec<String> = host
                .server
                .connections()
                .filter(|&c| host.server.unacked_ticks(c) != Some(0))
                .map(|c| {
                    format!(
                        "{c} entity {:?} unacked {:?}",
                        host.server.conn_entity(c),
                        host.server.unacked_ticks(c)
                    )
                })
                .collect();
            return Err(format!(
                "seed {seed}: no quiet by tick {done} (last motion {last_motion_tick}): {clients:?} {conns:?}"
            ));
        }

        // Transmit.
        while let Some(t) = host
            .server
            .poll_transmit(now, &mut buf)
            .map_err(|e| e.to_string())?
        {
            net.send(now, SERVER, t.destination, &buf[..t.len]);
        }
        for s in slots.iter_mut().filter(|s| !s.gone) {
            while let Some(t) = s
                .client
                .poll_transmit(now, &mut buf)
                .map_err(|e| e.to_string())?
            {
                net.send(now, s.addr, t.destination, &buf[..t.len]);
            }
        }

        // Jump to the next thing that happens.
        let mut next = if ticking { next_tick_at } else { deadline };
        if let Some(t) = net.next_delivery() {
            next = next.min(t);
        }
        if let Some(t) = host.server.poll_timeout() {
            next = next.min(t);
        }
        for s in slots.iter().filter(|s| !s.gone) {
            if let Some(t) = s.client.poll_timeout() {
                next = next.min(t);
            }
        }
        now = next.max(now + Duration::from_micros(100));
    }

    // Drain the last events.
    for s in slots.iter_mut().filter(|s| !s.gone) {
        while let Some(ev) = s.client.poll_event() {
            if let ClientEvent::Tick {
                tick,
                digest,
                events,
            } = ev
            {
                s.applied.push((tick, digest, events));
            }
        }
    }

    // Checks.
    let mut connected = 0;
    for s in &slots {
        let ctx = format!("seed {seed} client {} ({:?})", s.addr, s.plan);
        if s.plan == Plan::BadToken {
            if s.disconnected != Some(DisconnectReason::TokenRejected) {
                return Err(format!(
                    "{ctx}: expected token rejection, got {:?}",
                    s.disconnected
                ));
            }
            continue;
        }
        if let Plan::Vanish(_) = s.plan {
            match host.disconnected.get(&s.addr) {
                Some(DisconnectReason::IdleTimeout) => {}
                None if s.client.entity().is_none() => {}
                other => return Err(format!("{ctx}: server should time it out, got {other:?}")),
            }
            continue;
        }
        let Some(entity) = s.client.entity() else {
            return Err(format!("{ctx}: never connected"));
        };
        // Inputs: exactly once, in order; all of them for those still connected.
        let got = host.delivered.get(&s.addr).cloned().unwrap_or_default();
        if got.len() > s.sent.len() || got[..] != s.sent[..got.len()] {
            return Err(format!(
                "{ctx}: delivered inputs are not a prefix of the sent ones"
            ));
        }
        // Every applied tick carries exactly the kernel's events for this client.
        let mut prev = None;
        for (tick, digest, events) in &s.applied {
            if prev.is_some_and(|p| p + 1 != *tick) {
                return Err(format!("{ctx}: ticks not consecutive at {tick}"));
            }
            prev = Some(*tick);
            let (d, all) = &host.history[tick];
            let mine: Vec<Event> = all
                .iter()
                .filter(|e| match e {
                    Event::Rejected { entity: x, .. } => *x == entity,
                    _ => e.order_key().is_some_and(|k| k.0 == entity),
                })
                .copied()
                .collect();
            if d != digest || &mine != events {
                return Err(format!(
                    "{ctx}: tick {tick} events or digest differ from the kernel's"
                ));
            }
        }
        if let Plan::Leave(_) = s.plan {
            if s.disconnected != Some(DisconnectReason::Closed) {
                return Err(format!(
                    "{ctx}: graceful close ended with {:?}",
                    s.disconnected
                ));
            }
            continue;
        }
        if s.client.state() != ClientState::Connected {
            return Err(format!("{ctx}: ended as {:?}", s.client.state()));
        }
        if got != s.sent {
            return Err(format!(
                "{ctx}: {} of {} inputs delivered",
                got.len(),
                s.sent.len()
            ));
        }
        // The view equals the kernel's, state for state.
        let kernel: Vec<EntityId> = host
            .world
            .view(entity)
            .map(|v| v.collect())
            .unwrap_or_default();
        let mine: Vec<EntityId> = s.client.view().ids().collect();
        if kernel != mine {
            return Err(format!(
                "{ctx}: view ids differ: kernel {kernel:?} client {mine:?}"
            ));
        }
        for (id, seen) in s.client.view().iter() {
            let k = host
                .world
                .entity(id)
                .ok_or(format!("{ctx}: {id} not alive"))?;
            if (k.pos, k.dir, k.speed, k.layers) != (seen.pos, seen.dir, seen.speed, seen.layers) {
                return Err(format!(
                    "{ctx}: state of {id} differs: kernel {k:?} client {seen:?}"
                ));
            }
        }
        connected += 1;
    }
    Ok(format!(
        "seed {seed}: mtu {mtu} loss {loss}ppm dup {dup}ppm jitter {jitter}us, {} ticks, {} clients ({connected} converged), {} datagrams delivered, {} lost",
        host.world.tick(),
        slots.len(),
        net.delivered,
        net.dropped
    ))
}

#[test]
fn clients_converge_to_the_kernel_view_under_faults() {
    let seeds: Vec<u64> = match std::env::var("LOCKGRID_NETSIM_SEED") {
        Ok(s) => vec![s.parse().expect("LOCKGRID_NETSIM_SEED is a number")],
        Err(_) => {
            let n = std::env::var("LOCKGRID_NETSIM_SEEDS")
                .ok()
                .and_then(|s| s.parse().ok())
                .unwrap_or(12);
            (0..n).collect()
        }
    };
    let mut failed = Vec::new();
    for seed in seeds {
        match run(seed) {
            Ok(summary) => eprintln!("{summary}"),
            Err(e) => {
                eprintln!("FAILED {e}");
                failed.push(seed);
            }
        }
    }
    assert!(
        failed.is_empty(),
        "netsim failed for seeds {failed:?}; reproduce with LOCKGRID_NETSIM_SEED=<seed>"
    );
}
