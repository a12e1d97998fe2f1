//! The server node: one sans-IO state machine owning the world, the
//! protocol endpoint, the game rules and the storage.
//!
//! A [`Node`] opens no socket, reads no clock and starts no thread. A
//! driver feeds it what happens and carries out what it asks, quinn-proto
//! style:
//!
//! - [`handle_datagram`](Node::handle_datagram)`(now, from, bytes)` for every datagram received;
//! - [`handle_timeout`](Node::handle_timeout)`(now)` once `now` reaches
//!   [`poll_timeout`](Node::poll_timeout); it runs a tick when one is due
//!   ([`tick_due`](Node::tick_due)) and says so;
//! - [`poll_transmit`](Node::poll_transmit)`(now, buf)` until it returns
//!   `None`, after every `handle_timeout`, sending each datagram.
//!
//! `now` never goes backwards (an earlier one counts as the latest seen).
//!
//! A tick is: the rules' queued commands (from [`Rules::start`] and
//! [`Rules::left`]), the spawns of newly admitted clients, the rules'
//! [`server_commands`](Rules::server_commands), then the accepted client
//! input by entity id and in arrival order; [`World::step`]; append and
//! sync to the [`Storage`]; hand the events to the protocol endpoint. The
//! node releases datagrams only after a tick is durable, and stops
//! releasing them at the next received datagram: so every acknowledgement
//! a client sees covers input of durable ticks only, and a crash loses no
//! acknowledged input. A failed append or sync stops the node
//! ([`NodeError`]; nothing of that tick leaves); a failed snapshot is
//! counted in [`NodeStats`] and retried at the next snapshot tick.
//!
//! ```no_run
//! use std::net::{SocketAddr, UdpSocket};
//! use lockgrid_host::journal::SyncPolicy;
//! use lockgrid_host::node::{FileStorage, Node, NodeConfig};
//! use lockgrid_host::serve::DefaultRules;
//! use lockgrid_kernel::{Config, Fix};
//! use lockgrid_protocol::Instant;
//!
//! let epoch = std::time::Instant::now();
//! let now = || Instant::from_micros(epoch.elapsed().as_micros() as u64);
//! let storage = FileStorage::new("data".as_ref(), SyncPolicy::EveryTick, 4);
//! let rules = DefaultRules::new(Fix::from_num(200), 20, 0, 0);
//! let (mut node, _report) =
//!     Node::<SocketAddr, _, _>::open(now(), NodeConfig::default(), &Config::default(), rules, storage)?;
//! let socket = UdpSocket::bind("127.0.0.1:7777")?;
//! socket.set_nonblocking(true)?;
//! let (mut buf, mut out) = (vec![0u8; 2048], vec![0u8; 1200]);
//! loop {
//!     while let Ok((n, from)) = socket.recv_from(&mut buf) {
//!         node.handle_datagram(now(), from, &buf[..n]);
//!     }
//!     if now() >= node.poll_timeout() {
//!         node.handle_timeout(now())?;
//!         while let Some(t) = node.poll_transmit(now(), &mut out)? {
//!             socket.send_to(&out[..t.len], t.destination)?;
//!         }
//!     }
//!     std::thread::sleep(std::time::Duration::from_millis(1));
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod file_storage;
mod flood;
mod lockstep;
mod mem_storage;
mod restore;
mod rules;
mod stats;
mod storage;
#[cfg(test)]
mod tests;

use core::fmt;
use std::collections::BTreeMap;

use crate::threads::Threads;
use lockgrid_kernel::{
    Command, CommandKind, Config, EntityId, Event, Fork, Spawn, TickReport, World,
};
use lockgrid_protocol::{
    BufferTooSmall, ConnId, DisconnectReason, Instant, Server, ServerConfig, ServerEvent,
    ServerSecurity, Transmit, WorldParams,
};
use tracing::{debug, info, warn};

pub use file_storage::FileStorage;
pub use flood::MAX_TRACKED_ADDRS;
pub use mem_storage::{DiskFault, DiskOp, MemDiskStats, MemStorage};
pub use restore::{restore, RestoreReport};
pub use rules::{ClientHello, ClientInput, Refusal, Rules};
pub use stats::{BudgetSummary, NodeStats, StatsReadings};
pub use storage::{Opened, Storage, StorageError};

use flood::RateLimit;

/// Client entities get ids above this one by default; NPCs and other
/// server entities live below it.
pub const CLIENT_ID_BASE: EntityId = 1 << 32;

/// Entities of named clients (see [`name_entity`]) have ids from here up,
/// in a range of 2^47 ids: above the ids a node numbers its clients with
/// (cluster nodes use `CLIENT_ID_BASE + slot × 2^24 + n`, slots below
/// 2^10), below those `lockgrid token` mints.
pub const NAMED_ID_BASE: EntityId = CLIENT_ID_BASE + (1 << 40);

/// The entity of the client that says Hello with `name` (the Hello's token
/// bytes, without a key): the same on every node and in every run, since
/// it is a function of the name alone (FNV-1a, then a splitmix64 mix,
/// reduced to 2^47 ids above [`NAMED_ID_BASE`]). Two names share an entity
/// only by a hash collision, about one chance in 10^7 among ten thousand
/// names. An empty name has no entity: such a client gets a new one.
pub fn name_entity(name: &[u8]) -> Option<EntityId> {
    if name.is_empty() {
        return None;
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    let mut z = h.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    Some(NAMED_ID_BASE + (z & ((1 << 47) - 1)))
}

/// How a node runs.
#[derive(Clone, Copy, Debug)]
pub struct NodeConfig {
    /// The protocol endpoint's config. Its `tick_interval` is the node's,
    /// its `max_connections` the most clients, its `mtu` the largest
    /// datagram accepted.
    pub server: ServerConfig,
    /// Snapshot after every tick that is a multiple of this (0: never).
    pub snapshot_every: u64,
    /// Datagrams one address may send per second before the rest is dropped.
    pub max_packets_per_sec: u32,
    /// Client entities get ids from here up, skipping ids in use.
    pub first_client_id: EntityId,
    /// Threads that step the world, the node's own included (1: serial;
    /// see [`World::step_with`](lockgrid_kernel::World::step_with)).
    /// Events and digests are the same for every count.
    pub threads: usize,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            server: ServerConfig::default(),
            snapshot_every: 600,
            max_packets_per_sec: 1000,
            first_client_id: CLIENT_ID_BASE + 1,
            threads: 1,
        }
    }
}

/// Why a node could not open or had to stop.
#[derive(Debug)]
#[non_exhaustive]
pub enum NodeError {
    /// The configuration is unusable.
    Config(String),
    /// The storage failed; when it failed on a tick's append or sync,
    /// nothing of that tick was sent.
    Storage(StorageError),
    /// Re-running the journal gave another digest than the one journaled.
    Diverged {
        /// The first tick whose digests differ.
        tick: u64,
        /// The digest in the journal.
        journaled: u64,
        /// The digest the kernel computed now.
        replayed: u64,
    },
    /// The node stopped after an earlier error and does nothing more.
    Stopped,
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeError::Config(m) => f.write_str(m),
            NodeError::Storage(e) => write!(f, "storage: {e}"),
            NodeError::Diverged {
                tick,
                journaled,
                replayed,
            } => write!(
                f,
                "tick {tick} replays to digest {replayed:016x}, the journal says {journaled:016x}"
            ),
            NodeError::Stopped => f.write_str("the node stopped after an earlier error"),
        }
    }
}

impl std::error::Error for NodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NodeError::Storage(e) => Some(e),
            _ => None,
        }
    }
}

impl From<StorageError> for NodeError {
    fn from(e: StorageError) -> Self {
        NodeError::Storage(e)
    }
}

/// A connected client.
struct Session {
    conn: ConnId,
    /// Its entity has been alive in the world since it joined: when it is
    /// gone without this node despawning it, another node (or a rule) took
    /// it, and the connection ends.
    alive: bool,
}

/// The server node. `A` is the driver's address type (a `SocketAddr`, or
/// anything ordered in a simulation), `R` the game rules, `S` the storage.
pub struct Node<A, R, S> {
    config: NodeConfig,
    world: World,
    server: Server<A>,
    rules: R,
    storage: S,
    sessions: BTreeMap<EntityId, Session>,
    /// Commands from `start` and `left`, for the next tick.
    queued: Vec<Command>,
    /// Spawns of admitted clients, for the next tick.
    spawns: BTreeMap<EntityId, Spawn>,
    /// Accepted client commands, for the next tick.
    inputs: BTreeMap<EntityId, Vec<Command>>,
    /// Connections for an identity whose entity is still alive (left by a
    /// node that died, or held by a client on another node): its despawn
    /// is on its way, and the connection is accepted, with this spawn, once
    /// the entity is gone from the world.
    awaiting: BTreeMap<EntityId, (ConnId, Spawn)>,
    next_client: EntityId,
    limit: RateLimit<A>,
    next_tick: Instant,
    /// The latest `now` the protocol endpoint's timers were handled at.
    timers_at: Instant,
    /// The last call ran a tick and left the endpoint's timers to the next.
    timers_deferred: bool,
    /// Datagrams may leave: the last tick is durable and nothing arrived since.
    sending: bool,
    stopped: bool,
    stats: NodeStats,
    commands: Vec<Command>,
    events: Vec<Event>,
    scratch: Vec<Command>,
    /// The threads that step the world (`config.threads` of them), started
    /// once here and parked between ticks.
    threads: Threads,
}

impl<A, R, S> Node<A, R, S>
where
    A: Clone + Ord + fmt::Debug,
    R: Rules,
    S: Storage,
{
    /// Opens `storage` (a new journal for a world of `world`, or the
    /// journal's own world, recovered) and gets the node ready for its first
    /// tick, due one interval after `now`. The node starts its own
    /// `config.threads` threads.
    pub fn open(
        now: Instant,
        config: NodeConfig,
        world: &Config,
        rules: R,
        storage: S,
    ) -> Result<(Self, RestoreReport), NodeError> {
        let threads = Threads::new(config.threads);
        Self::open_on(now, config, world, rules, storage, threads)
    }

    /// [`Node::open`] stepping with `threads`, a pool its host made
    /// before the node, of `config.threads` threads: a host whose loop
    /// must start before the node exists (a cluster node's runtime, which
    /// joins the cluster first) runs it in [`Threads::run`] of that pool,
    /// so that the node's joins allocate nothing (see [`Node::threads`]).
    pub fn open_on(
        now: Instant,
        config: NodeConfig,
        world: &Config,
        mut rules: R,
        mut storage: S,
        threads: Threads,
    ) -> Result<(Self, RestoreReport), NodeError> {
        if threads.width() != config.threads.max(1) {
            return Err(NodeError::Config(format!(
                "a pool of {} threads for a node of {}",
                threads.width(),
                config.threads
            )));
        }
        world
            .validate()
            .map_err(|e| NodeError::Config(format!("world config: {e}")))?;
        if config.server.tick_interval.is_zero() {
            return Err(NodeError::Config(
                "the tick interval must be positive".into(),
            ));
        }
        let (mut world, report) = restore(&mut storage, world)?;
        world.reserve_width(config.threads);
        let mut server = Server::new(config.server, WorldParams::from(world.config()))
            .map_err(|e| NodeError::Config(format!("protocol: {e}")))?;
        if world.tick() > 0 {
            // Tell the endpoint where the ticks stand, so Welcomes announce
            // the right tick. No connection exists yet: nothing is sent.
            server
                .push_tick(now, world.tick(), world.digest(), &[])
                .map_err(|e| NodeError::Config(format!("protocol: {e}")))?;
        }
        let mut queued = Vec::new();
        rules.start(&world, &mut queued);
        let node = Node {
            next_tick: now + config.server.tick_interval,
            limit: RateLimit::new(now, config.max_packets_per_sec),
            next_client: config.first_client_id,
            config,
            world,
            server,
            rules,
            storage,
            sessions: BTreeMap::new(),
            queued,
            spawns: BTreeMap::new(),
            inputs: BTreeMap::new(),
            awaiting: BTreeMap::new(),
            timers_at: now,
            timers_deferred: false,
            sending: false,
            stopped: false,
            stats: NodeStats::default(),
            commands: Vec::new(),
            events: Vec::new(),
            scratch: Vec::new(),
            threads,
        };
        Ok((node, report))
    }

    /// Requires a connect token of every client from now on and seals
    /// every packet (see [`Server::set_security`]). Call it before the
    /// first datagram: a keyed client then acts for the entity its token
    /// names, and the rules see the token's claims.
    pub fn set_security(&mut self, security: ServerSecurity) -> Result<(), NodeError> {
        self.server
            .set_security(security)
            .map_err(|e| NodeError::Config(format!("security: {e}")))
    }

    /// The world after the last applied tick.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// The threads that step the world. A loop that calls
    /// [`handle_timeout`](Self::handle_timeout) inside
    /// [`Threads::run`] of a clone of these steps without allocating
    /// (see [`crate::threads`]); from any other thread it steps alike,
    /// only a join in 63 allocates.
    pub fn threads(&self) -> &Threads {
        &self.threads
    }

    /// The protocol endpoint (read-only: connections, their counters).
    pub fn server(&self) -> &Server<A> {
        &self.server
    }

    /// The game rules.
    pub fn rules(&self) -> &R {
        &self.rules
    }

    /// The storage.
    pub fn storage(&self) -> &S {
        &self.storage
    }

    /// The storage, to inspect or arrange faults in tests.
    pub fn storage_mut(&mut self) -> &mut S {
        &mut self.storage
    }

    /// The node's config.
    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    /// The counters now.
    pub fn stats(&self) -> NodeStats {
        let mut s = NodeStats::default();
        self.stats_into(&mut s);
        s
    }

    /// The counters now, written into `s` (see [`NodeStats::copy_from`]):
    /// what a driver reading them every tick calls, without allocating.
    pub fn stats_into(&self, s: &mut NodeStats) {
        s.copy_from(&self.stats);
        s.tick = self.world.tick();
        s.clients = self.sessions.len() as u64;
        // Datagrams dropped, from connections or from unknown senders that
        // started nothing, count as malformed, and commands for another
        // entity as spoofed; the protocol's own refusals of tokens and of
        // packets that are not what they claim are counted with the node's.
        // (Totals the server keeps: no connection is visited.)
        let server = self.server.stats();
        s.pool_grown = server.pool_grown;
        for (why, n) in [
            (
                Refusal::Malformed,
                server.unknown_dropped + server.packets_dropped,
            ),
            (Refusal::Spoofed, server.foreign_commands),
            (Refusal::Token, server.tokens_refused),
            (
                Refusal::Unauthentic,
                server.auth_failed + server.address_mismatch,
            ),
            (Refusal::Replayed, server.replayed),
        ] {
            if n > 0 {
                *s.refused.entry(why).or_insert(0) += n;
            }
        }
        s.budget = self.server.budget_totals().map(|t| BudgetSummary {
            bytes_per_sec: t.bytes_per_sec,
            bytes_per_client: s.bytes_out.checked_div(s.connections).unwrap_or(0),
            max_deficit: t.deficit,
            overrun_ticks: t.overrun_ticks,
            updates_sent: t.updates_sent,
            updates_deferred: t.updates_deferred,
            resets_sent: t.resets_sent,
            updates_superseded: t.updates_superseded,
            stale_subjects: u64::from(t.stale_now),
            max_staleness: t.max_staleness,
        });
    }

    /// The events of the last tick, in contract order (empty before the first).
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The entities of connected clients.
    pub fn clients(&self) -> impl Iterator<Item = EntityId> + '_ {
        self.sessions.keys().copied()
    }

    /// Addresses the flood limit tracks now (bounded by [`MAX_TRACKED_ADDRS`]).
    pub fn tracked_addresses(&self) -> usize {
        self.limit.tracked()
    }

    /// When the next tick is due.
    pub fn tick_due(&self) -> Instant {
        self.next_tick
    }

    /// Whether the node stopped after a storage failure.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called:
    /// the next tick or an earlier protocol timer.
    pub fn poll_timeout(&self) -> Instant {
        // A protocol timer already handled stays pending until the next
        // send (which waits for the tick): it is no reason to wake earlier.
        match self.server.poll_timeout() {
            Some(t) if t > self.timers_at => t.min(self.next_tick),
            _ => self.next_tick,
        }
    }

    /// Processes one received datagram.
    pub fn handle_datagram(&mut self, now: Instant, from: A, bytes: &[u8]) {
        if self.stopped {
            return;
        }
        self.stats.packets_in += 1;
        self.stats.bytes_in += bytes.len() as u64;
        if !self.limit.allow(now, &from) {
            self.refuse(Refusal::Flood, 1);
            return;
        }
        if bytes.len() > self.config.server.mtu {
            self.refuse(Refusal::Oversized, 1);
            return;
        }
        self.server.handle_datagram(now, from, bytes);
        // Whatever this datagram carried is not durable yet; an
        // acknowledgement of it must wait for the next tick.
        self.sending = false;
        self.drain_events(now);
    }

    /// Acts on the protocol's timers and runs the tick when it is due;
    /// returns the tick's report when one ran. After it, drain
    /// [`poll_transmit`](Self::poll_transmit).
    pub fn handle_timeout(&mut self, now: Instant) -> Result<Option<TickReport>, NodeError> {
        if self.stopped {
            return Err(NodeError::Stopped);
        }
        // A call that runs a tick leaves the endpoint's timers to the next
        // call, right after the tick's datagrams leave: those carry every
        // acknowledgement that came due, so most connections that were due
        // then are due no more, where handling them first visited each for
        // nothing (about 0.3 ms of a 2 000-client tick). Never twice in a
        // row, so that a node running late still handles them.
        let defer = now >= self.next_tick && !self.timers_deferred;
        if !defer && self.server.poll_timeout().is_some_and(|t| t <= now) {
            self.server.handle_timeout(now);
            self.timers_at = self.timers_at.max(now);
        }
        self.timers_deferred = defer;
        self.drain_events(now);
        if now < self.next_tick {
            return Ok(None);
        }
        let interval = self.config.server.tick_interval;
        let late = now.saturating_duration_since(self.next_tick);
        if late > interval {
            self.stats.late_ticks += 1;
        }
        if late > interval * 10 {
            warn!(
                behind_ms = late.as_millis() as u64,
                "the node is {} tick slots behind; resuming the schedule from now (no tick is skipped, the world just runs late)",
                late.as_micros() / interval.as_micros().max(1)
            );
            self.next_tick = now;
        }
        self.next_tick = self.next_tick + interval;
        match self.tick(now) {
            Ok(report) => Ok(Some(report)),
            Err(e) => {
                self.stopped = true;
                self.sending = false;
                Err(e)
            }
        }
    }

    /// The next datagram to send, written into `buf` (at least the MTU
    /// long); `None` when nothing may leave now.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<Transmit<A>>, BufferTooSmall> {
        if !self.sending {
            return Ok(None);
        }
        match self.server.poll_transmit(now, buf)? {
            Some(t) => {
                self.stats.packets_out += 1;
                self.stats.bytes_out += t.len as u64;
                Ok(Some(t))
            }
            None => {
                self.sending = false;
                Ok(None)
            }
        }
    }

    /// Says goodbye to every client (their entities stay in the world;
    /// the rules' [`start`](Rules::start) of the next open deals with
    /// them). Drain [`poll_transmit`](Self::poll_transmit) after it.
    pub fn shutdown(&mut self) {
        let conns: Vec<ConnId> = self.server.connections().collect();
        for conn in conns {
            let _ = self.server.reject(conn, DisconnectReason::ShuttingDown);
        }
        self.sessions.clear();
        self.awaiting.clear();
        // Every applied tick is durable; only Disconnects are queued.
        self.sending = !self.stopped;
    }

    /// Makes everything durable and closes the storage.
    pub fn close(&mut self) -> Result<(), NodeError> {
        Ok(self.storage.close()?)
    }

    /// Gives the storage back (after a simulated crash, say).
    pub fn into_storage(self) -> S {
        self.storage
    }

    fn refuse(&mut self, why: Refusal, n: u64) {
        if n > 0 {
            *self.stats.refused.entry(why).or_insert(0) += n;
        }
    }

    fn drain_events(&mut self, now: Instant) {
        while let Some(ev) = self.server.poll_event() {
            match ev {
                ServerEvent::Connecting { conn, from, token } => {
                    self.on_connect(conn, &from, &token);
                }
                ServerEvent::Input {
                    conn, entity, seq, ..
                } => self.on_input(now, conn, entity, seq),
                ServerEvent::Disconnected {
                    conn,
                    entity,
                    reason,
                } => self.on_disconnect(conn, entity, reason),
            }
        }
    }

    fn on_connect(&mut self, conn: ConnId, from: &A, token: &[u8]) {
        if self.sessions.len() + self.awaiting.len() >= self.config.server.max_connections {
            self.refuse(Refusal::Full, 1);
            let _ = self.server.reject(conn, DisconnectReason::ServerFull);
            return;
        }
        // With a key the protocol has opened the client's connect token;
        // its claims name the entity and carry the backend's user data.
        let claims = self.server.token_claims(conn).cloned();
        let hello = ClientHello::new(token, claims.as_ref());
        if let Err(why) = self.rules.admit(&self.world, &hello) {
            debug!(%conn, ?from, reason = why.as_str(), "connection refused");
            self.refuse(why, 1);
            let _ = self.server.reject(conn, DisconnectReason::TokenRejected);
            return;
        }
        // Held by a client of this node (connected, joining or taking over).
        let held = |node: &Self, id: EntityId| {
            node.sessions.contains_key(&id)
                || node.spawns.contains_key(&id)
                || node.awaiting.contains_key(&id)
        };
        let busy = |node: &Self, id: EntityId| {
            node.world.entity(id).is_some()
                || held(node, id)
                || node.queued.iter().any(|c| c.entity() == id)
        };
        // A client with an identity — a keyed client its token's client id,
        // an unkeyed one the entity of its name — acts for that entity and
        // for no other: an NPC's id, or one a client of this node holds, is
        // refused rather than swapped for a free one.
        let identity = match hello.claims {
            Some(claims) => Some(claims.client_id),
            None => name_entity(token),
        };
        let id = match identity {
            Some(id) => {
                if id < self.config.first_client_id || held(self, id) {
                    warn!(%conn, ?from, entity = id, "the client's entity is an NPC's or held by another client of this node");
                    self.refuse(Refusal::Token, 1);
                    let _ = self.server.reject(conn, DisconnectReason::TokenRejected);
                    return;
                }
                id
            }
            // The next free id: not alive, not connected, not being despawned.
            None => {
                let mut id = self.next_client;
                while busy(self, id) {
                    id = id.saturating_add(1);
                }
                self.next_client = id.saturating_add(1);
                id
            }
        };
        let mut spawn = self.rules.spawn(&self.world, id, &hello);
        // The entity is the node's choice, whatever the rules wrote.
        spawn.id = id;
        let despawning = self
            .queued
            .iter()
            .any(|c| matches!(c, Command::Despawn { id: d } if *d == id));
        if self.world.entity(id).is_some() || despawning {
            // The identity's entity is alive with no client here (its node
            // died, or its client is on another node): the client takes it
            // back. The protocol starts a connection from an empty view, so
            // the entity is despawned first and spawned again once gone;
            // the client's view then starts with Enter events. A client of
            // another node that held it sees its entity go and is told
            // `kicked` there.
            if !despawning {
                self.queued.push(Command::Despawn { id });
            }
            self.awaiting.insert(id, (conn, spawn));
            info!(%conn, ?from, entity = id, "client takes its entity back: despawned, then spawned again");
            return;
        }
        if self.accept_spawn(conn, spawn) {
            info!(%conn, ?from, entity = id, "client joined");
        }
    }

    /// Accepts a connection for `spawn.id`, spawned in the next tick.
    fn accept_spawn(&mut self, conn: ConnId, spawn: Spawn) -> bool {
        let id = spawn.id;
        if let Err(e) = self.server.accept(conn, &spawn, self.rules.client_limits()) {
            warn!(%conn, "cannot accept: {e}");
            self.forget(id, DisconnectReason::Closed);
            return false;
        }
        self.spawns.insert(id, spawn);
        self.sessions.insert(id, Session { conn, alive: false });
        self.stats.connections += 1;
        true
    }

    /// Tells the rules a client whose entity this node will not despawn
    /// (it never spawned for this client, or another took it) has gone;
    /// what they push for other entities is queued.
    fn forget(&mut self, entity: EntityId, reason: DisconnectReason) {
        self.scratch.clear();
        self.rules
            .left(&self.world, entity, reason, &mut self.scratch);
        self.queued
            .extend(self.scratch.drain(..).filter(|c| c.entity() != entity));
    }

    /// The input [`ServerEvent::Input`] announced: its commands are the
    /// server's [`input_commands`](Server::input_commands), read one at a
    /// time (a copy each) since the server is also told of refusals.
    fn on_input(&mut self, now: Instant, conn: ConnId, entity: EntityId, seq: u64) {
        if self.sessions.get(&entity).is_none_or(|s| s.conn != conn) {
            return;
        }
        let tick = self.world.tick() + 1;
        for index in 0..self.server.input_commands().len() {
            let Some(&cmd) = self.server.input_commands().get(index) else {
                break;
            };
            self.scratch.clear();
            match self.rules.check_input(
                &self.world,
                &ClientInput::new(entity, tick, now, &cmd),
                &mut self.scratch,
            ) {
                Ok(()) => self
                    .inputs
                    .entry(entity)
                    .or_default()
                    .extend_from_slice(&self.scratch),
                Err(why) => {
                    debug!(entity, reason = why.as_str(), "input refused");
                    self.refuse(why, 1);
                    // The client hears which command and why.
                    let _ = self.server.refuse_input(conn, seq, index, why.told());
                }
            }
        }
    }

    fn on_disconnect(&mut self, conn: ConnId, entity: Option<EntityId>, reason: DisconnectReason) {
        debug!(%conn, ?entity, ?reason, "disconnected");
        let Some(e) = entity else {
            // A client that was waiting to take its entity back.
            let waiting = self.awaiting.iter().find(|(_, (c, _))| *c == conn);
            if let Some(id) = waiting.map(|(id, _)| *id) {
                self.awaiting.remove(&id);
                self.forget(id, reason);
            }
            return;
        };
        if self.sessions.get(&e).is_none_or(|s| s.conn != conn) {
            return;
        }
        self.sessions.remove(&e);
        self.inputs.remove(&e);
        let unspawned = self.spawns.remove(&e).is_some();
        self.scratch.clear();
        self.rules.left(&self.world, e, reason, &mut self.scratch);
        for c in self.scratch.drain(..) {
            if !(unspawned && c.entity() == e) {
                self.queued.push(c);
            }
        }
        info!(%conn, entity = e, ?reason, "client left");
    }

    /// Gathers, steps, journals, and hands the tick to the protocol.
    fn tick(&mut self, now: Instant) -> Result<TickReport, NodeError> {
        let tick = self.world.tick() + 1;
        self.commands.clear();
        self.commands.append(&mut self.queued);
        self.commands.extend(
            std::mem::take(&mut self.spawns)
                .into_values()
                .map(Command::Spawn),
        );
        self.rules
            .server_commands(&self.world, tick, &mut self.commands);
        // Drained, not taken: each client's vector keeps its room for the
        // next tick (entries go when the client leaves).
        for moves in self.inputs.values_mut() {
            self.commands.append(moves);
        }
        self.events.clear();
        let report = self
            .world
            .step_with(&self.commands, &mut self.events, &self.threads);
        // Durable before anything about the tick goes out. The tick is
        // routed and encoded while the storage writes: that sends nothing
        // (the driver drains poll_transmit after this returns), and a
        // failed sync stops the node, which then sends nothing.
        self.storage
            .append(report.tick, &self.commands, report.digest)?;
        self.storage.start_sync()?;
        self.release(now, &report);
        self.storage.sync()?;
        self.stats.ticks_run += 1;
        self.stats.events += report.events;
        self.stats.count_kinds(&self.events);
        let every = self.config.snapshot_every;
        if every > 0 && report.tick.is_multiple_of(every) {
            self.snapshot();
        }
        Ok(report)
    }

    /// Hands a durable tick's events to the protocol and lets
    /// [`poll_transmit`](Self::poll_transmit) send; a client whose entity
    /// could not spawn (the world is full) is turned away.
    fn release(&mut self, now: Instant, report: &TickReport) {
        let mut unspawned = Vec::new();
        for e in &self.events {
            let Event::Rejected {
                entity,
                command,
                reason,
            } = e
            else {
                break;
            };
            match self.sessions.get(entity) {
                // (A session whose entity is alive already is not concerned:
                // another node spawned the same entity again, too late.)
                Some(s) if *command == CommandKind::Spawn && !s.alive => {
                    warn!(
                        entity,
                        reason = reason.as_str(),
                        "client entity could not spawn"
                    );
                    unspawned.push((*entity, s.conn));
                }
                _ => debug!(
                    entity,
                    command = command.as_str(),
                    reason = reason.as_str(),
                    "kernel rejected"
                ),
            }
        }
        // With a budget, subjects near a client's entity are updated first.
        let world = &self.world;
        if let Err(e) =
            self.server
                .push_tick_located(now, report.tick, report.digest, &self.events, |id| {
                    world.entity(id).map(|e| e.pos)
                })
        {
            // The kernel's order is the contract; this would be a kernel bug.
            warn!(tick = report.tick, "protocol refused the tick: {e}");
        }
        for (entity, conn) in unspawned {
            self.sessions.remove(&entity);
            self.inputs.remove(&entity);
            self.refuse(Refusal::Full, 1);
            let _ = self.server.reject(conn, DisconnectReason::ServerFull);
            // The rules forget the client; its entity never existed.
            self.forget(entity, DisconnectReason::ServerFull);
        }
        // A client's entity gone without this node despawning it: another
        // node's client with the same identity took it over.
        let mut taken = Vec::new();
        for (&id, s) in &mut self.sessions {
            if self.world.entity(id).is_some() {
                s.alive = true;
            } else if s.alive {
                taken.push((id, s.conn));
            }
        }
        for (entity, conn) in taken {
            info!(%conn, entity, "the client's entity was taken over by a client of another node: connection closed");
            self.sessions.remove(&entity);
            self.inputs.remove(&entity);
            let _ = self.server.reject(conn, DisconnectReason::Kicked);
            self.forget(entity, DisconnectReason::Kicked);
        }
        // Clients taking their entity back, once it is gone from the world.
        let ready: Vec<EntityId> = self
            .awaiting
            .keys()
            .copied()
            .filter(|&id| {
                self.world.entity(id).is_none() && !self.queued.iter().any(|c| c.entity() == id)
            })
            .collect();
        for id in ready {
            if let Some((conn, spawn)) = self.awaiting.remove(&id) {
                if self.accept_spawn(conn, spawn) {
                    info!(%conn, entity = id, "client joined, taking its entity back");
                }
            }
        }
        self.sending = true;
    }

    /// Writes a snapshot of the world; a failure is logged and counted, and
    /// the next snapshot tick tries again: snapshots are a cache, the
    /// journal alone is the record.
    fn snapshot(&mut self) {
        match self.storage.write_snapshot(&self.world.snapshot()) {
            Ok(()) => {
                if self.stats.snapshot_error.take().is_some() {
                    info!(tick = self.world.tick(), "snapshots are written again");
                }
                self.stats.snapshots_written += 1;
            }
            Err(e) => {
                warn!(
                    tick = self.world.tick(),
                    "cannot write a snapshot ({e}); serving on, the next snapshot tick tries again"
                );
                self.stats.snapshot_failures += 1;
                self.stats.snapshot_error = Some(e.to_string());
            }
        }
    }
}
