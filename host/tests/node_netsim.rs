//! The real node over a lossy, duplicating, reordering network, with many
//! clients joining and leaving: custom rules place each client at the home
//! its token names and refuse other tokens. After the network quiets and
//! motion settles, every client's view equals the kernel's view of its
//! observer, state for state; every client received exactly its observer's
//! events, tick by tick; every input reached the rules exactly once and in
//! order; refused, departed and vanished clients ended as they should.
//!
//! Under a bandwidth budget the same run checks what a budget promises:
//! every tick's rejections, Leaves and Enters arrive exactly as the
//! kernel emitted them (so every view *set* is the kernel's after every
//! tick); every Update carries a state the kernel reported for that
//! subject; and once motion settles, states converge exactly.
//!
//! (The protocol crate's own network simulation, which drove a host of its
//! own, grew into this test of the real node.)
//!
//! Reproduce one seed with `LOCKGRID_SIM_SEED=<n> cargo test -p lockgrid-host --test node_netsim`;
//! run more with `LOCKGRID_SIM_SEEDS=<count>`.

mod node_sim;

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use lockgrid_host::node::{ClientHello, ClientInput, MemStorage, Node, NodeConfig, Refusal, Rules};
use lockgrid_kernel::{Command, Config, EntityId, Event, Fix, Move, Pos, Spawn, Visibility, World};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientState, DisconnectReason, Instant, ServerConfig,
};
use node_sim::{Faults, Net, Rng, SERVER};

const TICK_US: u64 = 50_000;
const NPCS: u64 = 150;
const LOAD_TICKS: u64 = 300;

/// What a client slot does over its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    Stay,
    /// Says Bye at this tick.
    Leave(u64),
    /// Stops running (no Bye) at this tick; the node must time it out.
    Vanish(u64),
    /// Sends a token the rules refuse.
    BadToken,
}

struct Slot {
    addr: u32,
    client: Client<u32>,
    plan: Plan,
    pos: (i64, i64),
    sent: Vec<(u64, Vec<Command>)>,
    applied: Vec<(u64, u64, Vec<Event>)>,
    gone: bool,
    disconnected: Option<DisconnectReason>,
}

/// What the rules saw, shared with the test.
#[derive(Default)]
struct Seen {
    /// Every input per entity, in the order the rules got it.
    inputs: BTreeMap<EntityId, Vec<Command>>,
    left: BTreeMap<EntityId, DisconnectReason>,
    /// Ticks with server commands still coming.
    last_motion: u64,
}

/// Rules of this test: a token `home` + x + y places the client there;
/// NPCs walk at random until the load ends.
struct HomeRules {
    rng: Rng,
    config: Config,
    seen: Rc<RefCell<Seen>>,
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

fn in_world(config: &Config, x: i64, y: i64) -> (i64, i64) {
    let lo_x = config.origin.x.to_bits();
    let lo_y = config.origin.y.to_bits();
    let w = config.cell_size.to_bits() * i64::from(config.width_cells);
    let h = config.cell_size.to_bits() * i64::from(config.height_cells);
    (x.clamp(lo_x, lo_x + w - 1), y.clamp(lo_y, lo_y + h - 1))
}

fn pos((x, y): (i64, i64)) -> Pos {
    Pos::new(Fix::from_bits(x), Fix::from_bits(y))
}

impl Rules for HomeRules {
    fn start(&mut self, _world: &World, out: &mut Vec<Command>) {
        for id in 1..=NPCS {
            let p = in_world(
                &self.config,
                self.rng.range_i64(-800 << 16, 800 << 16),
                self.rng.range_i64(-800 << 16, 800 << 16),
            );
            out.push(Command::Spawn(Spawn::npc(id, pos(p))));
        }
    }

    fn admit(&mut self, _world: &World, hello: &ClientHello<'_>) -> Result<(), Refusal> {
        parse_token(hello.token).map(|_| ()).ok_or(Refusal::Token)
    }

    fn spawn(&mut self, _world: &World, entity: EntityId, hello: &ClientHello<'_>) -> Spawn {
        // admit() accepted this token, so it parses.
        let home = parse_token(hello.token).unwrap_or_default();
        Spawn::observer(entity, pos(home), Fix::from_num(150))
    }

    fn check_input(
        &mut self,
        _world: &World,
        input: &ClientInput<'_>,
        out: &mut Vec<Command>,
    ) -> Result<(), Refusal> {
        let entity = input.entity;
        let command = input.command;
        assert_eq!(
            command.entity(),
            entity,
            "a foreign command reached the rules"
        );
        self.seen
            .borrow_mut()
            .inputs
            .entry(entity)
            .or_default()
            .push(*command);
        out.push(*command);
        Ok(())
    }

    fn server_commands(&mut self, world: &World, tick: u64, out: &mut Vec<Command>) {
        if tick > LOAD_TICKS {
            return;
        }
        self.seen.borrow_mut().last_motion = tick;
        for e in world.entities().filter(|e| e.id <= NPCS) {
            if self.rng.chance(500_000) {
                let p = in_world(
                    &self.config,
                    e.pos.x.to_bits() + self.rng.range_i64(-3 << 16, 3 << 16),
                    e.pos.y.to_bits() + self.rng.range_i64(-3 << 16, 3 << 16),
                );
                out.push(Command::Move(Move {
                    id: e.id,
                    pos: pos(p),
                    dir: self.rng.next_u64() as u16,
                    speed: Fix::from_bits(self.rng.range_i64(0, 4 << 16)),
                }));
            }
        }
    }

    fn left(
        &mut self,
        _world: &World,
        entity: EntityId,
        reason: DisconnectReason,
        out: &mut Vec<Command>,
    ) {
        self.seen.borrow_mut().left.insert(entity, reason);
        out.push(Command::Despawn { id: entity });
    }
}

fn params(seed: u64) -> (Config, usize, Faults) {
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
    let mtu = [256, 300, 576, 1200][(seed % 4) as usize];
    let faults = Faults {
        loss: rng.below(200_001),
        dup: rng.below(100_001),
        jitter: rng.below(60_001),
        ..Faults::default()
    };
    (config, mtu, faults)
}

fn run(seed: u64, budget: Option<u32>) -> Result<String, String> {
    let (config, mtu, faults) = params(seed);
    let mut rng = Rng::new(seed);
    let mut net = Net::new(seed.wrapping_mul(31), mtu);
    net.faults = faults;
    let seen = Rc::new(RefCell::new(Seen::default()));
    let rules = HomeRules {
        rng: Rng::new(seed ^ 0xA11CE),
        config,
        seen: Rc::clone(&seen),
    };
    let node_config = NodeConfig {
        server: ServerConfig {
            mtu,
            idle_timeout: Duration::from_secs(2),
            handshake_timeout: Duration::from_secs(2),
            conn_id_seed: seed,
            tick_interval: Duration::from_micros(TICK_US),
            budget_bytes_per_sec: budget,
            ..ServerConfig::default()
        },
        snapshot_every: 50,
        ..NodeConfig::default()
    };
    let client_config = ClientConfig {
        mtu,
        idle_timeout: Duration::from_secs(3),
        ..ClientConfig::default()
    };
    let mut now = Instant::from_micros(1_000_000);
    let (mut node, _) = Node::open(now, node_config, &config, rules, MemStorage::new(2))
        .map_err(|e| e.to_string())?;
    let mut slots: Vec<Slot> = Vec::new();
    let mut history: BTreeMap<u64, (u64, Vec<Event>)> = BTreeMap::new();
    // Per client address: (µs, bytes) of every datagram the node sent it.
    let mut sends: BTreeMap<u32, Vec<(u64, usize)>> = BTreeMap::new();
    let mut buf = vec![0u8; mtu];
    let mut next_step = now;
    let deadline = now + Duration::from_micros(TICK_US * (LOAD_TICKS + 400));

    loop {
        while let Some((from, to, bytes)) = net.pop_due(now) {
            if to == SERVER {
                node.handle_datagram(now, from, &bytes);
            } else if let Some(s) = slots.iter_mut().find(|s| s.addr == to && !s.gone) {
                s.client.handle_datagram(now, from, &bytes);
            }
        }
        if now >= node.poll_timeout() {
            if let Some(report) = node.handle_timeout(now).map_err(|e| e.to_string())? {
                history.insert(report.tick, (report.digest, node.events().to_vec()));
                if report.tick == LOAD_TICKS {
                    net.faults = Faults::default();
                }
                while let Some(t) = node
                    .poll_transmit(now, &mut buf)
                    .map_err(|e| e.to_string())?
                {
                    sends
                        .entry(t.destination)
                        .or_default()
                        .push((now.as_micros(), t.len));
                    net.send(now, SERVER, t.destination, &buf[..t.len]);
                }
            }
        }
        for s in slots.iter_mut().filter(|s| !s.gone) {
            if s.client.poll_timeout().is_some_and(|t| t <= now) {
                s.client.handle_timeout(now);
            }
            while let Some(ev) = s.client.poll_event() {
                match ev {
                    ClientEvent::Connected(_) => {}
                    ClientEvent::Tick {
                        tick,
                        digest,
                        events,
                    } => s.applied.push((tick, digest, events)),
                    ClientEvent::Refused(_) => {}
                    ClientEvent::Disconnected { reason } => s.disconnected = Some(reason),
                }
            }
        }
        let tick = node.world().tick();
        let loading = tick < LOAD_TICKS;
        if now >= next_step {
            next_step = next_step + Duration::from_micros(TICK_US);
            if loading && slots.len() < 60 && rng.chance(150_000) {
                let late = tick + 40 > LOAD_TICKS;
                let plan = match rng.below(10) {
                    6..=8 if late => Plan::Stay,
                    0..=5 => Plan::Stay,
                    6 | 7 => Plan::Leave((tick + 20 + rng.below(150)).min(LOAD_TICKS - 10)),
                    8 => Plan::Vanish((tick + 20 + rng.below(150)).min(LOAD_TICKS - 10)),
                    _ => Plan::BadToken,
                };
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
                let client = Client::new(client_config, SERVER, &t, rng.next_u64(), now)
                    .map_err(|e| e.to_string())?;
                slots.push(Slot {
                    addr: slots.len() as u32 + 1,
                    client,
                    plan,
                    pos: home,
                    sent: Vec::new(),
                    applied: Vec::new(),
                    gone: false,
                    disconnected: None,
                });
            }
            for s in slots.iter_mut().filter(|s| !s.gone) {
                match s.plan {
                    Plan::Leave(t) if t <= tick => s.client.close(now),
                    Plan::Vanish(t) if t <= tick => {
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
                        pos: pos(s.pos),
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
        }
        // Quiet once motion has settled, vanished clients timed out, and
        // every client caught up with the last tick.
        let last_motion = seen.borrow().last_motion.max(
            history
                .iter()
                .rev()
                .find(|(_, (_, ev))| {
                    ev.iter().any(|e| {
                        matches!(
                            e,
                            Event::Update { .. } | Event::Enter { .. } | Event::Leave { .. }
                        )
                    })
                })
                .map_or(0, |(t, _)| *t),
        );
        if tick >= LOAD_TICKS + 60 && tick >= last_motion + 4 {
            let settled = slots
                .iter()
                .filter(|s| !s.gone && s.client.state() == ClientState::Connected)
                .all(|s| s.client.applied_tick() == tick && s.client.unacked_inputs() == 0)
                && node.server().connections().all(|c| {
                    node.server().unacked_ticks(c) == Some(0)
                        && node
                            .server()
                            .budget_stats(c)
                            .is_none_or(|b| b.stale_now == 0)
                });
            if settled {
                break;
            }
        }
        if now >= deadline {
            return Err(format!(
                "seed {seed}: no quiet by tick {tick} (last motion {last_motion})"
            ));
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
        let mut next = next_step.min(node.poll_timeout());
        if let Some(t) = net.next_delivery() {
            next = next.min(t);
        }
        for s in slots.iter().filter(|s| !s.gone) {
            if let Some(t) = s.client.poll_timeout() {
                next = next.min(t);
            }
        }
        now = next.max(now + Duration::from_micros(100));
    }

    let world = node.world();
    let seen = seen.borrow();
    let mut converged = 0;
    for s in &slots {
        let ctx = format!("seed {seed} client {} ({:?})", s.addr, s.plan);
        if s.plan == Plan::BadToken {
            if s.disconnected != Some(DisconnectReason::TokenRejected) {
                return Err(format!(
                    "{ctx}: expected a token rejection, got {:?}",
                    s.disconnected
                ));
            }
            continue;
        }
        let Some(entity) = s.client.entity() else {
            if let Plan::Vanish(_) = s.plan {
                continue;
            }
            return Err(format!("{ctx}: never connected"));
        };
        if let Plan::Vanish(_) = s.plan {
            match seen.left.get(&entity) {
                Some(DisconnectReason::IdleTimeout) => continue,
                other => return Err(format!("{ctx}: the node should time it out, got {other:?}")),
            }
        }
        // Inputs: exactly once, in order; all of them for those still connected.
        let got = seen.inputs.get(&entity).cloned().unwrap_or_default();
        let sent: Vec<Command> = s.sent.iter().flat_map(|(_, c)| c.iter().copied()).collect();
        if got.len() > sent.len() || got[..] != sent[..got.len()] {
            return Err(format!(
                "{ctx}: inputs reaching the rules are not a prefix of those sent"
            ));
        }
        // Every applied tick carries exactly the kernel's events for this client.
        let mut prev = None;
        for (tick, digest, events) in &s.applied {
            if prev.is_some_and(|p| p + 1 != *tick) {
                return Err(format!("{ctx}: ticks not consecutive at {tick}"));
            }
            prev = Some(*tick);
            let (d, all) = &history[tick];
            let mine: Vec<Event> = all
                .iter()
                .filter(|e| match e {
                    Event::Rejected { entity: x, .. } => *x == entity,
                    _ => e.order_key().is_some_and(|k| k.0 == entity),
                })
                .copied()
                .collect();
            if budget.is_some() {
                // Everything but Updates exactly; each Update a state the
                // kernel reported for its subject at this tick or before.
                let no_updates = |v: &[Event]| -> Vec<Event> {
                    v.iter()
                        .filter(|e| !matches!(e, Event::Update { .. }))
                        .copied()
                        .collect()
                };
                if d != digest || no_updates(&mine) != no_updates(events) {
                    return Err(format!(
                        "{ctx}: tick {tick} membership events or digest differ from the kernel's"
                    ));
                }
                for e in events {
                    if let Event::Update {
                        subject,
                        pos,
                        dir,
                        speed,
                        ..
                    } = *e
                    {
                        let reported = history.range(..=*tick).any(|(_, (_, all))| {
                            all.iter().any(|k| match *k {
                                Event::Update {
                                    subject: s,
                                    pos: p,
                                    dir: r,
                                    speed: v,
                                    ..
                                }
                                | Event::Enter {
                                    subject: s,
                                    pos: p,
                                    dir: r,
                                    speed: v,
                                    ..
                                } => (s, p, r, v) == (subject, pos, dir, speed),
                                _ => false,
                            })
                        });
                        if !reported {
                            return Err(format!(
                                "{ctx}: tick {tick}: an Update of {subject} the kernel never reported"
                            ));
                        }
                    }
                }
            } else if d != digest || &mine != events {
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
        if got != sent {
            return Err(format!(
                "{ctx}: {} of {} inputs delivered",
                got.len(),
                sent.len()
            ));
        }
        let kernel: Vec<EntityId> = world.view(entity).map(|v| v.collect()).unwrap_or_default();
        let mine: Vec<EntityId> = s.client.view().ids().collect();
        if kernel != mine {
            return Err(format!(
                "{ctx}: view ids differ: kernel {kernel:?} client {mine:?}"
            ));
        }
        for (id, v) in s.client.view().iter() {
            let k = world.entity(id).ok_or(format!("{ctx}: {id} not alive"))?;
            if (k.pos, k.dir, k.speed, k.layers) != (v.pos, v.dir, v.speed, v.layers) {
                return Err(format!(
                    "{ctx}: state of {id} differs: kernel {k:?} client {v:?}"
                ));
            }
        }
        converged += 1;
    }
    // A budget that never held an Update back tested nothing.
    let worst_second = sends.values().map(|s| worst_window(s)).max().unwrap_or(0);
    let overruns = node.stats().budget.map_or(0, |b| b.overrun_ticks);
    let summary = node.stats().budget;
    if summary.map(|b| b.bytes_per_sec) != budget {
        return Err(format!(
            "seed {seed}: the node's stats show budget {summary:?}"
        ));
    }
    let deferred = summary.map_or(0, |b| b.updates_deferred);
    if budget.is_some() && deferred == 0 {
        return Err(format!("seed {seed}: the budget never deferred an Update"));
    }
    if summary.is_some_and(|b| b.stale_subjects != 0 || b.max_staleness != 0) {
        return Err(format!("seed {seed}: stale at the end: {summary:?}"));
    }
    // The journal the node kept replays to every digest the clients saw.
    let mut replay = World::new(config).map_err(|e| e.to_string())?;
    let mut events = Vec::new();
    for record in node.storage().journal() {
        events.clear();
        let r = replay.step(&record.commands, &mut events);
        if r.digest != record.digest || history.get(&r.tick).map(|h| h.0) != Some(r.digest) {
            return Err(format!("seed {seed}: tick {} does not replay", r.tick));
        }
    }
    Ok(format!(
        "seed {seed}: mtu {mtu} loss {}ppm dup {}ppm jitter {}us, {} ticks, {} clients ({converged} converged), {} datagrams delivered, {} lost, {deferred} updates deferred, at most {worst_second} bytes to a client in a second ({overruns} overrun ticks)",
        faults.loss,
        faults.dup,
        faults.jitter,
        world.tick(),
        slots.len(),
        net.delivered,
        net.dropped
    ))
}

/// Most bytes in any one-second window over `(time µs, bytes)` sends.
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

#[test]
fn clients_of_the_real_node_converge_to_the_kernel_view_under_faults() {
    let mut failed = Vec::new();
    for seed in node_sim::seeds(8) {
        match run(seed, None) {
            Ok(summary) => eprintln!("{summary}"),
            Err(e) => {
                eprintln!("FAILED {e}");
                failed.push(seed);
            }
        }
    }
    assert!(
        failed.is_empty(),
        "node netsim failed for seeds {failed:?}; reproduce with LOCKGRID_SIM_SEED=<seed> cargo test -p lockgrid-host --test node_netsim"
    );
}

#[test]
fn under_a_budget_views_stay_exact_and_states_converge() {
    let mut failed = Vec::new();
    for seed in node_sim::seeds(4) {
        match run(seed, Some(2 * 1024)) {
            Ok(summary) => eprintln!("budget 2 KiB/s, {summary}"),
            Err(e) => {
                eprintln!("FAILED (budget 2 KiB/s) {e}");
                failed.push(seed);
            }
        }
    }
    assert!(
        failed.is_empty(),
        "budgeted node netsim failed for seeds {failed:?}; reproduce with LOCKGRID_SIM_SEED=<seed> cargo test -p lockgrid-host --test node_netsim"
    );
}
