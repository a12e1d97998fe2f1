//! One seeded run of the whole server: plan, drive, check.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;
use std::time::Duration;

use lockgrid_host::node::{
    DiskFault, DiskOp, MemStorage, Node, NodeConfig, Refusal, Storage, MAX_TRACKED_ADDRS,
};
use lockgrid_host::serve::DefaultRules;
use lockgrid_kernel::{Command, Config, EntityId, Event, Fix, Move, Pos, Visibility, World};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientState, Instant, RefusedInput, Seen, ServerConfig,
};

use super::recorded::Log;
use super::{Faults, Net, Recorded, Rng, SERVER};

const TICK_US: u64 = 50_000;
const TICK_RATE: u32 = 20;

/// What one seed draws: the world, the load, and the fault mix.
#[derive(Clone, Debug)]
pub struct Plan {
    pub seed: u64,
    pub config: Config,
    pub mtu: usize,
    pub net: Faults,
    pub npcs: u32,
    pub max_clients: u32,
    /// Ticks of load (with faults) before the quiet phase.
    pub load_ticks: u64,
    pub snapshot_every: u64,
    /// Per million node ticks: a crash (power cut at a drawn point).
    pub crash_rate: u64,
    /// Per million node ticks: an injected disk error or full disk.
    pub disk_error_rate: u64,
    /// Per million client steps: a partition of a client or of the node.
    pub partition_rate: u64,
    /// Flooding and input-spamming clients join too.
    pub abusers: bool,
    /// Per million steps: a client leaves, vanishes or reconnects.
    pub churn_rate: u64,
}

impl Plan {
    /// The plan of `seed`: every fault is drawn, and some seeds draw none
    /// of a kind, so each fault is also tested alone and mixed.
    pub fn draw(seed: u64) -> Plan {
        let mut rng = Rng::new(seed ^ 0x005e_ed0f_5eed);
        let mut config = Config {
            origin: Pos::from_ints(-400, -400),
            cell_size: Fix::from_num(100),
            width_cells: 8,
            height_cells: 8,
            max_entities: 96,
            max_observers: 32,
            max_view: 48,
            ..Config::default()
        };
        if rng.chance(330_000) {
            config.visibility = Visibility::Radius;
            config.hysteresis = Fix::from_num(20);
        }
        if rng.chance(200_000) {
            config.max_view = 6;
        }
        let pick = |rng: &mut Rng, p: u64, v: u64| if rng.chance(p) { rng.below(v + 1) } else { 0 };
        Plan {
            seed,
            config,
            mtu: [300, 576, 1200][rng.below(3) as usize],
            net: Faults {
                loss: pick(&mut rng, 700_000, 150_000),
                dup: pick(&mut rng, 500_000, 80_000),
                jitter: pick(&mut rng, 700_000, 40_000),
                spike: pick(&mut rng, 400_000, 20_000),
                spike_us: 1_500_000,
            },
            npcs: rng.below(25) as u32,
            max_clients: 3 + rng.below(8) as u32,
            load_ticks: 120 + rng.below(120),
            snapshot_every: [0, 5, 10, 25][rng.below(4) as usize],
            crash_rate: pick(&mut rng, 600_000, 25_000),
            disk_error_rate: pick(&mut rng, 500_000, 25_000),
            partition_rate: pick(&mut rng, 500_000, 15_000),
            abusers: rng.chance(400_000),
            churn_rate: pick(&mut rng, 700_000, 30_000),
        }
    }
}

/// What a run did, for the report line.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    pub ticks: u64,
    pub crashes: BTreeMap<&'static str, u64>,
    pub disk_errors: BTreeMap<&'static str, u64>,
    pub snapshot_failures: u64,
    pub partitions: u64,
    pub joins: u64,
    pub leaves: u64,
    pub vanishes: u64,
    pub reconnects: u64,
    pub acked_checked: u64,
    pub views_checked: u64,
    pub refused: u64,
    pub refusals_heard: u64,
    pub datagrams: u64,
    pub lost: u64,
}

impl Outcome {
    /// The faults this seed drew, in one line.
    pub fn mix(&self, plan: &Plan) -> String {
        let mut s = format!(
            "loss {}ppm dup {}ppm jitter {}us spikes {}ppm",
            plan.net.loss, plan.net.dup, plan.net.jitter, plan.net.spike
        );
        for (k, n) in &self.crashes {
            let _ = write!(s, ", crash {k} x{n}");
        }
        for (k, n) in &self.disk_errors {
            let _ = write!(s, ", disk {k} x{n}");
        }
        let _ = write!(
            s,
            ", {} partitions, {} joins, {} leaves, {} vanishes, {} reconnects{}",
            self.partitions,
            self.joins,
            self.leaves,
            self.vanishes,
            self.reconnects,
            if plan.abusers { ", abusers" } else { "" }
        );
        s
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Walks within its speed budget.
    Walker,
    /// Sends many moves per input: refused by the rules, still acknowledged.
    Spammer,
    /// Walks, and blasts junk datagrams past the rate limit.
    Flooder,
}

struct SimClient {
    addr: u32,
    client: Client<u32>,
    kind: Kind,
    /// Stops running (no Bye) when set: the node must time it out.
    gone: bool,
    entity: Option<EntityId>,
    pos: (i64, i64),
    tag: u16,
    /// Inputs queued, in order (the client acknowledges a prefix).
    sent: Vec<Vec<Command>>,
    acked: usize,
}

type SimNode = Node<u32, Recorded<DefaultRules>, MemStorage>;

/// When a planned crash strikes within a tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CrashAt {
    /// Power lost while appending the record (a torn record).
    Append,
    /// Power lost between the append and the sync.
    Sync,
    /// Power lost after the sync, before anything was sent.
    BeforeSend,
    /// Power lost while writing a snapshot.
    Snapshot,
}

impl CrashAt {
    fn name(self) -> &'static str {
        match self {
            CrashAt::Append => "mid-append",
            CrashAt::Sync => "append-sync",
            CrashAt::BeforeSend => "sync-send",
            CrashAt::Snapshot => "mid-snapshot",
        }
    }
}

struct Sim {
    plan: Plan,
    rng: Rng,
    now: Instant,
    net: Net,
    node: Option<SimNode>,
    /// The disk while the node is down, and when it comes back.
    down: Option<(MemStorage, Instant)>,
    crash_after_send: bool,
    /// A power cut waits in the next snapshot write.
    snapshot_cut: bool,
    log: Rc<RefCell<Log>>,
    clients: Vec<SimClient>,
    next_addr: u32,
    /// The kernel's view of each client entity after each tick.
    history: BTreeMap<(u64, EntityId), Vec<(EntityId, Seen)>>,
    /// Each client entity's view as the kernel's events build it.
    models: BTreeMap<EntityId, BTreeMap<EntityId, Seen>>,
    out: Outcome,
    quiet: bool,
}

/// The node's configuration; `run` numbers the node's starts, since a
/// server draws fresh connection ids each time it starts (as `lockgrid
/// serve` does), so packets of a crashed run never pass for the next one's.
fn node_config(plan: &Plan, run: u64) -> NodeConfig {
    NodeConfig {
        server: ServerConfig {
            mtu: plan.mtu,
            max_connections: plan.max_clients as usize,
            idle_timeout: Duration::from_secs(2),
            handshake_timeout: Duration::from_secs(2),
            tick_interval: Duration::from_micros(TICK_US),
            conn_id_seed: plan.seed ^ run.wrapping_mul(0x9e37_79b9_7f4a_7c15),
            max_unacked_ticks: 60,
            ..ServerConfig::default()
        },
        snapshot_every: plan.snapshot_every,
        max_packets_per_sec: 400,
        ..NodeConfig::default()
    }
}

fn client_config(plan: &Plan) -> ClientConfig {
    ClientConfig {
        mtu: plan.mtu,
        idle_timeout: Duration::from_secs(3),
        ..ClientConfig::default()
    }
}

impl Sim {
    fn rules(&self) -> Recorded<DefaultRules> {
        Recorded {
            inner: DefaultRules::new(
                Fix::from_num(200),
                TICK_RATE,
                self.plan.npcs,
                self.plan.seed,
            ),
            log: Rc::clone(&self.log),
        }
    }

    fn open(&mut self, disk: MemStorage) -> Result<(), String> {
        let (node, _report) = Node::open(
            self.now,
            node_config(&self.plan, self.out.crashes.values().sum()),
            &self.plan.config,
            self.rules(),
            disk,
        )
        .map_err(|e| format!("the node does not reopen: {e}"))?;
        self.node = Some(node);
        Ok(())
    }

    /// The disk, wherever it is now.
    fn disk(&self) -> &MemStorage {
        match (&self.node, &self.down) {
            (Some(n), _) => n.storage(),
            (None, Some((d, _))) => d,
            // The node is always either up or down with its disk.
            (None, None) => unreachable!("the disk is always somewhere"),
        }
    }

    /// Power cut: the node is gone, the disk is what a reboot finds.
    fn crash(&mut self, why: &'static str) -> Result<(), String> {
        *self.out.crashes.entry(why).or_insert(0) += 1;
        self.snapshot_cut = false;
        let Some(node) = self.node.take() else {
            return Ok(());
        };
        let disk = node.into_storage().crash(self.rng.next_u64());
        let mut disk = disk;
        // The reboot's open makes what survived durable; forget decisions
        // and views of ticks that did not survive.
        let last = {
            let opened = disk.open().map_err(|e| format!("after a crash: {e}"))?;
            opened.map_or(0, |o| o.last_tick)
        };
        self.log.borrow_mut().retain(|_, d| d.tick <= last);
        self.history.retain(|&(t, _), _| t <= last);
        self.models.clear();
        // Bit rot on a snapshot now and then: recovery must pass it over.
        if self.rng.chance(200_000) {
            if let Some(&t) = disk.snapshots().unwrap_or_default().last() {
                disk.rot_snapshot(t, self.rng.below(4096) as usize);
            }
        }
        let back = self.now + Duration::from_micros(100_000 + self.rng.below(1_400_000));
        self.down = Some((disk, back));
        Ok(())
    }

    fn check_applied(&mut self, i: usize, ticks: &[(u64, u64)]) -> Result<(), String> {
        let disk = self.disk();
        let synced = disk.synced_tick();
        let journal = disk.journal();
        for &(tick, digest) in ticks {
            // Durable before sent: a tick a client applied is synced, and
            // its digest is the journal's.
            if tick > synced {
                return Err(format!(
                    "client {} applied tick {tick}, but only tick {synced} is durable",
                    self.clients[i].addr
                ));
            }
            let record = journal
                .get((tick - 1) as usize)
                .ok_or_else(|| format!("tick {tick} is not in the journal"))?;
            if record.tick != tick || record.digest != digest {
                return Err(format!(
                    "client {} applied tick {tick} with digest {digest:016x}, the journal says {:016x}",
                    self.clients[i].addr, record.digest
                ));
            }
        }
        let c = &self.clients[i];
        if let (Some(&(tick, _)), Some(entity), ClientState::Connected) =
            (ticks.last(), c.entity, c.client.state())
        {
            let Some(kernel) = self.history.get(&(tick, entity)) else {
                return Err(format!(
                    "no kernel view of entity {entity} at tick {tick} (client {})",
                    c.addr
                ));
            };
            let mine: Vec<(EntityId, Seen)> =
                c.client.view().iter().map(|(id, s)| (id, *s)).collect();
            if &mine != kernel {
                return Err(format!(
                    "client {} (entity {entity}) at tick {tick}: view {mine:?} differs from the kernel's {kernel:?}",
                    c.addr
                ));
            }
            self.out.views_checked += 1;
        }
        Ok(())
    }

    /// A refusal client `i` heard names a command it sent, which the rules
    /// refused.
    fn check_refusal(&mut self, i: usize, r: RefusedInput) -> Result<(), String> {
        self.out.refusals_heard += 1;
        let c = &self.clients[i];
        let entity = c.entity.ok_or("a refusal before the Welcome")?;
        let cmd = usize::try_from(r.seq)
            .ok()
            .and_then(|k| c.sent.get(k))
            .and_then(|cmds| cmds.get(usize::from(r.index)))
            .ok_or_else(|| {
                format!(
                    "client {} heard a refusal of a command it never sent: {r:?}",
                    c.addr
                )
            })?;
        let Command::Move(m) = cmd else {
            return Ok(());
        };
        let key = (entity, m.dir, m.pos.x.to_bits(), m.pos.y.to_bits());
        match self.log.borrow().get(&key) {
            Some(d) if d.outcome.is_err() => Ok(()),
            other => Err(format!(
                "client {} was told {r:?} of {m:?}, which the rules decided as {:?}",
                c.addr,
                other.map(|d| &d.outcome)
            )),
        }
    }

    /// Newly acknowledged inputs of client `i` must have been decided in a
    /// durable tick, and what they became must be in that tick's record.
    fn check_acked(&mut self, i: usize) -> Result<(), String> {
        let c = &mut self.clients[i];
        if !matches!(
            c.client.state(),
            ClientState::Connected | ClientState::Closing
        ) {
            return Ok(());
        }
        let acked = c.sent.len() - c.client.unacked_inputs();
        if acked <= c.acked {
            return Ok(());
        }
        let from = c.acked;
        c.acked = acked;
        let entity = c.entity.ok_or("inputs before a Welcome")?;
        let inputs: Vec<Command> = c.sent[from..acked].iter().flatten().copied().collect();
        let disk = match (&self.node, &self.down) {
            (Some(n), _) => n.storage(),
            (None, Some((d, _))) => d,
            (None, None) => unreachable!("the disk is always somewhere"),
        };
        let synced = disk.synced_tick();
        let log = self.log.borrow();
        for cmd in inputs {
            let Command::Move(m) = cmd else { continue };
            let key = (entity, m.dir, m.pos.x.to_bits(), m.pos.y.to_bits());
            let Some(d) = log.get(&key) else {
                return Err(format!(
                    "acknowledged input {m:?} of entity {entity} was never decided"
                ));
            };
            if d.tick > synced {
                return Err(format!(
                    "input {m:?} acknowledged before its tick {} was durable (durable: {synced})",
                    d.tick
                ));
            }
            if let Ok(cmds) = &d.outcome {
                let record = &disk.journal()[(d.tick - 1) as usize];
                if !cmds.iter().all(|c| record.commands.contains(c)) {
                    return Err(format!(
                        "accepted input {m:?} is not in tick {}'s record",
                        d.tick
                    ));
                }
            }
            self.out.acked_checked += 1;
        }
        Ok(())
    }

    fn deliver(&mut self) -> Result<(), String> {
        while let Some((from, to, bytes)) = self.net.pop_due(self.now) {
            if to == SERVER {
                if let Some(node) = self.node.as_mut() {
                    node.handle_datagram(self.now, from, &bytes);
                }
                continue;
            }
            let Some(i) = self.clients.iter().position(|c| c.addr == to && !c.gone) else {
                continue;
            };
            self.clients[i]
                .client
                .handle_datagram(self.now, from, &bytes);
            self.client_events(i)?;
        }
        Ok(())
    }

    fn client_events(&mut self, i: usize) -> Result<(), String> {
        let mut ticks = Vec::new();
        while let Some(ev) = self.clients[i].client.poll_event() {
            match ev {
                ClientEvent::Connected(w) => {
                    let c = &mut self.clients[i];
                    c.entity = Some(w.entity);
                    let p = w.spawn.pos;
                    c.pos = (p.x.to_bits(), p.y.to_bits());
                }
                ClientEvent::Tick { tick, digest, .. } => ticks.push((tick, digest)),
                ClientEvent::Refused(r) => self.check_refusal(i, r)?,
                ClientEvent::Disconnected { .. } => {}
            }
        }
        self.check_acked(i)?;
        if !ticks.is_empty() {
            self.check_applied(i, &ticks)?;
        }
        Ok(())
    }

    /// Runs the node's timers and, when due, its tick, with any fault the
    /// plan draws for that tick.
    fn drive_node(&mut self) -> Result<(), String> {
        if let Some((_, back)) = &self.down {
            if self.now >= *back {
                let (disk, _) = self.down.take().ok_or("down")?;
                self.open(disk)?;
            }
        }
        let Some(node) = self.node.as_mut() else {
            return Ok(());
        };
        if self.now < node.poll_timeout() {
            return Ok(());
        }
        let ticking = self.now >= node.tick_due();
        let mut planned = None;
        if ticking && !self.quiet {
            if self.rng.chance(self.plan.crash_rate) {
                let at = [
                    CrashAt::Append,
                    CrashAt::Sync,
                    CrashAt::BeforeSend,
                    CrashAt::Snapshot,
                ][self.rng.below(4) as usize];
                match at {
                    CrashAt::Append => node
                        .storage_mut()
                        .inject(DiskOp::Append, DiskFault::PowerCut),
                    CrashAt::Sync => node.storage_mut().inject(DiskOp::Sync, DiskFault::PowerCut),
                    CrashAt::Snapshot => {
                        node.storage_mut()
                            .inject(DiskOp::Snapshot, DiskFault::PowerCut);
                        self.snapshot_cut = true;
                    }
                    CrashAt::BeforeSend => self.crash_after_send = true,
                }
                planned = Some(at);
            } else if self.rng.chance(self.plan.disk_error_rate) {
                let op = [
                    DiskOp::Snapshot,
                    DiskOp::Snapshot,
                    DiskOp::Append,
                    DiskOp::Sync,
                ][self.rng.below(4) as usize];
                let fault = if self.rng.chance(500_000) {
                    DiskFault::Error
                } else {
                    DiskFault::Full
                };
                node.storage_mut().inject(op, fault);
                let name = match (op, fault) {
                    (DiskOp::Snapshot, DiskFault::Error) => "snapshot-error",
                    (DiskOp::Snapshot, _) => "snapshot-full",
                    (DiskOp::Append, DiskFault::Error) => "append-error",
                    (DiskOp::Append, _) => "append-full",
                    (_, DiskFault::Error) => "sync-error",
                    _ => "sync-full",
                };
                *self.out.disk_errors.entry(name).or_insert(0) += 1;
            }
        }
        let failures_before = node.stats().snapshot_failures;
        let result = node.handle_timeout(self.now);
        if node.storage().is_dead() {
            // The power went somewhere in this tick: nothing after it happened.
            // A snapshot cut planned earlier strikes at the next snapshot tick.
            let why = match planned {
                Some(at) if at != CrashAt::Snapshot => at.name(),
                _ if self.snapshot_cut => CrashAt::Snapshot.name(),
                _ => "power cut",
            };
            // The reboot clears pending faults.
            self.snapshot_cut = false;
            self.crash_after_send = false;
            return self.crash(why);
        }
        match result {
            Ok(Some(report)) => {
                self.out.ticks += 1;
                let node = self.node.as_ref().ok_or("node")?;
                self.out.snapshot_failures += node.stats().snapshot_failures - failures_before;
                self.record_views(report.tick)?;
                self.check_bounds()?;
                if std::mem::take(&mut self.crash_after_send) {
                    return self.crash(CrashAt::BeforeSend.name());
                }
                if self.rng.chance(100_000) {
                    // A driver that reads the socket before it has sent the
                    // tick: the node must hold back acknowledgements of what
                    // just arrived (and sends the rest after the next tick).
                    self.deliver()?;
                }
                self.flush_node()?;
            }
            Ok(None) => {}
            // A journal that cannot be written stops the node; it restarts
            // on the same disk, as an operator (or a supervisor) would.
            Err(_) => return self.crash("restart-after-journal-error"),
        }
        Ok(())
    }

    /// Keeps each client entity's view as the kernel's events build it
    /// (Enter carries the state at entry, Update the state when the
    /// throttle sends one), checked against the kernel's own view ids.
    fn record_views(&mut self, tick: u64) -> Result<(), String> {
        let Some(node) = self.node.as_ref() else {
            return Ok(());
        };
        let world = node.world();
        let clients: Vec<EntityId> = node.clients().collect();
        self.models.retain(|e, _| clients.contains(e));
        for &e in &clients {
            self.models.entry(e).or_default();
        }
        for ev in node.events() {
            let Some((observer, _, subject)) = ev.order_key() else {
                continue;
            };
            let Some(model) = self.models.get_mut(&observer) else {
                continue;
            };
            match *ev {
                Event::Enter {
                    pos,
                    dir,
                    speed,
                    layers,
                    ..
                } => {
                    model.insert(
                        subject,
                        Seen {
                            pos,
                            dir,
                            speed,
                            layers,
                        },
                    );
                }
                Event::Leave { .. } => {
                    model.remove(&subject);
                }
                Event::Update {
                    pos, dir, speed, ..
                } => {
                    let seen = model.get_mut(&subject).ok_or_else(|| {
                        format!("tick {tick}: an update of {subject} unseen by {observer}")
                    })?;
                    (seen.pos, seen.dir, seen.speed) = (pos, dir, speed);
                }
                _ => {}
            }
        }
        for (&entity, model) in &self.models {
            if world.entity(entity).is_none() {
                continue;
            }
            let ids: Vec<EntityId> = world.view(entity).map(|v| v.collect()).unwrap_or_default();
            if !ids.iter().copied().eq(model.keys().copied()) {
                return Err(format!(
                    "tick {tick}: the events of entity {entity} build the view {:?}, the kernel holds {ids:?}",
                    model.keys().collect::<Vec<_>>()
                ));
            }
            self.history.insert(
                (tick, entity),
                model.iter().map(|(&id, &s)| (id, s)).collect(),
            );
        }
        if tick.is_multiple_of(32) {
            // Views no client can still apply are dropped: memory stays bounded.
            let oldest = self
                .clients
                .iter()
                .filter(|c| !c.gone && c.client.state() == ClientState::Connected)
                .map(|c| c.client.applied_tick())
                .min()
                .unwrap_or(tick)
                // A client still shaking hands starts after its Welcome's
                // tick, which may lie behind the others; datagrams held up
                // by a delay spike carry ticks up to ~30 behind; the node
                // drops a connection 60 unacknowledged ticks behind.
                .min(tick.saturating_sub(200));
            self.history.retain(|&(t, _), _| t >= oldest);
        }
        Ok(())
    }

    fn check_bounds(&self) -> Result<(), String> {
        let node = self.node.as_ref().ok_or("node")?;
        let conns = node.server().connections().count();
        if conns > self.plan.max_clients as usize {
            return Err(format!("{conns} connections past the limit"));
        }
        if node.tracked_addresses() > MAX_TRACKED_ADDRS {
            return Err("the flood limit tracks too many addresses".into());
        }
        for c in node.server().connections() {
            if node.server().unacked_ticks(c).unwrap_or(0) > 61 {
                return Err(format!("{c} holds more unacknowledged ticks than allowed"));
            }
        }
        if self.history.len() > 24 * 240 {
            return Err(format!("{} kernel views kept", self.history.len()));
        }
        Ok(())
    }

    fn flush_node(&mut self) -> Result<(), String> {
        let mut buf = vec![0u8; self.plan.mtu];
        let Some(node) = self.node.as_mut() else {
            return Ok(());
        };
        while let Some(t) = node
            .poll_transmit(self.now, &mut buf)
            .map_err(|e| e.to_string())?
        {
            self.net
                .send(self.now, SERVER, t.destination, &buf[..t.len]);
        }
        Ok(())
    }

    fn drive_clients(&mut self) -> Result<(), String> {
        let mut buf = vec![0u8; self.plan.mtu];
        for i in 0..self.clients.len() {
            if self.clients[i].gone {
                continue;
            }
            let c = &mut self.clients[i].client;
            if c.poll_timeout().is_some_and(|t| t <= self.now) {
                c.handle_timeout(self.now);
            }
            self.client_events(i)?;
            let c = &mut self.clients[i];
            while let Some(t) = c
                .client
                .poll_transmit(self.now, &mut buf)
                .map_err(|e| e.to_string())?
            {
                self.net
                    .send(self.now, c.addr, t.destination, &buf[..t.len]);
            }
        }
        Ok(())
    }

    /// What the clients decide every 50 ms: join, walk, spam, flood, leave.
    fn step_clients(&mut self) -> Result<(), String> {
        let live = self
            .clients
            .iter()
            .filter(|c| !c.gone && !matches!(c.client.state(), ClientState::Closed(_)))
            .count();
        if !self.quiet && live < self.plan.max_clients as usize + 1 && self.rng.chance(120_000) {
            let kind = if self.plan.abusers && self.rng.chance(250_000) {
                if self.rng.chance(500_000) {
                    Kind::Spammer
                } else {
                    Kind::Flooder
                }
            } else {
                Kind::Walker
            };
            self.next_addr += 1;
            let client = Client::new(
                client_config(&self.plan),
                SERVER,
                b"",
                self.rng.next_u64(),
                self.now,
            )
            .map_err(|e| e.to_string())?;
            self.clients.push(SimClient {
                addr: self.next_addr,
                client,
                kind,
                gone: false,
                entity: None,
                pos: (0, 0),
                tag: 0,
                sent: Vec::new(),
                acked: 0,
            });
            self.out.joins += 1;
        }
        if !self.quiet && self.rng.chance(self.plan.partition_rate) {
            let who = if self.rng.chance(300_000) || self.clients.is_empty() {
                SERVER
            } else {
                self.clients[self.rng.below(self.clients.len() as u64) as usize].addr
            };
            let until = self.now + Duration::from_micros(200_000 + self.rng.below(2_800_000));
            self.net.partition(who, until);
            self.out.partitions += 1;
        }
        let config = self.plan.config;
        let (lo_x, lo_y) = (config.origin.x.to_bits(), config.origin.y.to_bits());
        let w = config.cell_size.to_bits() * i64::from(config.width_cells);
        let h = config.cell_size.to_bits() * i64::from(config.height_cells);
        for i in 0..self.clients.len() {
            if self.clients[i].gone {
                // A vanished client (a crashed game) may restart on its
                // address, usually while the node still holds its old
                // connection there.
                if !self.quiet && self.rng.chance(100_000) {
                    self.reconnect(i)?;
                }
                continue;
            }
            if !self.quiet && self.rng.chance(self.plan.churn_rate) {
                if self.rng.chance(500_000) {
                    self.clients[i].client.close(self.now);
                    self.out.leaves += 1;
                } else {
                    self.clients[i].gone = true;
                    self.out.vanishes += 1;
                    continue;
                }
            }
            if matches!(self.clients[i].client.state(), ClientState::Closed(_)) {
                // A restarted client comes back on its address at once, often
                // while the node still holds its old connection there: its
                // Hello (another token) must open a connection of its own.
                if !self.quiet && self.rng.chance(100_000) {
                    self.reconnect(i)?;
                }
            }
            let c = &mut self.clients[i];
            if c.kind == Kind::Flooder && !self.quiet {
                for _ in 0..30 {
                    let n = 1 + self.rng.below(64) as usize;
                    let junk: Vec<u8> = (0..n).map(|_| self.rng.next_u64() as u8).collect();
                    self.net.send(self.now, c.addr, SERVER, &junk);
                }
            }
            if self.quiet || c.client.state() != ClientState::Connected {
                continue;
            }
            let Some(me) = c.entity else { continue };
            let moves = match c.kind {
                Kind::Spammer => 12,
                _ if self.rng.chance(600_000) => 1,
                _ => 0,
            };
            let mut cmds = Vec::new();
            for _ in 0..moves {
                // A quarter of a tick's step (10 units at 200 u/s, 20 Hz).
                let d = 2 << 16;
                c.pos.0 = (c.pos.0 + self.rng.range_i64(-d, d)).clamp(lo_x, lo_x + w - 1);
                c.pos.1 = (c.pos.1 + self.rng.range_i64(-d, d)).clamp(lo_y, lo_y + h - 1);
                c.tag = c.tag.wrapping_add(1);
                cmds.push(Command::Move(Move {
                    id: me,
                    pos: Pos::new(Fix::from_bits(c.pos.0), Fix::from_bits(c.pos.1)),
                    dir: c.tag,
                    speed: Fix::from_num(5),
                }));
            }
            if cmds.is_empty() {
                continue;
            }
            let t = c.client.applied_tick() + 1 + c.sent.len() as u64;
            if c.client.send_input(t, &cmds).is_ok() {
                c.sent.push(cmds);
            }
        }
        Ok(())
    }

    /// Client `i` starts again from the same address, as a restarted game client does.
    fn reconnect(&mut self, i: usize) -> Result<(), String> {
        // Each run of a game client says Hello with a token of its own (a
        // session ticket), which is how the server tells it from the last.
        let run = format!("run {}", self.out.reconnects + 1);
        let client = Client::new(
            client_config(&self.plan),
            SERVER,
            run.as_bytes(),
            self.rng.next_u64(),
            self.now,
        )
        .map_err(|e| e.to_string())?;
        let c = &mut self.clients[i];
        (c.client, c.entity, c.acked, c.gone) = (client, None, 0, false);
        c.sent.clear();
        self.out.reconnects += 1;
        Ok(())
    }

    fn next_wake(&self, next_step: Instant) -> Instant {
        let mut next = next_step;
        if let Some(t) = self.net.next_delivery() {
            next = next.min(t);
        }
        match (&self.node, &self.down) {
            (Some(n), _) => next = next.min(n.poll_timeout()),
            (None, Some((_, back))) => next = next.min(*back),
            _ => {}
        }
        for c in self.clients.iter().filter(|c| !c.gone) {
            if let Some(t) = c.client.poll_timeout() {
                next = next.min(t);
            }
        }
        next.max(self.now + Duration::from_micros(100))
    }
}

/// Runs seed `plan.seed` to the end; `Err` names the broken invariant.
pub fn run(plan: &Plan) -> Result<Outcome, String> {
    let mut sim = Sim {
        rng: Rng::new(plan.seed),
        now: Instant::from_micros(1_000_000),
        net: Net::new(plan.seed.wrapping_mul(31), plan.mtu),
        node: None,
        down: None,
        crash_after_send: false,
        snapshot_cut: false,
        log: Rc::new(RefCell::new(BTreeMap::new())),
        clients: Vec::new(),
        next_addr: 0,
        history: BTreeMap::new(),
        models: BTreeMap::new(),
        out: Outcome::default(),
        quiet: false,
        plan: plan.clone(),
    };
    sim.net.faults = plan.net;
    sim.open(MemStorage::new(3))?;
    let start = sim.now;
    let load_end = start + Duration::from_micros(TICK_US * plan.load_ticks);
    // Quiet: long enough for partitions, spikes and idle timeouts to pass.
    let end = load_end + Duration::from_secs(8);
    let mut next_step = start;
    while sim.now < end {
        if !sim.quiet && sim.now >= load_end {
            sim.quiet = true;
            sim.net.faults = Faults::default();
        }
        sim.deliver()?;
        sim.drive_node()?;
        if sim.now >= next_step {
            next_step = next_step + Duration::from_micros(TICK_US);
            sim.step_clients()?;
        }
        sim.drive_clients()?;
        sim.now = sim.next_wake(next_step);
    }
    // The node is up at the end (a restart is at most 1.5 s away).
    sim.drive_node()?;
    let node = sim.node.as_ref().ok_or("the node is down at the end")?;
    // Every journaled tick replays to its digest from a fresh world.
    let disk = node.storage();
    let mut world = World::new(*node.world().config()).map_err(|e| e.to_string())?;
    let mut events = Vec::new();
    for record in disk.journal() {
        events.clear();
        let report = world.step(&record.commands, &mut events);
        if report.digest != record.digest || report.tick != record.tick {
            return Err(format!(
                "tick {} does not replay to its digest",
                record.tick
            ));
        }
    }
    if world.digest() != node.world().digest() {
        return Err("the node's world differs from the journal's replay".into());
    }
    // After the quiet phase every connected client has caught up and has
    // no input left unacknowledged.
    let tick = node.world().tick();
    for c in sim.clients.iter().filter(|c| !c.gone) {
        if c.client.state() == ClientState::Connected
            && (c.client.applied_tick() + 3 < tick || c.client.unacked_inputs() > 0)
        {
            return Err(format!(
                "client {} did not converge: applied {} of {tick}, {} inputs unacknowledged",
                c.addr,
                c.client.applied_tick(),
                c.client.unacked_inputs()
            ));
        }
    }
    let stats = node.stats();
    let mut out = sim.out;
    out.refused = stats
        .refused
        .iter()
        .filter(|(r, _)| **r != Refusal::Malformed)
        .map(|(_, n)| n)
        .sum();
    out.datagrams = sim.net.delivered;
    out.lost = sim.net.dropped;
    if sim.log.borrow().values().any(|d| d.tick == 0) {
        return Err("an input was decided for tick 0".into());
    }
    Ok(out)
}
