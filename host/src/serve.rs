//! `lockgrid serve`: the reference server loop over real UDP.
//!
//! One thread, one socket, a fixed-timestep clock. Every tick:
//!
//! 1. gather the tick's commands in a fixed order: despawns (disconnected
//!    clients, orphans of a previous run), spawns (new clients, missing
//!    NPCs), the NPC script's moves, then the accepted client moves, by
//!    entity id and in arrival order;
//! 2. [`World::step`];
//! 3. journal the commands and digest and sync ([`Recorder::record`]): the
//!    tick is durable before anything about it leaves the process;
//! 4. hand the events to the protocol [`Server`] and send what it queues.
//!
//! Nothing is sent between ticks: acknowledgements, Welcomes and
//! retransmissions wait for the next tick's send (at most one tick
//! interval). So when a client sees its input acknowledged, the tick that
//! applied it (or refused it) is already in the journal: a crash loses no
//! acknowledged input.
//!
//! Between ticks the loop feeds datagrams to the protocol endpoint and acts
//! on its events. Client input is checked before it reaches the journal:
//! only moves of the client's own entity, inside the world, no faster than
//! the max speed ([`rules::Allowance`]: a distance budget of one tick's
//! step per tick, saved up to [`rules::BURST_TICKS`]), at most
//! [`rules::MAX_MOVES_PER_TICK`] per tick; everything refused is counted per
//! [`Refusal`] reason. There is no
//! authentication: any Hello is accepted while there is room.
//!
//! On start, an existing data folder is recovered ([`recover`]) and the world
//! continues from its last journaled tick; client entities left over from
//! the previous run are despawned in the first tick.

pub mod rules;
pub mod stats;

use core::fmt;
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lockgrid_kernel::{Command, CommandKind, Config, EntityId, Event, Fix, Move, Spawn, World};
use lockgrid_protocol::{
    ConnId, DisconnectReason, Instant, Server, ServerConfig, ServerEvent, WorldParams, MAX_MTU,
};
use tracing::{debug, info, warn};

use crate::journal::SyncPolicy;
use crate::store::{journal_path, recover, Recorder, StoreError, StoreOptions};
use rules::{Refusal, CLIENT_ID_BASE};
use stats::{ServeStats, TickTimes};

/// The lock file a running server holds in its data folder.
pub const LOCK_FILE: &str = "serve.lock";

/// Everything `lockgrid serve` can be told.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// UDP address to listen on.
    pub addr: SocketAddr,
    /// Ticks per second.
    pub tick_rate: u32,
    /// Data folder (journal, snapshots, stats).
    pub data_dir: PathBuf,
    /// Most connected clients.
    pub max_clients: usize,
    /// Wandering NPCs (ids `1..=npcs`).
    pub npcs: u32,
    /// Seed of the NPC script.
    pub seed: u64,
    /// Max speed of every entity, units per second.
    pub max_speed: Fix,
    /// The world of a new data folder (an existing one keeps its journal's).
    pub world: Config,
    /// Snapshot every this many ticks (0: never).
    pub snapshot_every: u64,
    /// Journal durability.
    pub sync: SyncPolicy,
    /// Stop after this many ticks of this process.
    pub stop_after_ticks: Option<u64>,
    /// Stop after this long.
    pub stop_after: Option<Duration>,
    /// Datagrams one address may send per second before the rest is dropped.
    pub max_packets_per_sec: u32,
    /// A client silent for this long is disconnected (and its entity despawned).
    pub client_timeout: Duration,
    /// The key shared with the backend that mints connect tokens: with it,
    /// only clients with a valid token connect (as the entity it names) and
    /// every packet is sealed. Without it, anyone may connect, in clear.
    pub key: Option<lockgrid_protocol::PrivateKey>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            addr: SocketAddr::from(([127, 0, 0, 1], 7777)),
            tick_rate: 20,
            data_dir: PathBuf::from("lockgrid-data"),
            max_clients: 1024,
            npcs: 0,
            seed: 0,
            max_speed: Fix::from_num(200),
            world: Config::default(),
            snapshot_every: 600,
            sync: SyncPolicy::EveryTick,
            stop_after_ticks: None,
            stop_after: None,
            max_packets_per_sec: 1000,
            client_timeout: Duration::from_secs(10),
            key: None,
        }
    }
}

/// Why the server could not start or had to stop.
#[derive(Debug)]
#[non_exhaustive]
pub enum ServeError {
    /// The options are unusable.
    Options(String),
    /// The socket failed.
    Socket(io::Error),
    /// The data folder failed (the journal could not be written: no tick
    /// after the last durable one was sent).
    Store(StoreError),
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::Options(m) => f.write_str(m),
            ServeError::Socket(e) => write!(f, "socket: {e}"),
            ServeError::Store(e) => write!(f, "data folder: {e}"),
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Options(_) => None,
            ServeError::Socket(e) => Some(e),
            ServeError::Store(e) => Some(e),
        }
    }
}

impl From<StoreError> for ServeError {
    fn from(e: StoreError) -> Self {
        ServeError::Store(e)
    }
}

/// A connected client.
struct Client {
    conn: ConnId,
    /// How far it may still move.
    allowance: rules::Allowance,
    /// Protocol counters already added to the totals.
    seen_foreign: u64,
    seen_dropped: u64,
}

/// Datagrams per source address in the current one-second window.
struct RateLimit {
    window_start: Instant,
    counts: BTreeMap<SocketAddr, u32>,
    per_sec: u32,
}

/// Most addresses tracked in one window; past it new addresses are dropped.
const MAX_TRACKED_ADDRS: usize = 65_536;

impl RateLimit {
    fn allow(&mut self, now: Instant, from: SocketAddr) -> bool {
        if now - self.window_start >= Duration::from_secs(1) {
            self.window_start = now;
            self.counts.clear();
        }
        if !self.counts.contains_key(&from) && self.counts.len() >= MAX_TRACKED_ADDRS {
            return false;
        }
        let n = self.counts.entry(from).or_insert(0);
        *n = n.saturating_add(1);
        *n <= self.per_sec
    }
}

/// The server's state between ticks.
struct Host {
    opts: ServeOptions,
    world: World,
    recorder: Recorder,
    server: Server<SocketAddr>,
    config: Config,
    step: i64,
    clients: BTreeMap<EntityId, Client>,
    pending_spawns: BTreeMap<EntityId, Spawn>,
    pending_despawns: BTreeSet<EntityId>,
    pending_moves: BTreeMap<EntityId, Vec<Move>>,
    next_client: EntityId,
    refused: BTreeMap<Refusal, u64>,
    stats: ServeStats,
    times: TickTimes,
    commands: Vec<Command>,
    events: Vec<Event>,
}

/// How a serve run ended.
#[derive(Clone, Debug)]
pub struct ServeSummary {
    /// The final counters.
    pub stats: ServeStats,
    /// How long it ran.
    pub elapsed: Duration,
}

impl fmt::Display for ServeSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.stats;
        let refused: u64 = s.refused.values().sum();
        write!(
            f,
            "stopped at tick {} after {:.1} s: {} ticks run, tick p50 {} us p99 {} us max {} us, {} overruns, {} connections, {} events, {} refused, journal closed",
            s.tick,
            self.elapsed.as_secs_f64(),
            s.ticks_run,
            s.tick_p50_us,
            s.tick_p99_us,
            s.tick_max_us,
            s.overruns,
            s.connections,
            s.events,
            refused
        )
    }
}

/// The part of a wait spent polling instead of blocking in the socket.
const SLACK: Duration = Duration::from_millis(5);

/// Switches the socket's mode when it differs from `current`.
fn set_nonblocking(socket: &UdpSocket, current: &mut bool, want: bool) -> Result<(), ServeError> {
    if *current != want {
        socket.set_nonblocking(want).map_err(ServeError::Socket)?;
        *current = want;
    }
    Ok(())
}

/// The monotonic clock mapped onto protocol instants.
struct Clock(std::time::Instant);

impl Clock {
    fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.0.elapsed().as_micros()).unwrap_or(u64::MAX))
    }
}

/// Opens (or creates) the data folder and binds the socket, then serves until
/// `stop` is set or a stop-after limit passes. Returns the final counters.
pub fn serve(opts: ServeOptions, stop: &AtomicBool) -> Result<ServeSummary, ServeError> {
    serve_with(opts, stop, |_| {})
}

/// [`serve`], calling `on_ready` with the bound address once the data folder
/// is open and the socket listens (useful with port 0).
pub fn serve_with(
    opts: ServeOptions,
    stop: &AtomicBool,
    on_ready: impl FnOnce(SocketAddr),
) -> Result<ServeSummary, ServeError> {
    if opts.tick_rate == 0 || opts.tick_rate > 1000 {
        return Err(ServeError::Options(
            "--tick-rate must be in 1..=1000".into(),
        ));
    }
    if opts.max_clients == 0 {
        return Err(ServeError::Options("--max-clients must be positive".into()));
    }
    if opts.client_timeout.is_zero() {
        return Err(ServeError::Options(
            "--client-timeout must be positive".into(),
        ));
    }
    if opts.max_speed <= Fix::ZERO {
        return Err(ServeError::Options("--max-speed must be positive".into()));
    }
    opts.world
        .validate()
        .map_err(|e| ServeError::Options(format!("world config: {e}")))?;
    let store = StoreOptions {
        sync: opts.sync,
        snapshot_every: opts.snapshot_every,
        ..StoreOptions::default()
    };
    // One server per data folder: an exclusive lock, which the system
    // releases when the process ends however it ends (no stale lock after kill -9).
    std::fs::create_dir_all(&opts.data_dir).map_err(|e| ServeError::Store(e.into()))?;
    let lock = std::fs::File::create(opts.data_dir.join(LOCK_FILE))
        .map_err(|e| ServeError::Store(e.into()))?;
    if let Err(e) = lock.try_lock() {
        return Err(ServeError::Options(format!(
            "{} is in use by another server ({e})",
            opts.data_dir.display()
        )));
    }
    let (world, recorder) = if journal_path(&opts.data_dir).exists() {
        let (world, recorder, report) = recover(&opts.data_dir, store)?;
        info!(data_dir = %opts.data_dir.display(), "recovered: {report}");
        if world.config() != &opts.world {
            info!("the data folder's world config is kept; world options apply to new data folders only");
        }
        (world, recorder)
    } else {
        let recorder = Recorder::create(&opts.data_dir, &opts.world, store)?;
        info!(data_dir = %opts.data_dir.display(), "created a new data folder");
        let world = World::new(opts.world)
            .map_err(|e| ServeError::Options(format!("world config: {e}")))?;
        (world, recorder)
    };
    let config = *world.config();
    if u64::from(opts.npcs) >= CLIENT_ID_BASE || opts.npcs > config.max_entities {
        return Err(ServeError::Options(format!(
            "--npcs {} exceeds the world's max_entities {}",
            opts.npcs, config.max_entities
        )));
    }
    let interval = Duration::from_micros(1_000_000 / u64::from(opts.tick_rate));
    let server_config = ServerConfig {
        max_connections: opts.max_clients,
        tick_interval: interval,
        idle_timeout: opts.client_timeout,
        conn_id_seed: fresh_seed(),
        ..ServerConfig::default()
    };
    let mut server = Server::new(server_config, WorldParams::from(&config))
        .map_err(|e| ServeError::Options(e.to_string()))?;
    if world.tick() > 0 {
        // A recovered world: tell the endpoint where the ticks stand, so the
        // Welcome announces the right tick. No connection exists yet, so
        // this sends nothing.
        server
            .push_tick(Instant::ZERO, world.tick(), world.digest(), &[])
            .map_err(|e| ServeError::Options(format!("protocol: {e}")))?;
    }
    let socket = UdpSocket::bind(opts.addr).map_err(ServeError::Socket)?;
    let local = socket.local_addr().map_err(ServeError::Socket)?;
    secure(&mut server, opts.key.as_ref(), local)?;
    info!(addr = %local, tick_rate = opts.tick_rate, tick = world.tick(), npcs = opts.npcs, "serving");

    let mut host = Host {
        step: rules::step_per_tick(opts.max_speed, opts.tick_rate),
        opts,
        world,
        recorder,
        server,
        config,
        clients: BTreeMap::new(),
        pending_spawns: BTreeMap::new(),
        pending_despawns: BTreeSet::new(),
        pending_moves: BTreeMap::new(),
        next_client: CLIENT_ID_BASE,
        refused: BTreeMap::new(),
        stats: ServeStats {
            running: true,
            ..ServeStats::default()
        },
        times: TickTimes::default(),
        commands: Vec::new(),
        events: Vec::new(),
    };
    host.adopt_world();
    on_ready(local);
    let started = std::time::Instant::now();
    let result = host.run(&socket, interval, stop);
    // Whatever happened, tell the clients and close the journal.
    host.shutdown(&socket);
    let elapsed = started.elapsed();
    host.stats.running = false;
    host.fill_stats();
    if let Err(e) = host.stats.write(&host.opts.data_dir) {
        warn!("cannot write the stats file: {e}");
    }
    let stats = host.stats.clone();
    let closed = host.recorder.close();
    drop(lock);
    result?;
    closed?;
    Ok(ServeSummary { stats, elapsed })
}

/// With a key, tokens must name `local` (the bound address) and
/// [`DEFAULT_PROTOCOL_ID`](lockgrid_protocol::token::DEFAULT_PROTOCOL_ID);
/// without one, the log says loudly that anyone may connect.
fn secure(
    server: &mut Server<SocketAddr>,
    key: Option<&lockgrid_protocol::PrivateKey>,
    local: SocketAddr,
) -> Result<(), ServeError> {
    let Some(key) = key else {
        warn!("no --key: connections are unauthenticated and unencrypted; anyone who can reach {local} can connect and read every view (use a key outside development)");
        return Ok(());
    };
    // The run's clock starts about now; token expiry is in whole seconds.
    let unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let id = lockgrid_protocol::token::DEFAULT_PROTOCOL_ID;
    let security = lockgrid_protocol::ServerSecurity::new(key.clone(), id, vec![local], unix);
    server
        .set_security(security)
        .map_err(|e| ServeError::Options(e.to_string()))?;
    if local.ip().is_unspecified() {
        warn!("--key with a wildcard address: tokens must name {local} itself; bind the address clients reach");
    }
    info!(addr = %local, "connect tokens required; packets sealed");
    Ok(())
}

/// A per-process seed for connection ids (not reproducible on purpose).
fn fresh_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    rules::mix(t ^ u64::from(std::process::id()).rotate_left(32))
}

impl Host {
    /// Schedules the first tick's fix-ups of a recovered world: despawn the
    /// previous run's client entities and surplus NPCs, spawn missing NPCs.
    fn adopt_world(&mut self) {
        let npcs = u64::from(self.opts.npcs);
        let mut present = BTreeSet::new();
        for e in self.world.entities() {
            if e.id >= CLIENT_ID_BASE {
                self.pending_despawns.insert(e.id);
                self.next_client = self.next_client.max(e.id);
            } else if e.id > npcs || e.id == 0 {
                self.pending_despawns.insert(e.id);
            } else {
                present.insert(e.id);
            }
        }
        for id in 1..=npcs {
            if !present.contains(&id) {
                self.pending_spawns
                    .insert(id, rules::npc_spawn(&self.config, self.opts.seed, id));
            }
        }
        if !self.pending_despawns.is_empty() {
            info!(
                count = self.pending_despawns.len(),
                "despawning entities left over from the previous run"
            );
        }
    }

    fn refuse(&mut self, why: Refusal, n: u64) {
        if n > 0 {
            *self.refused.entry(why).or_insert(0) += n;
        }
    }

    fn run(
        &mut self,
        socket: &UdpSocket,
        interval: Duration,
        stop: &AtomicBool,
    ) -> Result<(), ServeError> {
        let clock = Clock(std::time::Instant::now());
        let mut buf = vec![0u8; MAX_MTU + 1];
        let mut out = vec![0u8; self.server.config().mtu];
        let mut limit = RateLimit {
            window_start: clock.now(),
            counts: BTreeMap::new(),
            per_sec: self.opts.max_packets_per_sec,
        };
        let start = clock.now();
        let stop_at = self.opts.stop_after.map(|d| start + d);
        let mut next_tick = start + interval;
        let mut next_stats = start + Duration::from_secs(1);
        let mut last_overrun_log = start;
        let mut overruns_unlogged = 0u64;
        let mtu = self.server.config().mtu;
        let mut nonblocking = false;
        let mut status_in = 10u32;
        loop {
            if stop.load(Ordering::Relaxed) {
                info!("interrupted: stopping after tick {}", self.world.tick());
                return Ok(());
            }
            if self
                .opts
                .stop_after_ticks
                .is_some_and(|n| self.stats.ticks_run >= n)
                || stop_at.is_some_and(|t| clock.now() >= t)
            {
                return Ok(());
            }
            // 1. Datagrams in: wait for the first until the next deadline,
            //    then drain what is queued without waiting.
            let now = clock.now();
            let mut wake = next_tick;
            if let Some(t) = self.server.poll_timeout() {
                wake = wake.min(t);
            }
            // A socket timeout has the kernel's timer granularity (a few
            // milliseconds), so block only for the part of the wait above
            // that and poll with short sleeps for the rest: ticks start on time.
            let wait = (wake - now).min(Duration::from_millis(50));
            let block = wait.checked_sub(SLACK).filter(|d| !d.is_zero());
            match block {
                Some(d) => {
                    set_nonblocking(socket, &mut nonblocking, false)?;
                    socket
                        .set_read_timeout(Some(d))
                        .map_err(ServeError::Socket)?;
                }
                None => set_nonblocking(socket, &mut nonblocking, true)?,
            }
            for i in 0..1024 {
                if i == 1 {
                    set_nonblocking(socket, &mut nonblocking, true)?;
                }
                match socket.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        let now = clock.now();
                        self.stats.packets_in += 1;
                        self.stats.bytes_in += n as u64;
                        if !limit.allow(now, from) {
                            self.refuse(Refusal::Flood, 1);
                        } else if n > mtu {
                            self.refuse(Refusal::Oversized, 1);
                        } else {
                            self.server.handle_datagram(now, from, &buf[..n]);
                        }
                    }
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock
                                | io::ErrorKind::TimedOut
                                | io::ErrorKind::Interrupted
                        ) =>
                    {
                        if i == 0 && block.is_none() && !wait.is_zero() {
                            std::thread::sleep(wait.min(Duration::from_micros(200)));
                        }
                        break;
                    }
                    // ICMP port unreachable from a vanished client shows up
                    // here on some systems: not the server's problem.
                    Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
                    Err(e) => return Err(ServeError::Socket(e)),
                }
            }
            // 2. Timers.
            let now = clock.now();
            if self.server.poll_timeout().is_some_and(|t| t <= now) {
                self.server.handle_timeout(now);
            }
            // 3. What the clients asked for.
            self.drain_events();
            // 4. The tick.
            if now >= next_tick {
                let began = clock.now();
                let lateness = began - next_tick;
                if lateness > interval {
                    self.stats.late_ticks += 1;
                }
                if lateness > interval * 10 {
                    let slots = lateness.as_micros() / interval.as_micros().max(1);
                    warn!(
                        behind_ms = lateness.as_millis() as u64,
                        "the clock is {slots} tick slots behind; resuming the schedule from now (no tick is skipped, the world just runs late)"
                    );
                    next_tick = began;
                }
                next_tick = next_tick + interval;
                self.tick(began)?;
                self.flush(socket, &mut out, clock.now())?;
                let took = clock.now() - began;
                self.times.record(took);
                if took > interval {
                    self.stats.overruns += 1;
                    overruns_unlogged += 1;
                    if clock.now() - last_overrun_log >= Duration::from_secs(1) {
                        warn!(
                            tick = self.world.tick(),
                            took_us = took.as_micros() as u64,
                            "{overruns_unlogged} tick(s) overran the {} us interval",
                            interval.as_micros()
                        );
                        overruns_unlogged = 0;
                        last_overrun_log = clock.now();
                    }
                }
            }
            // 5. Datagrams go out only right after a tick (above): every
            //    acknowledgement then covers inputs of durable ticks only.
            if clock.now() >= next_stats {
                next_stats = next_stats + Duration::from_secs(1);
                self.fill_stats();
                if let Err(e) = self.stats.write(&self.opts.data_dir) {
                    debug!("cannot write the stats file: {e}");
                }
                status_in = status_in.saturating_sub(1);
                if status_in == 0 {
                    status_in = 10;
                    let s = &self.stats;
                    info!(
                        tick = s.tick,
                        clients = s.clients,
                        tick_p50_us = s.tick_p50_us,
                        tick_p99_us = s.tick_p99_us,
                        overruns = s.overruns,
                        refused = s.refused.values().sum::<u64>(),
                        "status"
                    );
                }
            }
        }
    }

    fn flush(
        &mut self,
        socket: &UdpSocket,
        out: &mut [u8],
        now: Instant,
    ) -> Result<(), ServeError> {
        // poll_transmit only fails for a buffer below the MTU, and `out` is
        // exactly the MTU: treat a failure as a bug report, not a panic.
        while let Some(t) = self
            .server
            .poll_transmit(now, out)
            .map_err(|e| ServeError::Options(format!("transmit buffer: {e}")))?
        {
            let bytes = &out[..t.len];
            match socket.send_to(bytes, t.destination) {
                Ok(_) => {
                    self.stats.packets_out += 1;
                    self.stats.bytes_out += bytes.len() as u64;
                }
                // A full send buffer or an unreachable peer loses the
                // datagram; the protocol retransmits what matters.
                Err(e) => debug!(to = %t.destination, "send failed: {e}"),
            }
        }
        Ok(())
    }

    fn drain_events(&mut self) {
        while let Some(ev) = self.server.poll_event() {
            match ev {
                ServerEvent::Connecting { conn, from, .. } => self.on_connect(conn, from),
                ServerEvent::Input {
                    conn,
                    entity,
                    commands,
                    ..
                } => self.on_input(conn, entity, &commands),
                ServerEvent::Disconnected {
                    conn,
                    entity,
                    reason,
                } => {
                    debug!(%conn, ?entity, ?reason, "disconnected");
                    let Some(e) = entity else { continue };
                    if self.clients.get(&e).is_some_and(|c| c.conn == conn) {
                        self.clients.remove(&e);
                        self.pending_moves.remove(&e);
                        if self.pending_spawns.remove(&e).is_none() {
                            self.pending_despawns.insert(e);
                        }
                        info!(%conn, entity = e, ?reason, "client left");
                    }
                }
            }
        }
    }

    fn on_connect(&mut self, conn: ConnId, from: SocketAddr) {
        if self.clients.len() >= self.opts.max_clients {
            self.refuse(Refusal::Full, 1);
            let _ = self.server.reject(conn, DisconnectReason::ServerFull);
            return;
        }
        let busy = |h: &Self, id| {
            h.world.entity(id).is_some()
                || h.clients.contains_key(&id)
                || h.pending_despawns.contains(&id)
        };
        // A connect token names the client's entity; else the next free id.
        let token_id = self.server.token_claims(conn).map(|t| t.client_id);
        if let Some(id) = token_id.filter(|&id| id < CLIENT_ID_BASE || busy(self, id)) {
            warn!(%conn, %from, entity = id, "token's client id is an NPC's or in use");
            let _ = self.server.reject(conn, DisconnectReason::TokenRejected);
            return;
        }
        let mut id = token_id.unwrap_or_else(|| self.next_client.saturating_add(1));
        while token_id.is_none() && busy(self, id) {
            id = id.saturating_add(1);
        }
        if token_id.is_none() {
            self.next_client = id;
        }
        if let Err(e) = self.server.accept(conn, id) {
            warn!(%conn, "cannot accept: {e}");
            return;
        }
        let spawn = rules::client_spawn(&self.config, id);
        self.clients.insert(
            id,
            Client {
                conn,
                allowance: rules::Allowance::new(spawn.pos, self.world.tick() + 1, self.step),
                seen_foreign: 0,
                seen_dropped: 0,
            },
        );
        self.pending_spawns.insert(id, spawn);
        self.stats.connections += 1;
        info!(%conn, %from, entity = id, "client joined");
    }

    fn on_input(&mut self, conn: ConnId, entity: EntityId, commands: &[Command]) {
        let tick = self.world.tick() + 1;
        let (max_speed, step) = (self.opts.max_speed, self.step);
        let Some(c) = self.clients.get_mut(&entity).filter(|c| c.conn == conn) else {
            return;
        };
        let mut refusals = Vec::new();
        for cmd in commands {
            let Command::Move(m) = cmd else {
                refusals.push(Refusal::NotAMove);
                continue;
            };
            if m.id != entity {
                // The protocol already drops these; belt and braces.
                refusals.push(Refusal::Spoofed);
                continue;
            }
            match c.allowance.check(&self.config, max_speed, step, tick, m) {
                Ok(()) => {
                    self.pending_moves.entry(entity).or_default().push(*m);
                }
                Err(why) => refusals.push(why),
            }
        }
        for why in refusals {
            debug!(entity, reason = why.as_str(), "input refused");
            self.refuse(why, 1);
        }
    }

    /// Gathers, steps, journals, and hands the tick to the protocol.
    fn tick(&mut self, now: Instant) -> Result<(), ServeError> {
        let tick = self.world.tick() + 1;
        self.commands.clear();
        for &id in &self.pending_despawns {
            self.commands.push(Command::Despawn { id });
        }
        self.pending_despawns.clear();
        for s in self.pending_spawns.values() {
            self.commands.push(Command::Spawn(*s));
        }
        let spawned_now: BTreeSet<EntityId> = std::mem::take(&mut self.pending_spawns)
            .into_keys()
            .collect();
        for id in 1..=u64::from(self.opts.npcs) {
            if spawned_now.contains(&id) {
                continue;
            }
            if let Some(e) = self.world.entity(id) {
                self.commands.push(Command::Move(rules::npc_move(
                    &self.config,
                    self.opts.seed,
                    tick,
                    self.step,
                    id,
                    e.pos,
                    e.dir,
                )));
            }
        }
        for moves in std::mem::take(&mut self.pending_moves).into_values() {
            self.commands.extend(moves.into_iter().map(Command::Move));
        }
        self.events.clear();
        let report = self.world.step(&self.commands, &mut self.events);
        // Durable before anything about the tick goes out.
        self.recorder.record(&self.world, &self.commands, &report)?;
        self.stats.ticks_run += 1;
        self.stats.events += report.events;
        // A client whose entity could not spawn (the world is full) is turned away.
        let mut unspawned = Vec::new();
        for e in &self.events {
            match e {
                Event::Rejected {
                    entity,
                    command: CommandKind::Spawn,
                    reason,
                } => {
                    if let Some(c) = self.clients.get(entity) {
                        warn!(
                            entity,
                            reason = reason.as_str(),
                            "client entity could not spawn"
                        );
                        unspawned.push((*entity, c.conn));
                    } else {
                        warn!(entity, reason = reason.as_str(), "NPC could not spawn");
                    }
                }
                Event::Rejected {
                    entity,
                    command,
                    reason,
                } => debug!(
                    entity,
                    command = command.as_str(),
                    reason = reason.as_str(),
                    "kernel rejected"
                ),
                _ => break,
            }
        }
        if let Err(e) = self
            .server
            .push_tick(now, report.tick, report.digest, &self.events)
        {
            // The kernel's order is the contract; this would be a kernel bug.
            warn!(tick = report.tick, "protocol refused the tick: {e}");
        }
        for (entity, conn) in unspawned {
            self.clients.remove(&entity);
            self.refuse(Refusal::Full, 1);
            let _ = self.server.reject(conn, DisconnectReason::ServerFull);
        }
        // Per-connection protocol counters: spoofed commands and dropped datagrams.
        let mut foreign = 0;
        let mut dropped = 0;
        for c in self.clients.values_mut() {
            if let Some(s) = self.server.conn_stats(c.conn) {
                foreign += s.foreign_commands.saturating_sub(c.seen_foreign);
                dropped += s.packets_dropped.saturating_sub(c.seen_dropped);
                c.seen_foreign = s.foreign_commands;
                c.seen_dropped = s.packets_dropped;
            }
        }
        self.refuse(Refusal::Spoofed, foreign);
        self.refuse(Refusal::Malformed, dropped);
        Ok(())
    }

    fn fill_stats(&mut self) {
        let s = &mut self.stats;
        s.tick = self.world.tick();
        s.tick_p50_us = self.times.quantile_us(500);
        s.tick_p99_us = self.times.quantile_us(990);
        s.tick_max_us = self.times.max_us();
        s.clients = self.clients.len() as u64;
        // Datagrams from unknown senders that started nothing count as malformed.
        let unknown = self.server.stats().unknown_dropped;
        s.refused = Refusal::ALL
            .iter()
            .map(|r| {
                let mut n = self.refused.get(r).copied().unwrap_or(0);
                if *r == Refusal::Malformed {
                    n += unknown;
                }
                (r.as_str().to_owned(), n)
            })
            .collect();
    }

    /// Says goodbye to every client (their entities stay in the world and
    /// are despawned by the next start).
    fn shutdown(&mut self, socket: &UdpSocket) {
        let conns: Vec<ConnId> = self.server.connections().collect();
        for conn in conns {
            let _ = self.server.reject(conn, DisconnectReason::Kicked);
        }
        let mut out = vec![0u8; self.server.config().mtu];
        let now = Clock(std::time::Instant::now()).now();
        if let Err(e) = self.flush(socket, &mut out, now) {
            debug!("final flush: {e}");
        }
    }
}
