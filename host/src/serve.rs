//! `lockgrid serve`: the server [`Node`] driven by a UDP socket and the clock.
//!
//! Everything that decides something lives in the node and its rules
//! ([`DefaultRules`]); this driver only carries datagrams between the
//! socket and the node, tells it the time, writes the stats file once a
//! second and stops on a signal or a limit. One thread:
//!
//! 1. wait for a datagram until the node's next deadline
//!    ([`Node::poll_timeout`]) and hand over everything queued;
//! 2. at the deadline, [`Node::handle_timeout`]: when it ran a tick (the
//!    tick is journaled and synced by then), send every datagram
//!    [`Node::poll_transmit`] releases;
//! 3. once a second, the stats file.
//!
//! On start, an existing data folder is recovered and the world continues
//! from its last journaled tick; on stop, clients are told goodbye and the
//! journal is closed. A journal that cannot be written stops the server
//! (no tick after the last durable one was sent); a snapshot that cannot
//! be written is logged, counted in the stats, and tried again at the next
//! snapshot tick.

pub mod default_rules;
pub mod rules;
pub(crate) mod socket_buffers;
pub mod stats;
mod udp_batch;

use core::fmt;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lockgrid_kernel::{Config, Fix};
use lockgrid_protocol::{Instant, Server, ServerConfig, WorldParams, MAX_MTU};
use tracing::{debug, info, warn};

use crate::journal::SyncPolicy;
use crate::memory_limit::MemoryLimit;
use crate::metrics::{ServeMetrics, TimedStorage};
use crate::node::{FileStorage, Node, NodeConfig, NodeError};
use crate::store::StoreError;
pub use default_rules::DefaultRules;
use rules::CLIENT_ID_BASE;
use stats::{ServeStats, StatsFile, TickTimes};

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
    /// Side, in cells, of the square around the world's centre where
    /// clients spawn (see [`DefaultRules::with_spawn_area`]).
    pub spawn_area: u32,
    /// Max speed of every entity, units per second.
    pub max_speed: Fix,
    /// The world of a new data folder (an existing one keeps its journal's).
    pub world: Config,
    /// Snapshot every this many ticks (0: never).
    pub snapshot_every: u64,
    /// Threads that step the world, the serving one included (see
    /// [`NodeConfig::threads`]).
    pub threads: usize,
    /// Journal durability.
    pub sync: SyncPolicy,
    /// A data folder with snapshots but no journal: delete them and start a
    /// new world (else refused).
    pub discard_snapshots: bool,
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
    /// Where the tick's figures go (see [`crate::metrics`]); serve them
    /// with a [`MetricsEndpoint`](crate::metrics::MetricsEndpoint).
    pub metrics: ServeMetrics,
    /// Refuse a world that would reserve more bytes than this; `None`:
    /// half of the machine's memory (see [`crate::memory_limit`]).
    pub max_memory: Option<u64>,
    /// Bytes per second each client may be sent; `None`: no limit (see
    /// [`ServerConfig::budget_bytes_per_sec`]).
    pub budget: Option<u32>,
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
            spawn_area: rules::DEFAULT_SPAWN_AREA,
            max_speed: Fix::from_num(200),
            world: Config::default(),
            snapshot_every: 600,
            threads: 1,
            sync: SyncPolicy::EveryTick,
            discard_snapshots: false,
            stop_after_ticks: None,
            stop_after: None,
            max_packets_per_sec: 1000,
            client_timeout: Duration::from_secs(10),
            key: None,
            metrics: ServeMetrics::new(),
            max_memory: None,
            budget: None,
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
    /// The data folder could not be locked or created.
    Store(StoreError),
    /// The node failed (the journal could not be written: no tick after the
    /// last durable one was sent), or could not open the data folder.
    Node(NodeError),
}

impl fmt::Display for ServeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ServeError::Options(m) => f.write_str(m),
            ServeError::Socket(e) => write!(f, "socket: {e}"),
            ServeError::Store(e) => write!(f, "data folder: {e}"),
            ServeError::Node(e) => write!(f, "data folder: {e}"),
        }
    }
}

impl std::error::Error for ServeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ServeError::Options(_) => None,
            ServeError::Socket(e) => Some(e),
            ServeError::Store(e) => Some(e),
            ServeError::Node(e) => Some(e),
        }
    }
}

impl From<NodeError> for ServeError {
    fn from(e: NodeError) -> Self {
        ServeError::Node(e)
    }
}

impl From<StoreError> for ServeError {
    fn from(e: StoreError) -> Self {
        ServeError::Store(e)
    }
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

/// The part of a wait spent polling instead of blocking in the socket: a
/// socket timeout has the kernel's timer granularity (a few milliseconds),
/// so the driver blocks only for the part of a wait above it, and ticks
/// start on time.
const SLACK: Duration = Duration::from_millis(5);

/// Snapshots kept in the data folder.
const KEEP_SNAPSHOTS: usize = 4;

/// The monotonic clock mapped onto protocol instants.
struct Clock(std::time::Instant);

impl Clock {
    fn now(&self) -> Instant {
        Instant::from_micros(u64::try_from(self.0.elapsed().as_micros()).unwrap_or(u64::MAX))
    }
}

type ServeNode = Node<SocketAddr, DefaultRules, TimedStorage<FileStorage>>;

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
    check_options(&opts)?;
    // Refused before anything is created in the data folder.
    check_memory(&opts)?;
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
    let config = NodeConfig {
        server: server_config(&opts, fresh_seed()),
        snapshot_every: opts.snapshot_every,
        max_packets_per_sec: opts.max_packets_per_sec,
        threads: opts.threads,
        ..NodeConfig::default()
    };
    let storage = FileStorage::new(&opts.data_dir, opts.sync, KEEP_SNAPSHOTS)
        .discard_orphan_snapshots(opts.discard_snapshots);
    let storage = TimedStorage::new(storage, &opts.metrics);
    let rules = DefaultRules::new(opts.max_speed, opts.tick_rate, opts.npcs, opts.seed)
        .with_spawn_area(opts.spawn_area);
    let clock = Clock(std::time::Instant::now());
    // The Unix time of the clock's zero: how the protocol tells a token's
    // expiry (Unix seconds) from the `now` it is given.
    let unix_secs_at_zero = crate::token::unix_now();
    let (mut node, report) = Node::open(clock.now(), config, &opts.world, rules, storage)?;
    info!(data_dir = %opts.data_dir.display(), "{report}");
    let world = *node.world().config();
    if !report.created && world != opts.world {
        info!(
            "the data folder's world config is kept; world options apply to new data folders only"
        );
    }
    check_npcs(&opts, &world).map_err(ServeError::Options)?;
    let socket = UdpSocket::bind(opts.addr).map_err(ServeError::Socket)?;
    socket_buffers::size_and_report(&socket, opts.max_clients).map_err(ServeError::Socket)?;
    let local = socket.local_addr().map_err(ServeError::Socket)?;
    secure(&mut node, opts.key.as_ref(), local, unix_secs_at_zero)?;
    info!(addr = %local, tick_rate = opts.tick_rate, tick = node.world().tick(), npcs = opts.npcs, "serving");
    on_ready(local);

    // The loop runs on one of the threads that step the world, so that
    // its ticks' joins allocate nothing (see `crate::threads`); with one
    // thread, here. The driver is made there: its batches of datagrams
    // hold raw pointers, so it cannot cross threads.
    let threads = node.threads().clone();
    let (result, closed, stats, elapsed) = threads.run(move || {
        let mut driver = Driver {
            outbox: udp_batch::Outbox::new(),
            inbox: udp_batch::Inbox::new(),
            nonblocking: false,
            clock,
            times: TickTimes::default(),
            overruns: 0,
            readings: crate::node::StatsReadings::starting_at(node.stats()),
            file: StatsFile::new(&opts.data_dir),
            file_counters: crate::node::NodeStats::default(),
            drops: socket_buffers::Drops::of(&socket),
            socket,
            file_stats: ServeStats {
                refused: rules::Refusal::ALL
                    .iter()
                    .map(|r| (r.as_str().to_owned(), 0))
                    .collect(),
                ..ServeStats::default()
            },
        };
        let started = std::time::Instant::now();
        let result = driver.run(&mut node, &opts, config.server.tick_interval, stop);
        // Whatever happened, tell the clients and close the journal.
        node.shutdown();
        if let Err(e) = driver.flush(&mut node) {
            debug!("final flush: {e}");
        }
        let elapsed = started.elapsed();
        driver.refresh_stats(&node);
        driver.file_stats.running = false;
        if let Err(e) = driver.file.write(&driver.file_stats) {
            warn!("cannot write the stats file: {e}");
        }
        (result, node.close(), driver.file_stats, elapsed)
    });
    drop(lock);
    result?;
    closed?;
    Ok(ServeSummary { stats, elapsed })
}

/// With a key, tokens must name `local` (the bound address) and
/// [`DEFAULT_PROTOCOL_ID`](lockgrid_protocol::token::DEFAULT_PROTOCOL_ID);
/// without one, the log says loudly that anyone may connect.
fn secure(
    node: &mut ServeNode,
    key: Option<&lockgrid_protocol::PrivateKey>,
    local: SocketAddr,
    unix_secs_at_zero: u64,
) -> Result<(), ServeError> {
    let Some(key) = key else {
        warn!("no --key: connections are unauthenticated and unencrypted; anyone who can reach {local} can connect and read every view, and a client's name (its Hello token) is its unchecked claim to an entity: anyone who knows a name can claim it (use a key outside development)");
        return Ok(());
    };
    let id = lockgrid_protocol::token::DEFAULT_PROTOCOL_ID;
    let security =
        lockgrid_protocol::ServerSecurity::new(key.clone(), id, vec![local], unix_secs_at_zero);
    node.set_security(security)?;
    if local.ip().is_unspecified() {
        warn!("--key with a wildcard address: tokens must name {local} itself; bind the address clients reach");
    }
    info!(addr = %local, "connect tokens required; packets sealed");
    Ok(())
}

/// Refuses options no server can run with.
pub(crate) fn check_options(opts: &ServeOptions) -> Result<(), ServeError> {
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
        .map_err(|e| ServeError::Options(format!("world config: {e}")))
}

/// Refuses, before it is built, a world that would reserve more memory
/// than the limit: the journal's world when the data folder has one (an
/// unreadable journal is left for the node to report), else the options'.
fn check_memory(opts: &ServeOptions) -> Result<(), ServeError> {
    let journal = crate::store::journal_path(&opts.data_dir);
    let world = match journal.exists() {
        true => match crate::journal::JournalReader::open(&journal) {
            Ok(reader) => *reader.config(),
            Err(_) => return Ok(()),
        },
        false => opts.world,
    };
    check_memory_for(&world, opts).map_err(ServeError::Options)
}

/// Refuses a world that, with a connection for each of `--max-clients`,
/// would reserve more memory than the limit (`--max-memory`, else the
/// machine's). Shared by the UDP and the cluster drivers.
pub(crate) fn check_memory_for(world: &Config, opts: &ServeOptions) -> Result<(), String> {
    let limit = opts
        .max_memory
        .map_or_else(MemoryLimit::default_for_machine, MemoryLimit::given);
    // Every client's connection reserves its share when it joins.
    let per_client = Server::<SocketAddr>::reserved_per_connection(
        &server_config(opts, 0),
        &WorldParams::from(world),
    );
    limit
        .check_serving(world, opts.max_clients as u64, per_client)
        .map_err(|e| e.to_string())
}

/// Refuses more NPCs than the world (or the ids below the clients') holds.
pub(crate) fn check_npcs(opts: &ServeOptions, world: &Config) -> Result<(), String> {
    if u64::from(opts.npcs) >= CLIENT_ID_BASE || opts.npcs > world.max_entities {
        return Err(format!(
            "--npcs {} exceeds the world's max_entities {}",
            opts.npcs, world.max_entities
        ));
    }
    Ok(())
}

/// The protocol server's configuration for `opts`, its connection ids
/// drawn from `conn_id_seed`.
pub(crate) fn server_config(opts: &ServeOptions, conn_id_seed: u64) -> ServerConfig {
    ServerConfig {
        max_connections: opts.max_clients,
        tick_interval: Duration::from_micros(1_000_000 / u64::from(opts.tick_rate)),
        idle_timeout: opts.client_timeout,
        conn_id_seed,
        budget_bytes_per_sec: opts.budget,
        ..ServerConfig::default()
    }
}

/// A per-process seed for connection ids (not reproducible on purpose).
fn fresh_seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    rules::mix(t ^ u64::from(std::process::id()).rotate_left(32))
}

/// The socket and the clock around a node.
struct Driver {
    socket: UdpSocket,
    /// Datagrams leave and arrive in batches (one system call for many).
    outbox: udp_batch::Outbox,
    inbox: udp_batch::Inbox,
    nonblocking: bool,
    clock: Clock,
    times: TickTimes,
    overruns: u64,
    /// The node's counters as the metrics saw them the last two ticks.
    readings: crate::node::StatsReadings,
    /// The stats file, and what it shows (refreshed in place).
    file: StatsFile,
    file_counters: crate::node::NodeStats,
    /// What the system dropped at the socket, for the stats file.
    drops: socket_buffers::Drops,
    file_stats: ServeStats,
}

impl Driver {
    fn run(
        &mut self,
        node: &mut ServeNode,
        opts: &ServeOptions,
        interval: Duration,
        stop: &AtomicBool,
    ) -> Result<(), ServeError> {
        let mut buf = vec![0u8; MAX_MTU + 1];
        let start = self.clock.now();
        let stop_at = opts.stop_after.map(|d| start + d);
        let mut next_stats = start + Duration::from_secs(1);
        let mut last_overrun_log = start;
        let mut overruns_unlogged = 0u64;
        let mut status_in = 10u32;
        let mut ticks_run = 0u64;
        loop {
            if stop.load(Ordering::Relaxed) {
                info!("interrupted: stopping after tick {}", node.world().tick());
                return Ok(());
            }
            if opts.stop_after_ticks.is_some_and(|n| ticks_run >= n)
                || stop_at.is_some_and(|t| self.clock.now() >= t)
            {
                return Ok(());
            }
            self.receive(node, &mut buf)?;
            let began = self.clock.now();
            if began >= node.poll_timeout() && node.handle_timeout(began)?.is_some() {
                ticks_run += 1;
                self.flush(node)?;
                let took = self.clock.now() - began;
                self.times.record(took);
                let (before, now) = self.readings.read(|s| node.stats_into(s));
                let entities = node.world().len();
                opts.metrics
                    .record_tick(took, took > interval, before, now, entities);
                if took > interval {
                    self.overruns += 1;
                    overruns_unlogged += 1;
                    if self.clock.now() - last_overrun_log >= Duration::from_secs(1) {
                        warn!(
                            tick = node.world().tick(),
                            took_us = took.as_micros() as u64,
                            "{overruns_unlogged} tick(s) overran the {} us interval",
                            interval.as_micros()
                        );
                        overruns_unlogged = 0;
                        last_overrun_log = self.clock.now();
                    }
                }
            }
            if self.clock.now() >= next_stats {
                next_stats = next_stats + Duration::from_secs(1);
                self.refresh_stats(node);
                let stats = &self.file_stats;
                if let Some(drops) = stats.socket_drops {
                    opts.metrics.record_socket_drops(drops);
                }
                if let Err(e) = self.file.write(stats) {
                    debug!("cannot write the stats file: {e}");
                }
                status_in = status_in.saturating_sub(1);
                if status_in == 0 {
                    status_in = 10;
                    info!(
                        tick = stats.tick,
                        clients = stats.clients,
                        tick_p50_us = stats.tick_p50_us,
                        tick_p99_us = stats.tick_p99_us,
                        overruns = stats.overruns,
                        refused = stats.refused.values().sum::<u64>(),
                        snapshot_failures = stats.snapshot_failures,
                        socket_drops = stats.socket_drops,
                        "status"
                    );
                }
            }
        }
    }

    /// Waits for the first datagram until the node's next deadline (at most
    /// 50 ms, so a stop is noticed), then hands over what is queued.
    fn receive(&mut self, node: &mut ServeNode, buf: &mut [u8]) -> Result<(), ServeError> {
        let now = self.clock.now();
        let wait = node
            .poll_timeout()
            .saturating_duration_since(now)
            .min(Duration::from_millis(50));
        let block = wait.checked_sub(SLACK).filter(|d| !d.is_zero());
        match block {
            Some(d) => {
                self.set_nonblocking(false)?;
                self.socket
                    .set_read_timeout(Some(d))
                    .map_err(ServeError::Socket)?;
            }
            None => self.set_nonblocking(true)?,
        }
        // The first datagram is waited for; what is queued behind it is
        // taken in batches, up to about 1024 datagrams.
        match self.socket.recv_from(buf) {
            Ok((n, from)) => node.handle_datagram(self.clock.now(), from, &buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                if block.is_none() && !wait.is_zero() {
                    std::thread::sleep(wait.min(Duration::from_micros(200)));
                }
                return Ok(());
            }
            // ICMP port unreachable from a vanished client shows up
            // here on some systems: not the server's problem.
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {}
            Err(e) => return Err(ServeError::Socket(e)),
        }
        self.set_nonblocking(true)?;
        let mut taken = 1;
        for _ in 0..1024 / udp_batch::BATCH {
            let now = self.clock.now();
            match self.inbox.receive(&self.socket, |from, bytes| {
                node.handle_datagram(now, from, bytes)
            }) {
                Ok(0) => break,
                Ok(n) => taken += n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::Interrupted | io::ErrorKind::ConnectionReset
                    ) => {}
                Err(e) => return Err(ServeError::Socket(e)),
            }
            if taken >= 1024 {
                break;
            }
        }
        Ok(())
    }

    /// Switches the socket's mode when it differs (a system call saved per wait).
    fn set_nonblocking(&mut self, want: bool) -> Result<(), ServeError> {
        if self.nonblocking != want {
            self.socket
                .set_nonblocking(want)
                .map_err(ServeError::Socket)?;
            self.nonblocking = want;
        }
        Ok(())
    }

    /// Sends every datagram the node releases, in batches.
    fn flush(&mut self, node: &mut ServeNode) -> Result<(), ServeError> {
        // poll_transmit only fails for a buffer below the MTU, and each
        // slot is the largest MTU: treat a failure as a bug report, not a panic.
        while let Some(t) = node
            .poll_transmit(self.clock.now(), self.outbox.slot())
            .map_err(|e| ServeError::Options(format!("transmit buffer: {e}")))?
        {
            self.outbox.push(&self.socket, t.destination, t.len);
        }
        self.outbox.flush(&self.socket);
        Ok(())
    }

    /// Brings the stats file's contents up to now, in place (its refusal
    /// map holds every reason from the start, so nothing is allocated).
    fn refresh_stats(&mut self, node: &ServeNode) {
        node.stats_into(&mut self.file_counters);
        let n = &self.file_counters;
        let s = &mut self.file_stats;
        s.socket_drops = self.drops.read();
        s.running = true;
        s.tick = n.tick;
        s.ticks_run = n.ticks_run;
        s.tick_p50_us = self.times.quantile_us(500);
        s.tick_p99_us = self.times.quantile_us(990);
        s.tick_max_us = self.times.max_us();
        s.overruns = self.overruns;
        s.late_ticks = n.late_ticks;
        s.pool_grown = n.pool_grown;
        s.clients = n.clients;
        s.connections = n.connections;
        s.events = n.events;
        s.packets_in = n.packets_in;
        s.packets_out = n.packets_out;
        s.bytes_in = n.bytes_in;
        s.bytes_out = n.bytes_out;
        for count in s.refused.values_mut() {
            *count = 0;
        }
        for (r, &count) in &n.refused {
            match s.refused.get_mut(r.as_str()) {
                Some(c) => *c += count,
                None => {
                    s.refused.insert(r.as_str().to_owned(), count);
                }
            }
        }
        s.snapshots_written = n.snapshots_written;
        s.snapshot_failures = n.snapshot_failures;
        s.snapshot_error.clone_from(&n.snapshot_error);
        s.budget = n.budget;
    }
}
