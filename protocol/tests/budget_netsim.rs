//! Clients under a bandwidth budget, on a lossy, duplicating, jittery
//! network, among walking NPCs: after every tick a client applies, its
//! view holds exactly the kernel's subjects; every state it holds is one
//! the subject really had, no further from the subject's position than the
//! subject can walk in the ticks since; the bytes it is sent in any
//! second stay within the budget and one packet; and once the NPCs stop,
//! every client's copy of every subject converges to the kernel's exactly.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::crowd::{config, Layout, Walkers, NPC_STEP_RAW};
use common::{Net, Rng};
use lockgrid_kernel::{Command, Dir, EntityId, Event, Fix, Pos, Spawn, World};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientLimits, ClientState, Instant, Server, ServerConfig,
    ServerEvent, WorldParams, DEFAULT_MTU,
};

const SERVER: u32 = 0;
const TICK_US: u64 = 50_000;

/// A subject's movable state.
type State = (Pos, Dir, Fix);

struct Spec {
    seed: u64,
    layout: Layout,
    budget: u32,
    npcs: usize,
    clients: u64,
    /// Ticks the NPCs walk; then they stop.
    motion: u64,
    loss: u64,
    dup: u64,
    jitter: u64,
}

struct Outcome {
    /// Most bytes one client was sent in any one-second window.
    worst_second: u64,
    /// Ticks after the NPCs stopped until every client's copy was exact.
    converged_after: u64,
    /// Largest staleness a client's copy showed, in ticks.
    worst_staleness: u64,
    overrun_ticks: u64,
    updates_sent: u64,
    /// Updates dropped from lost parts before they went again.
    superseded: u64,
    resets_sent: u64,
    datagrams_lost: u64,
}

/// What one client applied, rebuilt from its Tick events.
struct Model {
    addr: u32,
    entity: EntityId,
    view: BTreeMap<EntityId, (State, u32)>,
    applied: u64,
}

fn state_of(world: &World, id: EntityId) -> Option<State> {
    world.entity(id).map(|e| (e.pos, e.dir, e.speed))
}

fn run(spec: &Spec) -> Result<Outcome, String> {
    let cfg = config();
    let mut world = World::new(cfg).map_err(|e| e.to_string())?;
    let server_config = ServerConfig {
        budget_bytes_per_sec: Some(spec.budget),
        conn_id_seed: spec.seed,
        ..ServerConfig::default()
    };
    let mut server: Server<u32> =
        Server::new(server_config, WorldParams::from(&cfg)).map_err(|e| e.to_string())?;
    let mut walkers = Walkers::new(spec.layout, spec.npcs, spec.seed);
    let mut net = Net::new(spec.seed ^ 0x5eed, DEFAULT_MTU);
    net.latency = 20_000;
    let mut now = Instant::from_micros(1_000);
    let mut clients: Vec<Client<u32>> = (0..spec.clients)
        .map(|i| {
            Client::new(
                ClientConfig::default(),
                SERVER,
                format!("c{i}").as_bytes(),
                i,
                now,
            )
        })
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut models: Vec<Model> = Vec::new();
    let mut commands = walkers.spawns();
    let mut events = Vec::new();
    // Per tick: every NPC's state (index id − 1) and each observer's kernel view.
    let mut npc_states: Vec<Vec<State>> = vec![Vec::new()];
    let mut kernel_views: Vec<BTreeMap<EntityId, Vec<EntityId>>> = vec![BTreeMap::new()];
    let mut sends: BTreeMap<u32, Vec<(u64, usize)>> = BTreeMap::new();
    let mut buf = vec![0u8; DEFAULT_MTU];
    let mut next_tick = now;
    let mut worst_staleness = 0u64;
    let mut converged_at = None;
    let limit = spec.motion + 600;

    while converged_at.is_none() {
        let tick = world.tick();
        if tick > limit {
            return Err(format!(
                "no convergence {} ticks after motion stopped",
                limit - spec.motion
            ));
        }
        while let Some((from, to, bytes)) = net.pop_due(now) {
            if to == SERVER {
                server.handle_datagram(now, from, &bytes);
            } else {
                clients[to as usize - 1].handle_datagram(now, SERVER, &bytes);
            }
        }
        if server.poll_timeout().is_some_and(|t| t <= now) {
            server.handle_timeout(now);
        }
        while let Some(e) = server.poll_event() {
            match e {
                ServerEvent::Connecting { conn, from, .. } => {
                    let entity = 10_000 + u64::from(from);
                    let at = walkers.observer_spot(u64::from(from) - 1, spec.clients);
                    let spawn = Spawn::observer(entity, at, Fix::from_num(300));
                    server
                        .accept(conn, &spawn, ClientLimits::NONE)
                        .map_err(|e| e.to_string())?;
                    commands.push(Command::Spawn(spawn));
                    models.push(Model {
                        addr: from,
                        entity,
                        view: BTreeMap::new(),
                        applied: 0,
                    });
                }
                ServerEvent::Disconnected { reason, .. } => {
                    return Err(format!("a client was disconnected: {reason:?}"));
                }
                ServerEvent::Input { .. } => {}
            }
        }
        if now >= next_tick {
            next_tick = next_tick + Duration::from_micros(TICK_US);
            if tick < spec.motion {
                walkers.step(&mut commands);
            }
            events.clear();
            let report = world.step(&commands, &mut events);
            commands.clear();
            npc_states.push(
                (1..=spec.npcs as u64)
                    .map(|id| state_of(&world, id).expect("NPCs never despawn"))
                    .collect(),
            );
            kernel_views.push(
                models
                    .iter()
                    .map(|m| {
                        (
                            m.entity,
                            world
                                .view(m.entity)
                                .map(|v| v.collect())
                                .unwrap_or_default(),
                        )
                    })
                    .collect(),
            );
            let w = &world;
            server
                .push_tick_located(now, report.tick, report.digest, &events, |id| {
                    w.entity(id).map(|e| e.pos)
                })
                .map_err(|e| e.to_string())?;
            if report.tick == spec.motion {
                net.loss = 0;
            } else if report.tick < spec.motion {
                net.loss = spec.loss;
            }
            net.dup = spec.dup;
            net.jitter = spec.jitter;
        }
        while let Some(t) = server
            .poll_transmit(now, &mut buf)
            .map_err(|e| e.to_string())?
        {
            sends
                .entry(t.destination)
                .or_default()
                .push((now.as_micros(), t.len));
            net.send(now, SERVER, t.destination, &buf[..t.len]);
        }
        for (i, c) in clients.iter_mut().enumerate() {
            let addr = i as u32 + 1;
            if c.poll_timeout().is_some_and(|t| t <= now) {
                c.handle_timeout(now);
            }
            while let Some(ev) = c.poll_event() {
                let ClientEvent::Tick { tick, events, .. } = ev else {
                    if let ClientEvent::Disconnected { reason } = ev {
                        return Err(format!("client {addr} disconnected: {reason:?}"));
                    }
                    continue;
                };
                let Some(m) = models.iter_mut().find(|m| m.addr == addr) else {
                    continue;
                };
                apply(m, tick, &events)?;
                // The set: exactly the kernel's, after every tick.
                let kernel = kernel_views[tick as usize]
                    .get(&m.entity)
                    .cloned()
                    .unwrap_or_default();
                if !m.view.keys().copied().eq(kernel.iter().copied()) {
                    return Err(format!("client {addr} tick {tick}: view set differs"));
                }
                for (&id, &(s, _)) in &m.view {
                    let st = staleness(&npc_states, &world, id, tick, s)
                        .ok_or(format!("client {addr} tick {tick}: {id} never had {s:?}"))?;
                    worst_staleness = worst_staleness.max(st);
                    let now_pos = state_at(&npc_states, &world, id, tick).map(|x| x.0);
                    let Some(p) = now_pos else { continue };
                    let (dx, dy) = (
                        i128::from(p.x.to_bits() - s.0.x.to_bits()),
                        i128::from(p.y.to_bits() - s.0.y.to_bits()),
                    );
                    let reach = i128::from(NPC_STEP_RAW) * i128::from(st);
                    if dx * dx + dy * dy > reach * reach {
                        return Err(format!(
                            "client {addr} tick {tick}: {id} is further than {st} ticks of walking"
                        ));
                    }
                }
            }
            while let Some(t) = c.poll_transmit(now, &mut buf).map_err(|e| e.to_string())? {
                net.send(now, addr, t.destination, &buf[..t.len]);
            }
        }
        if tick > spec.motion && models.len() as u64 == spec.clients {
            let exact = models.iter().all(|m| {
                m.applied == tick
                    && m.view
                        .iter()
                        .all(|(&id, (s, _))| state_of(&world, id) == Some(*s))
            });
            if exact {
                converged_at = Some(tick);
            }
        }
        let mut next = next_tick;
        if let Some(t) = net.next_delivery() {
            next = next.min(t);
        }
        for t in clients.iter().filter_map(|c| c.poll_timeout()) {
            next = next.min(t);
        }
        if let Some(t) = server.poll_timeout() {
            next = next.min(t);
        }
        now = next.max(now + Duration::from_micros(100));
    }
    for (i, c) in clients.iter().enumerate() {
        if c.state() != ClientState::Connected {
            return Err(format!("client {} ended {:?}", i + 1, c.state()));
        }
    }
    let worst_second = sends.values().map(|s| worst_window(s)).max().unwrap_or(0);
    let (mut overrun_ticks, mut updates_sent, mut superseded, mut resets_sent) = (0, 0, 0, 0);
    for conn in server.connections() {
        let s = server
            .budget_stats(conn)
            .ok_or("a budget for every connection")?;
        overrun_ticks += s.overrun_ticks;
        updates_sent += s.updates_sent;
        superseded += s.updates_superseded;
        resets_sent += s.resets_sent;
    }
    Ok(Outcome {
        worst_second,
        converged_after: converged_at.unwrap_or(0) - spec.motion,
        worst_staleness,
        overrun_ticks,
        updates_sent,
        superseded,
        resets_sent,
        datagrams_lost: net.dropped,
    })
}

/// Applies one tick's events to the model, as a client would.
fn apply(m: &mut Model, tick: u64, events: &[Event]) -> Result<(), String> {
    if tick != m.applied + 1 && m.applied != 0 {
        return Err(format!("ticks not consecutive: {} then {tick}", m.applied));
    }
    m.applied = tick;
    for e in events {
        match *e {
            Event::Leave { subject, .. } => {
                m.view
                    .remove(&subject)
                    .ok_or("a Leave of an unseen subject")?;
            }
            Event::Enter {
                subject,
                pos,
                dir,
                speed,
                layers,
                ..
            } => {
                if m.view
                    .insert(subject, ((pos, dir, speed), layers))
                    .is_some()
                {
                    return Err("an Enter of a visible subject".into());
                }
            }
            Event::Update {
                subject,
                pos,
                dir,
                speed,
                ..
            } => {
                let v = m
                    .view
                    .get_mut(&subject)
                    .ok_or("an Update of an unseen subject")?;
                if v.0 == (pos, dir, speed) {
                    return Err(format!(
                        "tick {tick}: an Update of {subject} that changes nothing"
                    ));
                }
                v.0 = (pos, dir, speed);
            }
            Event::Rejected { .. } => {}
        }
    }
    Ok(())
}

/// The kernel's state of `id` after `tick` (NPCs from the history, the
/// motionless observers from the world).
fn state_at(npcs: &[Vec<State>], world: &World, id: EntityId, tick: u64) -> Option<State> {
    match npcs.get(tick as usize)?.get((id as usize).wrapping_sub(1)) {
        Some(s) => Some(*s),
        None => state_of(world, id),
    }
}

/// Ticks since the kernel's state of `id` was `s`, looking back from `tick`.
fn staleness(npcs: &[Vec<State>], world: &World, id: EntityId, tick: u64, s: State) -> Option<u64> {
    (1..=tick)
        .rev()
        .find(|&t| state_at(npcs, world, id, t) == Some(s))
        .map(|t| tick - t)
}

/// Most bytes in any window of one second over `(time µs, bytes)` sends.
fn worst_window(sends: &[(u64, usize)]) -> u64 {
    let (mut lo, mut sum, mut worst) = (0, 0u64, 0u64);
    for &(t, len) in sends {
        sum += len as u64;
        while sends[lo].0 + 1_000_000 <= t {
            sum -= sends[lo].1 as u64;
            lo += 1;
        }
        worst = worst.max(sum);
    }
    worst
}

fn spec(seed: u64, layout: Layout, budget: u32) -> Spec {
    let mut rng = Rng::new(seed);
    Spec {
        seed,
        layout,
        budget,
        npcs: if layout == Layout::Hotspot { 150 } else { 1500 },
        clients: 4,
        motion: 120,
        loss: 20_000 + rng.below(80_000),
        dup: rng.below(50_000),
        jitter: rng.below(30_000),
    }
}

fn check(spec: &Spec) -> Outcome {
    let o = run(spec).unwrap_or_else(|e| {
        panic!(
            "seed {} {} at {} B/s: {e}",
            spec.seed,
            spec.layout.name(),
            spec.budget
        )
    });
    eprintln!(
        "seed {} {} {} B/s, loss {}ppm dup {}ppm: worst second {} B, staleness ≤ {} ticks, converged {} ticks after motion, {} overrun ticks, {} updates ({} resets, {} superseded), {} datagrams lost",
        spec.seed,
        spec.layout.name(),
        spec.budget,
        spec.loss,
        spec.dup,
        o.worst_second,
        o.worst_staleness,
        o.converged_after,
        o.overrun_ticks,
        o.updates_sent,
        o.resets_sent,
        o.superseded,
        o.datagrams_lost
    );
    o
}

#[test]
fn a_tight_budget_in_a_crowd_keeps_views_exact_and_bytes_bounded() {
    for seed in 1..=3 {
        let s = spec(seed, Layout::Hotspot, 8 * 1024);
        let o = check(&s);
        assert!(o.datagrams_lost > 0, "the network lost nothing");
        // Lost parts went again without their superseded Updates, and
        // those subjects were sent resets.
        assert!(o.superseded > 0 && o.resets_sent > 0);
        assert!(
            o.worst_second <= u64::from(s.budget) + DEFAULT_MTU as u64,
            "seed {seed}: {} bytes in one second",
            o.worst_second
        );
        assert!(
            o.worst_staleness > 1,
            "the budget should have made copies stale"
        );
        // 150 subjects' final states take about 1 KiB: a few ticks at 8 KiB/s.
        assert!(
            o.converged_after <= 40,
            "{} ticks to converge",
            o.converged_after
        );
    }
}

#[test]
fn a_tight_budget_on_the_uniform_walk() {
    for seed in 4..=5 {
        let s = spec(seed, Layout::Uniform, 4 * 1024);
        let o = check(&s);
        assert!(o.worst_second <= u64::from(s.budget) + DEFAULT_MTU as u64);
        assert!(
            o.worst_staleness > 1,
            "the budget should have made copies stale"
        );
    }
}

#[test]
fn a_generous_budget_keeps_every_copy_current() {
    // 128 KiB/s is more than a crowd of 150 needs: no copy is ever stale
    // beyond the tick in flight.
    let s = spec(6, Layout::Hotspot, 128 * 1024);
    let o = check(&s);
    assert!(o.worst_staleness <= 1, "{} ticks stale", o.worst_staleness);
}

#[test]
fn enters_beyond_the_budget_still_go_and_count_as_overruns() {
    // 2 KiB/s cannot carry a crowd's initial Enters in a tick: they go anyway.
    let s = Spec {
        motion: 40,
        ..spec(9, Layout::Hotspot, 2 * 1024)
    };
    let o = check(&s);
    assert!(o.overrun_ticks > 0);
}

#[test]
fn a_budget_too_small_for_one_update_a_tick_is_refused() {
    let at = |b| ServerConfig {
        budget_bytes_per_sec: Some(b),
        ..ServerConfig::default()
    };
    // 20 Hz: MIN_BUDGET_PER_TICK bytes a tick is 20 times that a second.
    let min = 20 * lockgrid_protocol::budget::MIN_BUDGET_PER_TICK as u32;
    assert!(at(min).validate().is_ok());
    assert!(at(min - 20).validate().is_err());
    assert!(at(0).validate().is_err());
}
