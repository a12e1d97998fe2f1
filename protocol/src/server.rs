//! The server endpoint: many connections, one per client address.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::fmt;
use core::mem::size_of;

use lockgrid_kernel::{Command, EntityId, Event, Pos, Spawn, MAX_ENTITIES};

use crate::ack::{Fate, Receipt, RecvTracker, Rtt, SentLog};
use crate::budget::{membership_bytes, BudgetStats, Pacer, PacerScratch, TRACK_BYTES};
use crate::config::{InvalidConfig, ServerConfig, ServerSecurity, TICK_BATCH_OVERHEAD};
use crate::error::BufferTooSmall;
use crate::frame::{
    write_refused, ClientLimits, Frame, InputEntry, InputScratch, Welcome, WorldParams,
    MAX_COMMANDS_PER_INPUT,
};
use crate::packet::{peek_version, Header, Parsed, HEADER_LEN, MIN_INITIAL_LEN, VERSION};
use crate::reason::DisconnectReason;
use crate::refusal::{InputRefusal, RefusedInput, MAX_REFUSALS_PER_FRAME};
use crate::seal::{open_packet, readable, seal_packet, PacketKey, SEAL_OVERHEAD};
use crate::time::Instant;
use crate::timers::{TimerSlot, Timers};
use crate::token::{open_hello_token, peek_hello_token, TokenClaims, TokenError};
use crate::used_tokens::UsedTokens;
use crate::view::{Scratch, Seen, View};
use crate::wire::Writer;
use crate::Transmit;
use backlog::{Backlog, Blocks, Split, FIRST_PARTS};
use conns::Conns;

mod backlog;
mod conns;

/// A connection's id, as carried in every packet header after the Welcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u32);

impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn#{:08x}", self.0)
    }
}

/// What the server endpoint tells its host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerEvent<A> {
    /// A client said Hello with the right version. Check its token, then call
    /// [`Server::accept`] (and spawn its entity) or [`Server::reject`].
    /// A server with a key has already checked the connect token: its
    /// client id and user data are in [`Server::token_claims`], and the
    /// connection may be accepted only as that client id.
    Connecting {
        /// The new connection.
        conn: ConnId,
        /// Where it came from.
        from: A,
        /// The Hello's token, for the host's check (with a key, the sealed
        /// Hello token, already checked).
        token: Vec<u8>,
    },
    /// One input of a client, exactly once and in tick order per connection.
    /// Its commands, in the client's order, are read with
    /// [`Server::input_commands`] until the next [`Server::poll_event`]:
    /// the server keeps them in buffers it reuses, so delivering inputs
    /// allocates nothing in steady state.
    /// Every command names the connection's own entity: an input with a
    /// command naming another entity is refused as a whole (each of its
    /// commands [`InputRefusal::NotYours`], told to the client), counted in
    /// [`ConnStats::foreign_commands`] and not delivered.
    Input {
        /// The connection.
        conn: ConnId,
        /// The connection's entity, which every command names.
        entity: EntityId,
        /// The input's sequence number: refuse one of its commands with
        /// [`Server::refuse_input`] by this and the command's index.
        seq: u64,
        /// The tick the client meant the input for.
        tick: u64,
    },
    /// A connection ended (for any reason, including the host's own calls).
    /// Despawn its entity.
    Disconnected {
        /// The connection.
        conn: ConnId,
        /// Its entity, if it had been accepted.
        entity: Option<EntityId>,
        /// Why.
        reason: DisconnectReason,
    },
}

/// Counters for one connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConnStats {
    /// Datagrams sent.
    pub packets_sent: u64,
    /// Datagrams received and processed.
    pub packets_received: u64,
    /// Datagrams dropped: malformed, duplicated, too old or with a wrong connection id.
    pub packets_dropped: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Batch parts sent again after a loss.
    pub parts_retransmitted: u64,
    /// Inputs delivered to the host.
    pub inputs_delivered: u64,
    /// Commands that named another entity than the connection's, dropped.
    pub foreign_commands: u64,
    /// Refusals told to the client (each counted once, however often it
    /// was sent).
    pub refusals_told: u64,
    /// Refusals not told because [`MAX_QUEUED_REFUSALS`] were waiting.
    pub refusals_untold: u64,
    /// Sealed datagrams that failed authentication (altered, forged or
    /// sealed under another key), dropped silently.
    pub auth_failed: u64,
    /// Sealed datagrams whose packet number was already received or is
    /// older than the replay window, dropped before opening.
    pub replayed: u64,
}

/// Server-wide counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerStats {
    /// Datagrams from unknown addresses that started no connection.
    pub unknown_dropped: u64,
    /// Stateless Disconnect replies sent.
    pub stateless_replies: u64,
    /// Stateless replies dropped because the reply queue was full.
    pub stateless_dropped: u64,
    /// Hellos refused for their connect token (missing, invalid, expired,
    /// for another protocol id or server, or already used).
    pub tokens_refused: u64,
    /// Used tokens forgotten while still alive, because the table of used
    /// tokens was full ([`ServerSecurity::max_used_tokens`]).
    pub used_tokens_evicted: u64,
    /// Datagrams that named an open connection's id from another address
    /// than the connection's, dropped (no connection moves address).
    pub address_mismatch: u64,
    /// Sealed datagrams that failed authentication, over all connections.
    pub auth_failed: u64,
    /// Sealed datagrams whose packet number was already received or is
    /// older than the replay window, dropped before opening, over all
    /// connections (duplicated by the network or replayed by an attacker).
    pub replayed: u64,
    /// Datagrams dropped by connections (the sum of their
    /// [`ConnStats::packets_dropped`], closed connections included).
    pub packets_dropped: u64,
    /// Commands that named another entity than their connection's, over
    /// all connections (the sum of [`ConnStats::foreign_commands`]).
    pub foreign_commands: u64,
    /// Packet records, part blocks and pending ticks allocated after
    /// accept because their pools were empty: a burst of more in flight at
    /// once than the connections brought (8 of each a connection). Each
    /// stays in its pool, so this counts new high-water marks; a steady
    /// server keeps it still, and a rising one means ticks that allocate.
    pub pool_grown: u64,
}

/// Why [`Server::push_tick`] refused a tick; nothing was queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PushTickError {
    /// Ticks must be pushed one after another; this one was expected.
    TickOutOfOrder {
        /// The tick the server expected.
        expected: u64,
    },
    /// The events are not in the kernel's contract order.
    EventsOutOfOrder,
}

impl fmt::Display for PushTickError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushTickError::TickOutOfOrder { expected } => write!(f, "expected tick {expected}"),
            PushTickError::EventsOutOfOrder => f.write_str("events are not in contract order"),
        }
    }
}

impl core::error::Error for PushTickError {}

/// Why a host call about one connection failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConnError {
    /// No such connection (it may have closed meanwhile).
    UnknownConnection,
    /// The connection was already accepted.
    AlreadyAccepted,
    /// Another connection acts for this entity.
    EntityInUse,
    /// The connection's connect token names another entity: a client may
    /// act only for the entity its token names.
    NotTokenClient,
    /// No input has a command at that index (an input holds at most
    /// [`MAX_COMMANDS_PER_INPUT`] commands).
    NoSuchCommand,
}

impl fmt::Display for ConnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConnError::UnknownConnection => "unknown connection",
            ConnError::AlreadyAccepted => "connection already accepted",
            ConnError::EntityInUse => "entity already has a connection",
            ConnError::NotTokenClient => "entity is not the one the connect token names",
            ConnError::NoSuchCommand => "no input has a command at that index",
        })
    }
}

impl core::error::Error for ConnError {}

/// What connections reuse instead of allocating, shared by all of them:
/// the records of packets whose fate is known, emptied, and the blocks
/// that hold parts' payloads. Each accepted connection adds its share
/// ([`Spare::add_connection`]), so a server's steady ticks take from here
/// and give back, and allocate nothing.
#[derive(Debug, Default)]
struct Spare {
    sent: Vec<SentData>,
    /// Packet records made because `sent` was empty.
    sent_grown: u64,
    blocks: Blocks,
}

/// What each accepted connection brings: packet records and part blocks
/// to the shared pools, and room for pending ticks in its own backlog.
/// Eight of each hold ticks of a few parts each while earlier ticks'
/// packets are in flight, and the deeper backlog a lost packet makes.
const RECORDS_PER_CONNECTION: usize = 8;
const BLOCKS_PER_CONNECTION: usize = 8;
const TICKS_PER_CONNECTION: usize = 8;

/// Room a shadow view reserves on accept: the world's `max_view`, as far
/// as a kernel's view can hold that many ([`MAX_ENTITIES`]), so that no
/// view ever grows after its client joins. The host's memory check counts
/// it ([`Server::reserved_per_connection`]).
fn view_room(world: &WorldParams) -> usize {
    world.max_view.min(MAX_ENTITIES) as usize
}

/// Refusals a new packet record has room for: a client whose moves the
/// rules refuse hears of one or two a tick.
const FIRST_REFUSALS: usize = 4;

/// What a Welcome tells of the server besides the connection's own.
struct Told {
    world: WorldParams,
    tick_interval_us: u64,
    window: u32,
}

fn new_record() -> SentData {
    SentData {
        parts: Vec::with_capacity(FIRST_PARTS),
        refused: Vec::with_capacity(FIRST_REFUSALS),
        ..SentData::default()
    }
}

impl Spare {
    fn sent(&mut self) -> SentData {
        self.sent.pop().unwrap_or_else(|| {
            self.sent_grown += 1;
            new_record()
        })
    }

    /// A connection's share, added when its client is accepted.
    fn add_connection(&mut self) {
        self.sent.reserve(RECORDS_PER_CONNECTION);
        for _ in 0..RECORDS_PER_CONNECTION {
            self.sent.push(new_record());
        }
        self.blocks.add(BLOCKS_PER_CONNECTION);
    }

    /// Gives back what a connection that left had added, as far as it is free.
    fn remove_connection(&mut self) {
        let keep = self.sent.len().saturating_sub(RECORDS_PER_CONNECTION);
        self.sent.truncate(keep);
        self.blocks.remove(BLOCKS_PER_CONNECTION);
    }

    fn put_sent(&mut self, mut d: SentData) {
        d.parts.clear();
        d.refused.clear();
        self.sent.push(d);
    }
}

/// What an ack-eliciting packet carried, to act on its fate.
#[derive(Debug, Default)]
struct SentData {
    seq: u32,
    parts: Vec<(u64, u16)>,
    /// Refusals it told the client: sent again if the packet is lost.
    refused: Vec<RefusedInput>,
}

/// Most refusals a connection keeps waiting to be told; past it, new ones
/// are counted in [`ConnStats::refusals_untold`] and not told.
pub const MAX_QUEUED_REFUSALS: usize = 256;

struct Conn<A> {
    id: ConnId,
    addr: A,
    entity: Option<EntityId>,
    created: Instant,
    last_recv: Instant,
    next_seq: u32,
    recv: RecvTracker,
    ack_due: Option<Instant>,
    sent: SentLog<SentData>,
    rtt: Rtt,
    welcome_due: bool,
    welcome_tick: u64,
    pong_due: Option<u64>,
    next_input_seq: u64,
    last_input_tick: Option<u64>,
    /// Its entries only: the server's [`Server::staging`] is lent to it
    /// while a tick is encoded for it.
    shadow: View,
    /// What the connect token said, when the server has a key.
    claims: Option<TokenClaims>,
    keys: Option<ConnKeys>,
    /// The token and nonce of the Hello that opened the connection: a
    /// Hello from the same address with another token or nonce is a new
    /// client there.
    hello_token: Vec<u8>,
    hello_nonce: u64,
    /// The client entity's spawn and limits, told in the Welcome.
    spawn: Option<Spawn>,
    limits: ClientLimits,
    /// Refusals not yet carried by a packet, oldest first.
    refusals: VecDeque<RefusedInput>,
    backlog: Backlog,
    /// Whether the connection's id is in [`Server::ready`].
    ready: bool,
    /// The bandwidth budget and update priorities, when the server has a
    /// budget; made at the first tick after the connection is accepted.
    pacer: Option<Pacer>,
    stats: ConnStats,
    /// Its entry in the server's [`Timers`], kept at [`Conn::deadline`].
    timer: TimerSlot,
}

/// The server endpoint: accepts connections, delivers client inputs to the
/// host, and carries each tick's events to every client reliably.
///
/// Drive it like this, in this order, with `now` never going backwards:
/// 1. feed every received datagram to [`handle_datagram`](Self::handle_datagram);
/// 2. each tick, [`push_tick`](Self::push_tick) the kernel's events;
/// 3. drain [`poll_event`](Self::poll_event) and act on it;
/// 4. drain [`poll_transmit`](Self::poll_transmit) into the socket;
/// 5. sleep until [`poll_timeout`](Self::poll_timeout) or the next datagram or
///    tick, and call [`handle_timeout`](Self::handle_timeout) when it passes.
pub struct Server<A> {
    config: ServerConfig,
    world: WorldParams,
    now: Instant,
    conns: Conns<Conn<A>>,
    /// Every connection's [`Conn::deadline`], earliest first.
    timers: Timers,
    /// The connections [`handle_timeout`](Self::handle_timeout) visits
    /// (capacity kept between calls).
    due: Vec<u32>,
    by_addr: BTreeMap<A, u32>,
    by_entity: BTreeMap<EntityId, u32>,
    events: VecDeque<ServerEvent<A>>,
    /// The commands of the queued Input events.
    inbox: Inbox,
    stateless: VecDeque<Reply<A>>,
    last_tick: Option<u64>,
    id_counter: u64,
    /// Connections that may have something to send, in the order
    /// [`poll_transmit`](Self::poll_transmit) serves them: each at most
    /// once ([`Conn::ready`]), so that finding the next packet costs
    /// O(1) rather than a scan of every connection.
    ready: VecDeque<u32>,
    route: Vec<Event>,
    /// Where received Input frames are read (vectors kept between calls).
    input: InputScratch,
    rejected: Vec<(EntityId, usize)>,
    security: Option<Security>,
    /// Where sealed datagrams are opened (capacity kept between calls).
    scratch: Vec<u8>,
    /// Packet records and part blocks, shared by the connections.
    spare: Spare,
    /// The budget's working vectors, lent like `staging`.
    pacer_scratch: PacerScratch,
    /// Where a tick's parts are staged and merged into a shadow view, lent
    /// to each connection in turn: one buffer sized at construction, not
    /// one per connection.
    staging: Scratch,
    stats: ServerStats,
    /// Budget counters of closed connections, for [`Server::budget_totals`].
    retired_budget: BudgetStats,
}

/// The commands of Input events, kept apart from the events so that an
/// Input event owns no heap memory: these buffers are reused from tick to
/// tick.
struct Inbox {
    /// The commands of the queued Input events, one event's after another.
    queued: VecDeque<Command>,
    /// How many commands each queued Input event has in `queued`.
    lens: VecDeque<usize>,
    /// The commands of the Input event [`Server::poll_event`] returned last.
    current: Vec<Command>,
}

/// A Disconnect sent outside a connection's packet flow: stateless (in
/// clear, seq 0) or, for a closing connection with keys, sealed.
struct Reply<A> {
    to: A,
    conn_id: u32,
    reason: DisconnectReason,
    sealed: Option<(PacketKey, u32)>,
}

/// A connection's packet keys, when it began with a connect token.
struct ConnKeys {
    /// Seals what the server sends (the token's server-to-client key).
    send: PacketKey,
    /// Opens what the client sends (the token's client-to-server key).
    recv: PacketKey,
}

/// The server's key and its memory of used tokens.
struct Security {
    config: ServerSecurity,
    used: UsedTokens,
}

/// splitmix64: a bijective mixer, so seeded connection ids look random but
/// are reproducible.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl<A: Clone + Ord> Server<A> {
    /// A server for a world with parameters `world`.
    ///
    /// It accepts any Hello and hands its token to the host unchecked, and
    /// its packets travel in clear: for development on a trusted network.
    /// A server reachable by others uses [`with_security`](Self::with_security).
    pub fn new(config: ServerConfig, world: WorldParams) -> Result<Self, InvalidConfig> {
        config.validate()?;
        Ok(Server {
            config,
            world,
            now: Instant::ZERO,
            conns: Conns::new(),
            timers: Timers::default(),
            due: Vec::new(),
            by_addr: BTreeMap::new(),
            by_entity: BTreeMap::new(),
            events: VecDeque::new(),
            inbox: Inbox {
                queued: VecDeque::new(),
                lens: VecDeque::new(),
                current: Vec::with_capacity(MAX_COMMANDS_PER_INPUT),
            },
            stateless: VecDeque::new(),
            last_tick: None,
            id_counter: 0,
            ready: VecDeque::new(),
            route: Vec::new(),
            input: InputScratch::default(),
            rejected: Vec::new(),
            security: None,
            scratch: Vec::new(),
            // A part stages at most one item per byte of it, and no more
            // Leaves, Enters or Updates than a view holds.
            staging: Scratch::with_room(view_room(&world), view_room(&world).min(config.mtu)),
            spare: Spare {
                sent: Vec::new(),
                sent_grown: 0,
                blocks: Blocks::new(config.part_budget()),
            },
            pacer_scratch: match config.budget_bytes_per_sec {
                Some(_) => PacerScratch::with_room(view_room(&world)),
                None => PacerScratch::default(),
            },
            stats: ServerStats::default(),
            retired_budget: BudgetStats::default(),
        })
    }

    /// Bytes a connection reserves when its client is accepted (see
    /// *Memory taken on accept* in `docs/protocol.md`), for a server of
    /// `config` serving `world`, about: what a host multiplies by its
    /// most clients to bound a server's memory before it starts.
    pub fn reserved_per_connection(config: &ServerConfig, world: &WorldParams) -> u64 {
        let room = view_room(world);
        let budget = config.budget_bytes_per_sec.is_some();
        let record = size_of::<SentData>()
            + FIRST_PARTS * size_of::<(u64, u16)>()
            + FIRST_REFUSALS * size_of::<RefusedInput>();
        // A record in the shared pool, and room in the sent log's two queues.
        let in_flight = size_of::<SentData>() + size_of::<(u32, Instant)>();
        let bytes = Conns::<Conn<A>>::bytes_per_value()
            + room * size_of::<(EntityId, Seen)>()
            + Backlog::reserved_bytes(TICKS_PER_CONNECTION, if budget { room } else { 0 })
            + RECORDS_PER_CONNECTION * (record + 2 * in_flight)
            + BLOCKS_PER_CONNECTION * config.part_budget()
            + if budget { room * TRACK_BYTES } else { 0 };
        bytes as u64
    }

    /// A server that accepts only connect tokens minted under
    /// `security.private_key` for itself, and seals every packet after the
    /// Hello with the connection's keys. A Hello is refused (and counted in
    /// [`ServerStats::tokens_refused`]) with the reason the client hears:
    /// [`TokenMissing`](DisconnectReason::TokenMissing),
    /// [`TokenInvalid`](DisconnectReason::TokenInvalid),
    /// [`TokenWrongProtocol`](DisconnectReason::TokenWrongProtocol),
    /// [`TokenExpired`](DisconnectReason::TokenExpired),
    /// [`TokenWrongServer`](DisconnectReason::TokenWrongServer) or
    /// [`TokenReused`](DisconnectReason::TokenReused).
    pub fn with_security(
        config: ServerConfig,
        world: WorldParams,
        security: ServerSecurity,
    ) -> Result<Self, InvalidConfig> {
        let mut server = Self::new(config, world)?;
        server.set_security(security)?;
        Ok(server)
    }

    /// Turns security on for a server built with [`new`](Self::new), for
    /// a host that learns its address only after binding its socket. Only
    /// before the first connection: a connection never changes its keys.
    pub fn set_security(&mut self, security: ServerSecurity) -> Result<(), InvalidConfig> {
        security.validate()?;
        if !self.conns.is_empty() {
            return Err(InvalidConfig(
                "security must be set before the first connection",
            ));
        }
        self.security = Some(Security {
            used: UsedTokens::new(security.max_used_tokens),
            config: security,
        });
        Ok(())
    }

    /// Whether the server checks tokens and seals packets.
    pub fn is_secure(&self) -> bool {
        self.security.is_some()
    }

    /// What a connection's connect token said (client id, user data,
    /// expiry), when the server has a key: for the host's rules to decide.
    pub fn token_claims(&self, conn: ConnId) -> Option<&TokenClaims> {
        self.conns.get(&conn.0).and_then(|c| c.claims.as_ref())
    }

    /// Checks a Hello's token against the key, the clock, this server and
    /// the used-token table (a token opens one connection).
    fn check_token(
        &mut self,
        now: Instant,
        token: &[u8],
    ) -> Result<Option<TokenClaims>, DisconnectReason> {
        let Some(sec) = self.security.as_mut() else {
            return Ok(None);
        };
        if token.is_empty() {
            return Err(DisconnectReason::TokenMissing);
        }
        let now_unix = sec.config.unix_secs_at_zero + now.as_micros() / 1_000_000;
        // The readable fields first: cheap refusals before the AEAD runs.
        let header = peek_hello_token(token).map_err(|_| DisconnectReason::TokenInvalid)?;
        if header.protocol_id != sec.config.protocol_id {
            return Err(DisconnectReason::TokenWrongProtocol);
        }
        if header.expire_unix_secs <= now_unix {
            return Err(DisconnectReason::TokenExpired);
        }
        let claims = open_hello_token(&sec.config.private_key, token).map_err(|e| match e {
            TokenError::Forged
            | TokenError::WrongLength { .. }
            | TokenError::UnsupportedVersion(_)
            | TokenError::Invalid(_) => DisconnectReason::TokenInvalid,
        })?;
        if !claims
            .server_addresses
            .iter()
            .any(|a| sec.config.addresses.contains(a))
        {
            return Err(DisconnectReason::TokenWrongServer);
        }
        let evicted = sec
            .used
            .use_token(claims.tag, claims.expire_unix_secs, now_unix)
            .map_err(|_| DisconnectReason::TokenReused)?;
        self.stats.used_tokens_evicted += evicted;
        Ok(Some(claims))
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Server-wide counters.
    pub fn stats(&self) -> ServerStats {
        ServerStats {
            pool_grown: self.spare.sent_grown + self.spare.blocks.grown,
            ..self.stats
        }
    }

    /// A connection's counters.
    pub fn conn_stats(&self, conn: ConnId) -> Option<ConnStats> {
        self.conns.get(&conn.0).map(|c| c.stats)
    }

    /// A connection's bandwidth budget: deficit, Updates sent and
    /// deferred, staleness. `None` without a budget
    /// ([`ServerConfig::budget_bytes_per_sec`]), for an unknown connection,
    /// or before the connection's first tick.
    pub fn budget_stats(&self, conn: ConnId) -> Option<BudgetStats> {
        self.conns
            .get(&conn.0)
            .and_then(|c| c.pacer.as_ref())
            .map(Pacer::stats)
    }

    /// The bandwidth budget over every connection: Updates sent and
    /// deferred and overrun ticks since the server started (closed
    /// connections included); the largest deficit and staleness, and the
    /// stale subjects, of the connections open now. `None` without a budget.
    pub fn budget_totals(&self) -> Option<BudgetStats> {
        let bytes_per_sec = self.config.budget_bytes_per_sec?;
        let mut t = self.retired_budget;
        t.bytes_per_sec = bytes_per_sec;
        for p in self.conns.values().filter_map(|c| c.pacer.as_ref()) {
            t.absorb(&p.stats());
        }
        Some(t)
    }

    /// Keeps a closing connection's budget counters for the totals.
    fn retire_budget(&mut self, c: &Conn<A>) {
        if let Some(p) = &c.pacer {
            let s = BudgetStats {
                deficit: 0,
                stale_now: 0,
                max_staleness: 0,
                ..p.stats()
            };
            self.retired_budget.absorb(&s);
        }
    }

    /// The entity a connection acts for, once accepted.
    pub fn conn_entity(&self, conn: ConnId) -> Option<EntityId> {
        self.conns.get(&conn.0).and_then(|c| c.entity)
    }

    /// Open connections (accepted or awaiting the host), ascending.
    pub fn connections(&self) -> impl Iterator<Item = ConnId> + '_ {
        self.conns.keys().map(|&k| ConnId(k))
    }

    /// Ticks sent to `conn` but not yet acknowledged.
    pub fn unacked_ticks(&self, conn: ConnId) -> Option<usize> {
        self.conns.get(&conn.0).map(|c| c.backlog.ticks())
    }

    /// The last tick pushed.
    pub fn last_tick(&self) -> Option<u64> {
        self.last_tick
    }

    fn advance(&mut self, now: Instant) -> Instant {
        self.now = self.now.max(now);
        self.now
    }

    fn queue_stateless(
        &mut self,
        to: A,
        conn_id: u32,
        reason: DisconnectReason,
        trigger_len: usize,
    ) {
        // Never answer with more bytes than were received: no amplification.
        if trigger_len < HEADER_LEN + 2 {
            self.stats.unknown_dropped += 1;
            return;
        }
        if self.stateless.len() >= self.config.max_stateless_replies {
            self.stateless.pop_front();
            self.stats.stateless_dropped += 1;
        }
        self.stateless.push_back(Reply {
            to,
            conn_id,
            reason,
            sealed: None,
        });
    }

    fn new_conn_id(&mut self) -> u32 {
        loop {
            self.id_counter += 1;
            let id = mix(self.config.conn_id_seed ^ mix(self.id_counter)) as u32;
            if id != 0 && !self.conns.contains_key(&id) {
                return id;
            }
        }
    }

    /// Takes a removed connection out of the timers and the ready queue.
    fn forget(&mut self, c: &Conn<A>) {
        self.timers.close(c.timer);
        if c.ready {
            let id = c.id.0;
            self.ready.retain(|&r| r != id);
        }
    }

    /// Returns a removed connection's part blocks to the pool, and takes
    /// out of the pools what it added when accepted.
    fn give_back(&mut self, c: &mut Conn<A>) {
        c.backlog.clear(&mut self.spare.blocks);
        if c.entity.is_some() {
            self.spare.remove_connection();
        }
    }

    /// Ends a connection: the client gets a Disconnect, the host an event.
    fn close(&mut self, id: u32, reason: DisconnectReason) {
        let Some(mut c) = self.conns.remove(&id) else {
            return;
        };
        self.forget(&c);
        self.retire_budget(&c);
        self.by_addr.remove(&c.addr);
        if let Some(e) = c.entity {
            self.by_entity.remove(&e);
        }
        self.give_back(&mut c);
        if self.stateless.len() >= self.config.max_stateless_replies {
            self.stateless.pop_front();
            self.stats.stateless_dropped += 1;
        }
        // A connection with keys says goodbye sealed, with its next packet
        // number, so its client can believe it.
        let sealed = match &c.keys {
            Some(k) => match c.next_seq.checked_add(1) {
                Some(_) => Some((k.send.clone(), c.next_seq)),
                None => None,
            },
            None => None,
        };
        if c.keys.is_none() || sealed.is_some() {
            self.stateless.push_back(Reply {
                to: c.addr.clone(),
                conn_id: id,
                reason,
                sealed,
            });
        }
        self.events.push_back(ServerEvent::Disconnected {
            conn: ConnId(id),
            entity: c.entity,
            reason,
        });
    }

    /// Processes one received datagram.
    pub fn handle_datagram(&mut self, now: Instant, from: A, bytes: &[u8]) {
        let now = self.advance(now);
        if let Some(v) = peek_version(bytes) {
            if v != VERSION {
                self.queue_stateless(from, 0, DisconnectReason::VersionMismatch, bytes.len());
                return;
            }
        }
        let known = self.by_addr.get(&from).copied();
        let secure = self.security.is_some();
        if secure {
            // With keys, only a Hello travels in clear (connection id 0).
            if let Some((conn_id, seq)) = readable(bytes).filter(|r| r.0 != 0) {
                self.handle_sealed(now, known, conn_id, seq, bytes);
                return;
            }
        }
        let Ok(packet) = Parsed::decode(bytes, &mut self.input) else {
            match known.and_then(|id| self.conns.get_mut(&id)) {
                Some(c) => dropped(&mut c.stats, &mut self.stats),
                None => self.stats.unknown_dropped += 1,
            }
            return;
        };
        match known {
            // A client that restarted on the address of a connection still
            // held here: its Hello is not a retransmission of the old one
            // (packet numbers would collide and its inputs go astray), it
            // opens a new connection once its token checks out.
            Some(id) if self.is_other_hello(id, &packet) => {
                self.handle_unknown(now, from, &packet, bytes.len(), Some(id));
            }
            Some(id) if secure => self.handle_hello_again(id, &packet),
            Some(id) => self.handle_conn_packet(now, id, &packet),
            None => self.handle_unknown(now, from, &packet, bytes.len(), None),
        }
    }

    /// A sealed datagram: from its connection's address, new to the replay
    /// window and authentic, or dropped and counted.
    fn handle_sealed(
        &mut self,
        now: Instant,
        known: Option<u32>,
        conn_id: u32,
        seq: u32,
        bytes: &[u8],
    ) {
        let id = match known {
            Some(id) if id == conn_id => id,
            Some(id) => {
                if let Some(c) = self.conns.get_mut(&id) {
                    dropped(&mut c.stats, &mut self.stats);
                }
                return;
            }
            None => {
                if self.conns.contains_key(&conn_id) {
                    self.stats.address_mismatch += 1;
                } else {
                    self.stats.unknown_dropped += 1;
                }
                return;
            }
        };
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let Some(keys) = &c.keys else {
            dropped(&mut c.stats, &mut self.stats);
            return;
        };
        // The replay window is checked before the costlier open, and moved
        // only after the packet authenticated (in handle_conn_packet).
        if seq == 0 || c.recv.check(seq) != Receipt::New {
            c.stats.replayed += 1;
            dropped(&mut c.stats, &mut self.stats);
            self.stats.replayed += 1;
            return;
        }
        let mut scratch = core::mem::take(&mut self.scratch);
        if open_packet(&keys.recv, bytes, &mut scratch).is_err() {
            c.stats.auth_failed += 1;
            self.stats.auth_failed += 1;
        } else {
            match Parsed::decode(&scratch, &mut self.input) {
                Ok(packet) => self.handle_conn_packet(now, id, &packet),
                Err(_) => dropped(&mut c.stats, &mut self.stats),
            }
        }
        self.scratch = scratch;
    }

    /// A Hello in clear from a connection's address: the client has not
    /// heard the Welcome yet. Only the same token may ask for it again;
    /// nothing else in clear touches the connection.
    fn handle_hello_again(&mut self, id: u32, packet: &Parsed<'_>) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let same_token = packet.header.conn_id == 0
            && packet.frames().any(|f| match f {
                Frame::Hello { token, nonce, .. } => {
                    token == c.hello_token.as_slice() && nonce == c.hello_nonce
                }
                _ => false,
            });
        if same_token {
            c.welcome_due = c.entity.is_some();
            c.stats.packets_received += 1;
            wake(&mut self.ready, c);
        } else {
            dropped(&mut c.stats, &mut self.stats);
        }
    }

    /// Whether `packet` is a Hello (connection id 0) whose token or nonce
    /// differs from the one connection `id` began with: another client on
    /// its address, not the same client asking again.
    fn is_other_hello(&self, id: u32, packet: &Parsed<'_>) -> bool {
        let Some(c) = self.conns.get(&id) else {
            return false;
        };
        packet.header.conn_id == 0
            && packet.frames().any(|f| match f {
                Frame::Hello { token, nonce, .. } => {
                    token != c.hello_token.as_slice() || nonce != c.hello_nonce
                }
                _ => false,
            })
    }

    /// Ends connection `id` because a new client took over its address:
    /// the host hears it left, but no Disconnect goes out, since the new
    /// client at that address would take it for its own.
    fn drop_replaced(&mut self, id: u32) {
        let Some(mut c) = self.conns.remove(&id) else {
            return;
        };
        self.give_back(&mut c);
        self.forget(&c);
        self.retire_budget(&c);
        self.by_addr.remove(&c.addr);
        if let Some(e) = c.entity {
            self.by_entity.remove(&e);
        }
        self.events.push_back(ServerEvent::Disconnected {
            conn: ConnId(id),
            entity: c.entity,
            reason: DisconnectReason::Closed,
        });
    }

    /// A datagram from an address without a connection, or (`replacing`)
    /// a new client's Hello from the address of connection `replacing`,
    /// which ends only if the Hello is good enough to open a connection.
    fn handle_unknown(
        &mut self,
        now: Instant,
        from: A,
        packet: &Parsed<'_>,
        len: usize,
        replacing: Option<u32>,
    ) {
        let hello = packet.frames().find_map(|f| match f {
            Frame::Hello {
                version,
                nonce,
                token,
            } => Some((version, nonce, token)),
            _ => None,
        });
        let Some((version, nonce, token)) = hello else {
            if self.conns.contains_key(&packet.header.conn_id) {
                self.stats.address_mismatch += 1;
            }
            self.queue_stateless(
                from,
                packet.header.conn_id,
                DisconnectReason::UnknownConnection,
                len,
            );
            return;
        };
        if len < MIN_INITIAL_LEN || packet.header.conn_id != 0 {
            self.stats.unknown_dropped += 1;
            return;
        }
        if version != VERSION {
            self.queue_stateless(from, 0, DisconnectReason::VersionMismatch, len);
            return;
        }
        let claims = match self.check_token(now, token) {
            Ok(claims) => claims,
            Err(reason) => {
                self.stats.tokens_refused += 1;
                self.queue_stateless(from, 0, reason, len);
                return;
            }
        };
        if let Some(old) = replacing {
            self.drop_replaced(old);
        }
        if self.conns.len() >= self.config.max_connections {
            self.queue_stateless(from, 0, DisconnectReason::ServerFull, len);
            return;
        }
        let id = self.new_conn_id();
        let mut recv = RecvTracker::default();
        let keys = claims.as_ref().map(|t| ConnKeys {
            send: PacketKey::new(&t.keys.server_to_client),
            recv: PacketKey::new(&t.keys.client_to_server),
        });
        if keys.is_none() {
            // In clear the Hello is acknowledged like any packet; with keys
            // only authenticated packets move the replay window.
            recv.record(packet.header.seq);
        }
        // A new connection's deadline is its handshake's or idle timeout,
        // whichever is sooner; nothing is in flight or to acknowledge yet.
        let timer = self.timers.open(
            id,
            now + self.config.idle_timeout.min(self.config.handshake_timeout),
        );
        let conn = Conn {
            id: ConnId(id),
            addr: from.clone(),
            entity: None,
            created: now,
            last_recv: now,
            next_seq: 1,
            recv,
            ack_due: None,
            sent: SentLog::new(1024),
            rtt: Rtt::new(self.config.initial_rtt),
            welcome_due: false,
            welcome_tick: 0,
            pong_due: None,
            next_input_seq: 0,
            last_input_tick: None,
            shadow: View::new(),
            claims,
            keys,
            hello_token: token.to_vec(),
            hello_nonce: nonce,
            spawn: None,
            limits: ClientLimits::NONE,
            refusals: VecDeque::new(),
            // A part is at most a packet: a resent part's rewrite (with a
            // budget) never grows past it.
            backlog: Backlog::new(match self.config.budget_bytes_per_sec {
                Some(_) => self.config.mtu,
                None => 0,
            }),
            ready: false,
            pacer: None,
            stats: ConnStats {
                packets_received: 1,
                ..ConnStats::default()
            },
            timer,
        };
        self.conns.insert(id, conn);
        // Room for every connection: waking one never grows the queue.
        self.ready
            .reserve(self.conns.len().saturating_sub(self.ready.len()));
        self.by_addr.insert(from.clone(), id);
        self.events.push_back(ServerEvent::Connecting {
            conn: ConnId(id),
            from,
            token: token.to_vec(),
        });
    }

    fn handle_conn_packet(&mut self, now: Instant, id: u32, packet: &Parsed<'_>) {
        let Some(c) = self.conns.get_mut(&id) else {
            return;
        };
        let h = packet.header;
        if (h.conn_id != 0 && h.conn_id != id) || h.seq == 0 || c.recv.check(h.seq) != Receipt::New
        {
            dropped(&mut c.stats, &mut self.stats);
            return;
        }
        c.on_ack(h.ack, h.ack_bits, now, &mut self.spare);
        let accepted = c.entity.is_some();
        let mut close = None;
        let mut eliciting = false;
        let mut r = packet.body();
        while let Some(f) = Parsed::read_next(&mut r, &mut self.input) {
            // An Input frame, read into the reused buffer.
            let Some(f) = f else {
                eliciting = true;
                if accepted {
                    let (first, inputs) = (self.input.first_seq, self.input.inputs());
                    let to = (&mut self.events, &mut self.inbox, &mut self.stats);
                    if let Err(reason) = c.deliver_inputs(first, inputs, to) {
                        close = Some(reason);
                        break;
                    }
                }
                continue;
            };
            eliciting |= f.is_ack_eliciting();
            match f {
                Frame::Padding => {}
                Frame::Hello { .. } => c.welcome_due = accepted,
                Frame::Input(input) => {
                    if accepted {
                        let first = input.first_seq;
                        let to = (&mut self.events, &mut self.inbox, &mut self.stats);
                        if let Err(reason) = c.deliver_inputs(first, &input.entries, to) {
                            close = Some(reason);
                            break;
                        }
                    }
                }
                Frame::Ack { tick } => c.backlog.ack_through(tick, &mut self.spare.blocks),
                Frame::Ping { stamp } => c.pong_due = Some(stamp),
                Frame::Bye => {
                    close = Some(DisconnectReason::Closed);
                    break;
                }
                Frame::Welcome(_)
                | Frame::TickBatch(_)
                | Frame::Pong { .. }
                | Frame::Disconnect { .. }
                | Frame::Refused(_) => {
                    close = Some(DisconnectReason::ProtocolViolation);
                    break;
                }
            }
        }
        c.recv.record(h.seq);
        c.last_recv = now;
        c.stats.packets_received += 1;
        if eliciting && c.ack_due.is_none() {
            c.ack_due = Some(now);
        }
        self.timers.set(c.timer, c.deadline(&self.config));
        // A packet that leaves nothing to send now (a pure acknowledgement,
        // or an acknowledgement not yet due: its deadline wakes it) does
        // not queue its connection.
        if c.wants_send(now, self.config.max_ack_delay) {
            wake(&mut self.ready, c);
        }
        if let Some(reason) = close {
            self.close(id, reason);
        }
    }

    /// Accepts a connection announced by [`ServerEvent::Connecting`]: the
    /// client acts for and observes through `spawn.id`, which the host
    /// spawns with `spawn` in the next tick; the Welcome tells the client
    /// its spawn and `limits` (with this server's send budget in place of
    /// `limits.budget_bytes_per_sec`).
    ///
    /// The client's first batch is for the tick after the last one pushed,
    /// and starts from an empty view: spawn the entity in a later tick (its
    /// initial view then arrives as Enters). An entity that is already
    /// alive would have a view the client never saw; the connection would
    /// end with [`DisconnectReason::Desync`].
    pub fn accept(
        &mut self,
        conn: ConnId,
        spawn: &Spawn,
        limits: ClientLimits,
    ) -> Result<(), ConnError> {
        let entity = spawn.id;
        if self.by_entity.contains_key(&entity) {
            return Err(ConnError::EntityInUse);
        }
        let last = self.last_tick.unwrap_or(0);
        let c = self
            .conns
            .get_mut(&conn.0)
            .ok_or(ConnError::UnknownConnection)?;
        if c.entity.is_some() {
            return Err(ConnError::AlreadyAccepted);
        }
        if c.claims.as_ref().is_some_and(|t| t.client_id != entity) {
            return Err(ConnError::NotTokenClient);
        }
        c.entity = Some(entity);
        c.spawn = Some(*spawn);
        // Room for the whole view and a steady backlog now, so that ticks
        // never grow them.
        c.shadow.reserve(view_room(&self.world));
        // With a budget, each tick records the subjects its Updates are for.
        let updates = match self.config.budget_bytes_per_sec {
            Some(_) => view_room(&self.world),
            None => 0,
        };
        c.backlog.reserve(TICKS_PER_CONNECTION, updates);
        c.sent.reserve(RECORDS_PER_CONNECTION);
        self.spare.add_connection();
        // The Welcome states the budget this server sends within.
        c.limits = ClientLimits {
            budget_bytes_per_sec: self.config.budget_bytes_per_sec,
            ..limits
        };
        c.welcome_due = true;
        c.welcome_tick = last;
        wake(&mut self.ready, c);
        // The handshake deadline no longer counts.
        self.timers.set(c.timer, c.deadline(&self.config));
        self.by_entity.insert(entity, conn.0);
        Ok(())
    }

    /// Tells the client of `conn` that the host refused command `index` of
    /// its input `seq` (see [`ServerEvent::Input`]), for `reason`. The
    /// refusal travels reliably in a Refused frame with the connection's
    /// next packets; at most [`MAX_QUEUED_REFUSALS`] wait at once.
    pub fn refuse_input(
        &mut self,
        conn: ConnId,
        seq: u64,
        index: usize,
        reason: InputRefusal,
    ) -> Result<(), ConnError> {
        let c = self
            .conns
            .get_mut(&conn.0)
            .ok_or(ConnError::UnknownConnection)?;
        let index = u8::try_from(index)
            .ok()
            .filter(|&i| usize::from(i) < MAX_COMMANDS_PER_INPUT)
            .ok_or(ConnError::NoSuchCommand)?;
        c.queue_refusal(RefusedInput { seq, index, reason });
        wake(&mut self.ready, c);
        Ok(())
    }

    /// Refuses or ends a connection; the client gets a Disconnect with `reason`.
    pub fn reject(&mut self, conn: ConnId, reason: DisconnectReason) -> Result<(), ConnError> {
        if !self.conns.contains_key(&conn.0) {
            return Err(ConnError::UnknownConnection);
        }
        self.close(conn.0, reason);
        Ok(())
    }

    /// Ends a connection ([`DisconnectReason::Kicked`]).
    pub fn disconnect(&mut self, conn: ConnId) -> Result<(), ConnError> {
        self.reject(conn, DisconnectReason::Kicked)
    }

    /// Queues one tick's events for every accepted connection.
    ///
    /// `events` is the kernel's output for `tick`, in contract order. Each
    /// connection gets its entity's view events and the rejections of
    /// commands naming its entity, split into parts that fit the MTU.
    /// Ticks must be pushed in order, one after another.
    ///
    /// With a budget ([`ServerConfig::budget_bytes_per_sec`]) Updates are
    /// chosen by priority, every weight 1 (this call does not say where
    /// observers are): use [`push_tick_located`](Self::push_tick_located)
    /// to favour near subjects.
    pub fn push_tick(
        &mut self,
        now: Instant,
        tick: u64,
        digest: u64,
        events: &[Event],
    ) -> Result<(), PushTickError> {
        self.push_tick_located(now, tick, digest, events, |_| None)
    }

    /// [`push_tick`](Self::push_tick), with `locate` saying where each
    /// connection's entity is after the tick (e.g. `|id|
    /// world.entity(id).map(|e| e.pos)`): with a budget, subjects near the
    /// observer gain priority faster (see [`crate::budget`]). Without a
    /// budget `locate` is not called.
    pub fn push_tick_located<F: FnMut(EntityId) -> Option<Pos>>(
        &mut self,
        now: Instant,
        tick: u64,
        digest: u64,
        events: &[Event],
        mut locate: F,
    ) -> Result<(), PushTickError> {
        self.advance(now);
        if let Some(last) = self.last_tick {
            let expected = last.saturating_add(1);
            if tick != expected {
                return Err(PushTickError::TickOutOfOrder { expected });
            }
        }
        // Contract order: rejections first, then strictly ascending (observer, kind, subject).
        let split = events.partition_point(|e| matches!(e, Event::Rejected { .. }));
        let (rejections, views) = events.split_at(split);
        let ordered = views
            .windows(2)
            .all(|w| matches!((w[0].order_key(), w[1].order_key()), (Some(a), Some(b)) if a < b))
            && views.iter().all(|e| e.order_key().is_some());
        if !ordered {
            return Err(PushTickError::EventsOutOfOrder);
        }
        self.last_tick = Some(tick);

        self.rejected.clear();
        for (i, e) in rejections.iter().enumerate() {
            if let Event::Rejected { entity, .. } = e {
                self.rejected.push((*entity, i));
            }
        }
        // Stable: keeps input order among one entity's rejections.
        self.rejected.sort_by_key(|r| r.0);

        let overhead = if self.security.is_some() {
            SEAL_OVERHEAD
        } else {
            0
        };
        let split = Split {
            budget: self.config.part_budget() - overhead,
            max_parts: usize::from(self.config.max_parts_per_tick),
        };
        let pace = PaceParams {
            bytes_per_sec: self.config.budget_bytes_per_sec,
            tick: self.config.tick_interval,
            cell: self.world.cell_size.to_bits(),
            packet: HEADER_LEN + overhead,
            part_budget: split.budget,
            mtu: self.config.mtu,
        };
        let mut closing = Vec::new();
        // Connections go in entity order, as the events do by observer: a
        // cursor finds each one's run where the last run ended.
        let mut next = 0;
        let mut r_next = 0;
        for (&entity, &id) in &self.by_entity {
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            self.route.clear();
            r_next = run_from(&self.rejected, r_next, |r| r.0 < entity);
            for &(e, i) in &self.rejected[r_next..] {
                if e != entity {
                    break;
                }
                self.route.push(rejections[i]);
            }
            // Every view event has an observer: checked above.
            let observer = |e: &Event| e.order_key().map_or(EntityId::MAX, |k| k.0);
            let v0 = run_from(views, next, |e| observer(e) < entity);
            let v1 = v0
                + views[v0..]
                    .iter()
                    .take_while(|e| observer(e) == entity)
                    .count();
            next = v1;
            // Without rejections to put first or a budget to choose by,
            // the observer's events go straight from the kernel's slice.
            let copy = !self.route.is_empty() || pace.bytes_per_sec.is_some();
            if copy {
                self.route.extend_from_slice(&views[v0..v1]);
            }
            if let Some(bytes_per_sec) = pace.bytes_per_sec {
                let at = locate(entity);
                let room = view_room(&self.world);
                let paced = c
                    .pacer
                    .get_or_insert_with(|| Pacer::new(bytes_per_sec, pace.tick, pace.mtu, room));
                // Lent until the tick is queued.
                paced.trade_scratch(&mut self.pacer_scratch);
                pace_updates(
                    paced,
                    &pace,
                    tick,
                    entity,
                    at,
                    c.backlog.unsent_bytes(),
                    &c.shadow,
                    &mut self.route,
                );
            }
            let mine = if copy {
                &self.route[..]
            } else {
                &views[v0..v1]
            };
            core::mem::swap(&mut c.shadow.scratch, &mut self.staging);
            let queued = c.backlog.queue(
                (tick, digest),
                mine,
                &mut c.shadow,
                &mut c.pacer,
                split,
                &mut self.spare.blocks,
            );
            core::mem::swap(&mut c.shadow.scratch, &mut self.staging);
            if let Some(paced) = c.pacer.as_mut() {
                paced.trade_scratch(&mut self.pacer_scratch);
            }
            match queued {
                Ok(()) => wake(&mut self.ready, c),
                Err(reason) => {
                    closing.push((id, reason));
                    continue;
                }
            }
            if let Some(oldest) = c.backlog.oldest() {
                if tick - oldest >= u64::from(self.config.max_unacked_ticks)
                    || c.backlog.bytes() > self.config.max_pending_bytes
                {
                    closing.push((id, DisconnectReason::TooFarBehind));
                }
            }
        }
        for (id, reason) in closing {
            self.close(id, reason);
        }
        Ok(())
    }

    /// The next host-facing event, if any. An [`ServerEvent::Input`]'s
    /// commands are then read with [`input_commands`](Self::input_commands).
    pub fn poll_event(&mut self) -> Option<ServerEvent<A>> {
        let event = self.events.pop_front();
        let inbox = &mut self.inbox;
        inbox.current.clear();
        if let Some(ServerEvent::Input { .. }) = event {
            let n = inbox.lens.pop_front().unwrap_or(0);
            let n = n.min(inbox.queued.len());
            inbox.current.extend(inbox.queued.drain(..n));
        }
        event
    }

    /// The commands of the [`ServerEvent::Input`] that
    /// [`poll_event`](Self::poll_event) returned last, in the client's
    /// order (at most [`MAX_COMMANDS_PER_INPUT`]); empty when the last event
    /// it returned was not an Input.
    ///
    /// ```
    /// # use lockgrid_protocol::{Server, ServerEvent};
    /// # fn drain(server: &mut Server<u32>, commands: &mut Vec<lockgrid_kernel::Command>) {
    /// while let Some(event) = server.poll_event() {
    ///     if let ServerEvent::Input { .. } = event {
    ///         commands.extend_from_slice(server.input_commands());
    ///     }
    /// }
    /// # }
    /// ```
    pub fn input_commands(&self) -> &[Command] {
        &self.inbox.current
    }

    /// Writes the next datagram to send into `buf` (at least the MTU long)
    /// and says where it goes; `None` when nothing is left to send now.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        buf: &mut [u8],
    ) -> Result<Option<Transmit<A>>, BufferTooSmall> {
        let now = self.advance(now);
        let mtu = self.config.mtu;
        if buf.len() < mtu {
            return Err(BufferTooSmall { needed: mtu });
        }
        let buf = &mut buf[..mtu];
        if let Some(reply) = self.stateless.pop_front() {
            let header = Header {
                conn_id: reply.conn_id,
                seq: reply.sealed.as_ref().map_or(0, |s| s.1),
                ack: 0,
                ack_bits: 0,
            };
            let mut w = Writer::new(buf);
            header.write(&mut w);
            Frame::Disconnect {
                reason: reply.reason,
            }
            .write_infallible(&mut w);
            // A header, a two-byte frame and a tag always fit an MTU of at least MIN_MTU.
            let mut len = w.pos();
            if let Some((key, _)) = &reply.sealed {
                len = seal_packet(key, buf, len).unwrap_or(0);
            } else {
                self.stats.stateless_replies += 1;
            }
            return Ok(Some(Transmit {
                destination: reply.to,
                len,
            }));
        }
        let Some(id) = self.next_ready(now) else {
            return Ok(None);
        };
        let told = Told {
            world: self.world,
            tick_interval_us: crate::time::micros(self.config.tick_interval),
            window: self.config.max_unacked_ticks,
        };
        let Some(c) = self.conns.get_mut(&id) else {
            return Ok(None);
        };
        let Some(seq) = c
            .next_seq
            .checked_add(1)
            .map(|n| core::mem::replace(&mut c.next_seq, n))
        else {
            self.close(id, DisconnectReason::LimitReached);
            return Ok(None);
        };
        let len = match &c.keys {
            None => c.build_packet(now, seq, buf, &told, &mut self.spare),
            Some(_) => {
                let room = mtu - SEAL_OVERHEAD;
                let plain = c.build_packet(now, seq, &mut buf[..room], &told, &mut self.spare);
                c.stats.bytes_sent += SEAL_OVERHEAD as u64;
                match c.keys.as_ref().map(|k| seal_packet(&k.send, buf, plain)) {
                    Some(Ok(len)) => len,
                    // The plaintext left room for the tag and starts with a header.
                    _ => 0,
                }
            }
        };
        if let Some(p) = c.pacer.as_mut() {
            p.charge(len);
        }
        // The packet settled the ack due and may have started a loss timer.
        self.timers.set(c.timer, c.deadline(&self.config));
        // Round robin: a connection with more to send goes to the back.
        if c.wants_send(now, self.config.max_ack_delay) {
            wake(&mut self.ready, c);
        }
        Ok(Some(Transmit {
            destination: c.addr.clone(),
            len,
        }))
    }

    /// The next connection in the ready queue with something to send now.
    /// Those with nothing leave the queue; an acknowledgement that came
    /// due since the last [`handle_timeout`](Self::handle_timeout) brings
    /// its connection back.
    fn next_ready(&mut self, now: Instant) -> Option<u32> {
        let ack_delay = self.config.max_ack_delay;
        let mut woke_due = false;
        loop {
            let Some(id) = self.ready.pop_front() else {
                if woke_due || self.timers.earliest().is_none_or(|t| t > now) {
                    #[cfg(debug_assertions)]
                    assert!(
                        self.conns.values().all(|c| !c.wants_send(now, ack_delay)),
                        "a connection with something to send is not in the ready queue"
                    );
                    return None;
                }
                woke_due = true;
                self.timers.due(now, &mut self.due);
                for id in &self.due {
                    if let Some(c) = self.conns.get_mut(id) {
                        wake(&mut self.ready, c);
                    }
                }
                continue;
            };
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            c.ready = false;
            #[cfg(debug_assertions)]
            c.backlog.check_counts();
            if c.wants_send(now, ack_delay) {
                return Some(id);
            }
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called:
    /// the earliest idle, handshake, loss or acknowledgement deadline of any
    /// connection. It costs the same however many connections are open.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let earliest = self.timers.earliest();
        #[cfg(debug_assertions)]
        assert_eq!(earliest, self.scan_timeout(), "timers out of date");
        earliest
    }

    /// What [`poll_timeout`](Self::poll_timeout) answers, computed from
    /// every connection's state: the check that the timers are kept.
    #[cfg(any(test, debug_assertions))]
    fn scan_timeout(&self) -> Option<Instant> {
        let idle = self.config.idle_timeout;
        let hs = self.config.handshake_timeout;
        let ack_delay = self.config.max_ack_delay;
        self.conns
            .values()
            .flat_map(|c| {
                let handshake = c.entity.is_none().then(|| c.created + hs);
                let loss = c.sent.loss_deadline(c.rtt.rto(ack_delay));
                let ack = c.ack_due.map(|t| t + ack_delay);
                [Some(c.last_recv + idle), handshake, loss, ack]
            })
            .flatten()
            .min()
    }

    /// Acts on every deadline that has passed: idle and handshake timeouts,
    /// packets presumed lost. Only the connections with a deadline passed
    /// are visited.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.advance(now);
        let idle = self.config.idle_timeout;
        let hs = self.config.handshake_timeout;
        let ack_delay = self.config.max_ack_delay;
        let mut due = core::mem::take(&mut self.due);
        self.timers.due(now, &mut due);
        // In connection order, as the host hears of closes.
        due.sort_unstable();
        let mut closing = Vec::new();
        for &id in &due {
            let Some(c) = self.conns.get_mut(&id) else {
                continue;
            };
            if now >= c.last_recv + idle {
                closing.push((id, DisconnectReason::IdleTimeout));
            } else if c.entity.is_none() && now >= c.created + hs {
                closing.push((id, DisconnectReason::HandshakeTimeout));
            } else {
                let rto = c.rtt.rto(ack_delay);
                let Conn {
                    sent,
                    backlog,
                    refusals,
                    stats,
                    pacer,
                    ..
                } = &mut *c;
                let spare = &mut self.spare;
                sent.on_timeout(now, rto, |fate, data| {
                    packet_fate(backlog, refusals, stats, spare, pacer, fate, data)
                });
                self.timers.set(c.timer, c.deadline(&self.config));
                wake(&mut self.ready, c);
            }
        }
        self.due = due;
        for (id, reason) in closing {
            self.close(id, reason);
        }
    }
}

/// The first index at or after `from` where `before` stops holding in
/// `items`, which it holds for a prefix of: `from` itself when it already
/// fails there (a connection whose run starts where the last one ended),
/// else a binary search of the rest.
fn run_from<T>(items: &[T], from: usize, before: impl Fn(&T) -> bool) -> usize {
    match items.get(from) {
        Some(x) if before(x) => from + items[from..].partition_point(before),
        _ => from.min(items.len()),
    }
}

/// Acts on what became of a packet: its parts and refusals are
/// acknowledged, or to be sent again; its record is kept for reuse.
fn packet_fate(
    backlog: &mut Backlog,
    refusals: &mut VecDeque<RefusedInput>,
    stats: &mut ConnStats,
    spare: &mut Spare,
    pacer: &mut Option<Pacer>,
    fate: Fate,
    data: SentData,
) {
    stats.parts_retransmitted +=
        backlog.settle(fate, data.seq, &data.parts, pacer, &mut spare.blocks);
    refusal_fate(refusals, stats, fate, &data);
    spare.put_sent(data);
}

/// A datagram of connection `conn` dropped: counted for it and in the
/// server's total.
fn dropped(conn: &mut ConnStats, totals: &mut ServerStats) {
    conn.packets_dropped += 1;
    totals.packets_dropped += 1;
}

/// Puts a connection that may have something to send in the ready queue,
/// unless it is there already.
fn wake<A>(ready: &mut VecDeque<u32>, c: &mut Conn<A>) {
    if !c.ready {
        c.ready = true;
        ready.push_back(c.id.0);
    }
}

/// What the budgeted send path needs of the server's configuration.
struct PaceParams {
    bytes_per_sec: Option<u32>,
    tick: core::time::Duration,
    /// Raw cell size: the unit of nearness.
    cell: i64,
    /// Bytes of a packet around its frames: header, and tag when sealed.
    packet: usize,
    /// Largest payload of one part.
    part_budget: usize,
    /// Most unspent bytes carried to the next tick: one packet.
    mtu: usize,
}

/// Replaces the kernel's Updates at the end of `route` (one connection's
/// events of `tick`, in contract order) with those the budget affords,
/// by priority: see [`crate::budget`].
#[allow(clippy::too_many_arguments)]
fn pace_updates(
    pacer: &mut Pacer,
    pace: &PaceParams,
    tick: u64,
    observer: EntityId,
    at: Option<Pos>,
    resend: usize,
    shadow: &View,
    route: &mut Vec<Event>,
) {
    let rejected = route.partition_point(|e| matches!(e, Event::Rejected { .. }));
    let membership =
        rejected + route[rejected..].partition_point(|e| !matches!(e, Event::Update { .. }));
    pacer.observe(tick, &route[rejected..]);
    let level = pacer.refill();
    // What must go before any Update: parts awaiting resend (`resend`
    // bytes in packets), this tick's rejections, Leaves and Enters, one
    // packet around them.
    let must = membership_bytes(&route[..membership], shadow.len())
        + resend
        + pace.packet
        + TICK_BATCH_OVERHEAD;
    let must = i64::try_from(must).unwrap_or(i64::MAX);
    if membership > 0 && must > level {
        pacer.overran();
    }
    // Each part beyond the first costs a packet and a frame more.
    let count = crate::wire::varint_len(pacer.view_len() as u64) as i64;
    // Saturating: a deficit is bounded only by what the host sends.
    let mut room = level.saturating_sub(must).saturating_sub(count);
    if room > 0 {
        let per_part = (pace.part_budget.max(1)) as i64;
        let extra = must.saturating_add(room) / per_part;
        room = room
            .saturating_sub(extra.saturating_mul((pace.packet + TICK_BATCH_OVERHEAD + 4) as i64));
    }
    route.truncate(membership);
    pacer.choose(observer, room, at, pace.cell, route);
}

/// Counts the refusals a packet carried as told, or queues them again
/// (ahead of newer ones) when the packet was lost.
fn refusal_fate(
    refusals: &mut VecDeque<RefusedInput>,
    stats: &mut ConnStats,
    fate: Fate,
    data: &SentData,
) {
    match fate {
        Fate::Acked => stats.refusals_told += data.refused.len() as u64,
        Fate::Lost => {
            for r in data.refused.iter().rev() {
                refusals.push_front(*r);
            }
        }
    }
}

impl<A> Conn<A> {
    /// The earliest of this connection's deadlines: idle, handshake (until
    /// accepted), loss of the oldest packet in flight, acknowledgement due.
    fn deadline(&self, config: &ServerConfig) -> Instant {
        let ack_delay = config.max_ack_delay;
        let mut at = self.last_recv + config.idle_timeout;
        if self.entity.is_none() {
            at = at.min(self.created + config.handshake_timeout);
        }
        if let Some(loss) = self.sent.loss_deadline(self.rtt.rto(ack_delay)) {
            at = at.min(loss);
        }
        if let Some(ack) = self.ack_due {
            at = at.min(ack + ack_delay);
        }
        at
    }

    fn on_ack(&mut self, ack: u32, bits: u32, now: Instant, spare: &mut Spare) {
        let Conn {
            sent,
            rtt,
            backlog,
            refusals,
            stats,
            pacer,
            ..
        } = self;
        sent.on_ack(ack, bits, now, rtt, |fate, data| {
            packet_fate(backlog, refusals, stats, spare, pacer, fate, data)
        });
    }

    /// Hands the host each input it has not had yet, in order; commands
    /// for another entity are counted for this connection and in `totals`.
    fn deliver_inputs<B>(
        &mut self,
        first_seq: u64,
        entries: &[InputEntry],
        (events, inbox, totals): (&mut VecDeque<ServerEvent<B>>, &mut Inbox, &mut ServerStats),
    ) -> Result<(), DisconnectReason> {
        let Some(entity) = self.entity else {
            return Ok(());
        };
        // An honest client repeats every unacknowledged input, oldest first,
        // so the frame never starts past the next input the server expects.
        if first_seq > self.next_input_seq {
            return Err(DisconnectReason::ProtocolViolation);
        }
        for (k, entry) in entries.iter().enumerate() {
            let seq = first_seq + k as u64;
            if seq < self.next_input_seq {
                continue;
            }
            if self.last_input_tick.is_some_and(|t| entry.tick <= t) {
                return Err(DisconnectReason::ProtocolViolation);
            }
            self.next_input_seq = seq + 1;
            self.last_input_tick = Some(entry.tick);
            let foreign = entry
                .commands
                .iter()
                .filter(|c| c.entity() != entity)
                .count();
            if foreign > 0 {
                // Acting for another entity taints the whole input.
                self.stats.foreign_commands += foreign as u64;
                totals.foreign_commands += foreign as u64;
                for index in 0..entry.commands.len() {
                    self.queue_refusal(RefusedInput {
                        seq,
                        index: index as u8,
                        reason: InputRefusal::NotYours,
                    });
                }
                continue;
            }
            self.stats.inputs_delivered += 1;
            inbox.lens.push_back(entry.commands.len());
            inbox.queued.extend(entry.commands.iter().copied());
            events.push_back(ServerEvent::Input {
                conn: self.id,
                entity,
                seq,
                tick: entry.tick,
            });
        }
        Ok(())
    }

    fn queue_refusal(&mut self, r: RefusedInput) {
        if self.refusals.len() < MAX_QUEUED_REFUSALS {
            self.refusals.push_back(r);
        } else {
            self.stats.refusals_untold += 1;
        }
    }

    fn wants_send(&self, now: Instant, ack_delay: core::time::Duration) -> bool {
        self.entity.is_some()
            && (self.welcome_due
                || self.pong_due.is_some()
                || !self.refusals.is_empty()
                || self.ack_due.is_some_and(|t| now >= t + ack_delay)
                || self.backlog.has_unsent())
    }

    /// Fills one packet: Welcome, Pong, then unsent parts oldest first.
    fn build_packet(
        &mut self,
        now: Instant,
        seq: u32,
        buf: &mut [u8],
        told: &Told,
        spare: &mut Spare,
    ) -> usize {
        let (ack, ack_bits) = self.recv.ack();
        let header = Header {
            conn_id: self.id.0,
            seq,
            ack,
            ack_bits,
        };
        let cap = buf.len();
        let mut w = Writer::new(buf);
        header.write(&mut w);
        let mut eliciting = false;
        if let (true, Some(spawn)) = (self.welcome_due, self.spawn) {
            self.welcome_due = false;
            eliciting = true;
            Frame::Welcome(Welcome {
                conn_id: self.id.0,
                nonce: self.hello_nonce,
                entity: spawn.id,
                spawn,
                limits: self.limits,
                tick: self.welcome_tick,
                tick_interval_us: told.tick_interval_us,
                window: told.window,
                world: told.world,
            })
            .write_infallible(&mut w);
        }
        if let Some(stamp) = self.pong_due.take() {
            eliciting = true;
            Frame::Pong { stamp }.write_infallible(&mut w);
        }
        let mut data = spare.sent();
        data.seq = seq;
        eliciting |= self.backlog.fill(&mut w, cap, seq, &mut data.parts);
        // Refusals fill what the parts left, oldest first.
        // The packet's record holds them, so that a loss queues them again.
        let n = self.refusals.len().min(MAX_REFUSALS_PER_FRAME);
        data.refused.extend(self.refusals.iter().take(n));
        let mark = w.pos();
        while !data.refused.is_empty() {
            let r = write_refused(&mut w, &data.refused);
            debug_assert!(r.is_ok(), "the server queued an invalid refusal: {r:?}");
            if w.pos() <= cap {
                self.refusals.drain(..data.refused.len());
                eliciting = true;
                break;
            }
            w.rewind(mark);
            data.refused.pop();
        }
        self.ack_due = None;
        if eliciting {
            let Conn {
                sent,
                backlog,
                refusals,
                stats,
                pacer,
                ..
            } = self;
            sent.push(seq, now, data, |fate, d| {
                packet_fate(backlog, refusals, stats, spare, pacer, fate, d)
            });
        } else {
            spare.put_sent(data);
        }
        let len = w.pos();
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += len as u64;
        len
    }
}

#[cfg(test)]
mod timeout_props;
