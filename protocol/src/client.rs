//! The client endpoint: one connection to one server.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::fmt;

use lockgrid_kernel::{Command, EntityId, Event};

use crate::ack::{Fate, Receipt, RecvTracker, Rtt, SentLog};
use crate::batch::decode_part;
use crate::config::{ClientConfig, InvalidConfig};
use crate::error::BufferTooSmall;
use crate::frame::{
    command_len, Frame, InputEntry, InputFrame, Welcome, MAX_COMMANDS_PER_INPUT, MAX_TOKEN_LEN,
};
use crate::packet::{peek_version, Header, Packet, HEADER_LEN, MIN_INITIAL_LEN, VERSION};
use crate::reason::DisconnectReason;
use crate::refusal::RefusedInput;
use crate::seal::{open_packet, readable, seal_packet, PacketKey, SEAL_OVERHEAD};
use crate::server::MAX_QUEUED_REFUSALS;
use crate::time::Instant;
use crate::token::ConnectToken;
use crate::view::View;
use crate::wire::{varint_len, Writer};
use crate::Transmit;

/// What the client endpoint tells its host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEvent {
    /// The server accepted the connection.
    Connected(Welcome),
    /// One tick's events, applied to [`Client::view`], in contract order.
    /// Ticks arrive exactly once, consecutively.
    Tick {
        /// The tick.
        tick: u64,
        /// The server's state digest after the tick.
        digest: u64,
        /// This client's events of the tick (rejections of its commands,
        /// then Leave, Enter, Update for its entity's view).
        events: Vec<Event>,
    },
    /// The server refused one command of an input this client sent (the
    /// input is acknowledged all the same: it was decided). Refusals of
    /// one input arrive in command order, but need not arrive before the
    /// ticks that follow it.
    Refused(RefusedInput),
    /// The connection is over; no further events follow.
    Disconnected {
        /// Why.
        reason: DisconnectReason,
    },
}

/// Where a client is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientState {
    /// Sending Hello, waiting for the Welcome.
    Handshaking,
    /// Accepted: inputs flow up, tick batches flow down.
    Connected,
    /// Saying Bye, waiting for the server's confirmation.
    Closing,
    /// Over.
    Closed(DisconnectReason),
}

/// Why [`Client::send_input`] refused an input; nothing was queued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum InputError {
    /// The client is not connected.
    NotConnected,
    /// Too many inputs await acknowledgement; retry after the server catches up.
    QueueFull,
    /// Input ticks must strictly increase; this one must be above `last`.
    TickNotIncreasing {
        /// The last queued input's tick.
        last: u64,
    },
    /// More than [`MAX_COMMANDS_PER_INPUT`] commands.
    TooManyCommands,
    /// A command names another entity than the client's own.
    ForeignEntity(EntityId),
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::NotConnected => f.write_str("not connected"),
            InputError::QueueFull => f.write_str("input queue full"),
            InputError::TickNotIncreasing { last } => write!(f, "input tick must be above {last}"),
            InputError::TooManyCommands => f.write_str("too many commands in one input"),
            InputError::ForeignEntity(id) => {
                write!(f, "command names entity {id}, not the client's own")
            }
        }
    }
}

impl core::error::Error for InputError {}

/// Client counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Datagrams sent.
    pub packets_sent: u64,
    /// Datagrams received and processed.
    pub packets_received: u64,
    /// Datagrams dropped: malformed, from elsewhere, duplicated, too old,
    /// wrong connection id, or out of the buffering window.
    pub packets_dropped: u64,
    /// Bytes sent.
    pub bytes_sent: u64,
    /// Ticks applied.
    pub ticks_applied: u64,
    /// Sealed datagrams that failed authentication, dropped silently.
    pub auth_failed: u64,
    /// Sealed datagrams whose packet number was already received or is
    /// older than the replay window, dropped before opening.
    pub replayed: u64,
    /// Refused commands the server told of.
    pub refused: u64,
}

/// A tick whose parts are still arriving.
struct Partial {
    digest: u64,
    parts: Vec<Option<Vec<u8>>>,
    missing: usize,
}

/// What an ack-eliciting packet carried.
struct SentData {
    /// Highest input sequence number it held.
    last_input: Option<u64>,
}

/// The client endpoint: says Hello, sends inputs reliably, applies tick
/// batches in order to a [`View`].
///
/// Drive it like the [`Server`](crate::Server): feed datagrams, drain
/// [`poll_event`](Self::poll_event) and [`poll_transmit`](Self::poll_transmit),
/// and call [`handle_timeout`](Self::handle_timeout) at
/// [`poll_timeout`](Self::poll_timeout); `now` never goes backwards.
pub struct Client<A> {
    config: ClientConfig,
    server: A,
    token: Vec<u8>,
    nonce: u64,
    state: ClientState,
    now: Instant,
    started: Instant,
    welcome: Option<Welcome>,
    next_seq: u32,
    recv: RecvTracker,
    ack_due: bool,
    sent: SentLog<SentData>,
    rtt: Rtt,
    inputs: VecDeque<InputEntry>,
    first_input_seq: u64,
    inputs_len: usize,
    last_input_tick: Option<u64>,
    inputs_dirty: bool,
    last_hello: Option<Instant>,
    last_ping: Instant,
    last_send: Instant,
    last_recv: Instant,
    close_reason: DisconnectReason,
    close_started: Instant,
    last_bye: Option<Instant>,
    view: View,
    applied: u64,
    buffered: BTreeMap<u64, Partial>,
    events: VecDeque<ClientEvent>,
    keys: Option<ClientKeys>,
    /// The latest refusals heard, to ignore them when they come again.
    told: VecDeque<(u64, u8)>,
    /// Where sealed datagrams are opened (capacity kept between calls).
    scratch: Vec<u8>,
    stats: ClientStats,
}

/// The packet keys of a client that connects with a connect token.
struct ClientKeys {
    /// Seals what the client sends (client to server).
    send: PacketKey,
    /// Opens what the server sends (server to client).
    recv: PacketKey,
}

/// Allowance for the server's acknowledgement delay in the retransmission
/// timeout (the server's default `max_ack_delay`).
const PEER_ACK_DELAY: core::time::Duration = core::time::Duration::from_millis(25);

/// Bytes the Ack and Ping frames may take beside the Input frame.
const CONTROL_FRAMES_MAX: usize = (1 + 10) * 2 + 1;

impl<A: Clone + PartialEq> Client<A> {
    /// A client that will say Hello to `server` with `token` and `nonce`.
    ///
    /// `nonce` tells this run of the client from every earlier one on the
    /// same address: draw it at random (the crate reads no randomness), or
    /// take any value never used before by this address. The client
    /// believes only a Welcome that echoes it, so a Welcome or
    /// acknowledgement delayed from an earlier run is never taken for its
    /// own.
    pub fn new(
        config: ClientConfig,
        server: A,
        token: &[u8],
        nonce: u64,
        now: Instant,
    ) -> Result<Self, InvalidConfig> {
        config.validate()?;
        if token.len() > MAX_TOKEN_LEN || HEADER_LEN + 1 + 2 + 2 + token.len() > config.mtu {
            return Err(InvalidConfig(
                "token longer than MAX_TOKEN_LEN or than the mtu allows",
            ));
        }
        Ok(Client {
            config,
            server,
            token: token.to_vec(),
            nonce,
            state: ClientState::Handshaking,
            now,
            started: now,
            welcome: None,
            next_seq: 1,
            recv: RecvTracker::default(),
            ack_due: false,
            sent: SentLog::new(1024),
            rtt: Rtt::new(config.initial_rtt),
            inputs: VecDeque::new(),
            first_input_seq: 0,
            inputs_len: 0,
            last_input_tick: None,
            inputs_dirty: false,
            last_hello: None,
            last_ping: now,
            last_send: now,
            last_recv: now,
            close_reason: DisconnectReason::Closed,
            close_started: now,
            last_bye: None,
            view: View::new(),
            applied: 0,
            buffered: BTreeMap::new(),
            events: VecDeque::new(),
            keys: None,
            told: VecDeque::new(),
            scratch: Vec::new(),
            stats: ClientStats::default(),
        })
    }

    /// A client that connects with a connect token from the game's
    /// backend: its Hello carries the token's Hello part, and every packet
    /// after the Hello is sealed with the token's keys.
    pub fn with_token(
        config: ClientConfig,
        server: A,
        token: &ConnectToken,
        now: Instant,
    ) -> Result<Self, InvalidConfig> {
        // The token's own random nonce makes it unique to this
        // connection; its first bytes serve as the Hello's nonce.
        let hello = token.hello_token();
        let mut nonce = [0u8; 8];
        for (n, b) in nonce.iter_mut().zip(&hello[crate::token::H_NONCE..]) {
            *n = *b;
        }
        let mut client = Self::new(config, server, hello, u64::from_le_bytes(nonce), now)?;
        client.keys = Some(ClientKeys {
            send: PacketKey::new(&token.keys.client_to_server),
            recv: PacketKey::new(&token.keys.server_to_client),
        });
        Ok(client)
    }

    /// Bytes sealing adds to each packet after the Hello.
    fn seal_overhead(&self) -> usize {
        if self.keys.is_some() {
            SEAL_OVERHEAD
        } else {
            0
        }
    }

    /// Where the client is.
    pub fn state(&self) -> ClientState {
        self.state
    }

    /// The Welcome, once connected.
    pub fn welcome(&self) -> Option<&Welcome> {
        self.welcome.as_ref()
    }

    /// The entity this client acts for, once connected.
    pub fn entity(&self) -> Option<EntityId> {
        self.welcome.map(|w| w.entity)
    }

    /// What the client's entity sees, as of [`applied_tick`](Self::applied_tick).
    pub fn view(&self) -> &View {
        &self.view
    }

    /// The last tick applied to the view.
    pub fn applied_tick(&self) -> u64 {
        self.applied
    }

    /// Inputs sent but not yet acknowledged.
    pub fn unacked_inputs(&self) -> usize {
        self.inputs.len()
    }

    /// Counters.
    pub fn stats(&self) -> ClientStats {
        self.stats
    }

    /// Smoothed round-trip time to the server.
    pub fn rtt(&self) -> core::time::Duration {
        self.rtt.smoothed()
    }

    fn advance(&mut self, now: Instant) -> Instant {
        self.now = self.now.max(now);
        self.now
    }

    fn finish(&mut self, reason: DisconnectReason) {
        if !matches!(self.state, ClientState::Closed(_)) {
            self.state = ClientState::Closed(reason);
            self.inputs.clear();
            self.buffered.clear();
            self.events.push_back(ClientEvent::Disconnected { reason });
        }
    }

    /// The server ended the connection (or confirmed our Bye).
    fn on_disconnect(&mut self, reason: DisconnectReason) {
        if self.state == ClientState::Closing {
            self.finish(self.close_reason);
        } else {
            self.finish(reason);
        }
    }

    fn start_closing(&mut self, now: Instant, reason: DisconnectReason) {
        match self.state {
            ClientState::Connected => {
                self.state = ClientState::Closing;
                self.close_reason = reason;
                self.close_started = now;
                self.last_bye = None;
            }
            ClientState::Handshaking => self.finish(reason),
            ClientState::Closing | ClientState::Closed(_) => {}
        }
    }

    /// Leaves gracefully: Bye is sent until the server confirms or the close timeout passes.
    pub fn close(&mut self, now: Instant) {
        let now = self.advance(now);
        self.start_closing(now, DisconnectReason::Closed);
    }

    /// Queues one tick's commands for the client's own entity. They are
    /// repeated in every packet until the server acknowledges them, and the
    /// server hands them to its host exactly once, in tick order.
    pub fn send_input(&mut self, tick: u64, commands: &[Command]) -> Result<(), InputError> {
        let entity = match (self.state, self.welcome) {
            (ClientState::Connected, Some(w)) => w.entity,
            _ => return Err(InputError::NotConnected),
        };
        if commands.len() > MAX_COMMANDS_PER_INPUT {
            return Err(InputError::TooManyCommands);
        }
        if let Some(c) = commands.iter().find(|c| c.entity() != entity) {
            return Err(InputError::ForeignEntity(c.entity()));
        }
        if let Some(last) = self.last_input_tick {
            if tick <= last {
                return Err(InputError::TickNotIncreasing { last });
            }
        }
        // Upper bound of the entry's size: its tick written in full.
        let len = varint_len(tick) + 1 + commands.iter().map(command_len).sum::<usize>();
        let frame_max = 1 + 10 + 1 + self.inputs_len + len;
        if self.inputs.len() >= self.config.max_pending_inputs
            || HEADER_LEN + CONTROL_FRAMES_MAX + frame_max + self.seal_overhead() > self.config.mtu
        {
            return Err(InputError::QueueFull);
        }
        self.inputs.push_back(InputEntry {
            tick,
            commands: commands.to_vec(),
        });
        self.inputs_len += len;
        self.last_input_tick = Some(tick);
        self.inputs_dirty = true;
        Ok(())
    }

    fn pop_inputs_through(&mut self, last: u64) {
        while self.first_input_seq <= last {
            let Some(e) = self.inputs.pop_front() else {
                break;
            };
            self.inputs_len -=
                varint_len(e.tick) + 1 + e.commands.iter().map(command_len).sum::<usize>();
            self.first_input_seq += 1;
        }
    }

    fn on_ack(&mut self, ack: u32, bits: u32, now: Instant) {
        let mut acked_through = None;
        let mut lost = false;
        self.sent
            .on_ack(ack, bits, now, &mut self.rtt, |fate, d| match fate {
                Fate::Acked => acked_through = acked_through.max(d.last_input),
                Fate::Lost => lost = true,
            });
        if let Some(last) = acked_through {
            self.pop_inputs_through(last);
        }
        if lost && !self.inputs.is_empty() {
            self.inputs_dirty = true;
        }
    }

    /// Processes one received datagram.
    pub fn handle_datagram(&mut self, now: Instant, from: A, bytes: &[u8]) {
        let now = self.advance(now);
        if from != self.server || matches!(self.state, ClientState::Closed(_)) {
            self.stats.packets_dropped += 1;
            return;
        }
        if let Some(v) = peek_version(bytes) {
            if v != VERSION {
                if self.state == ClientState::Handshaking {
                    self.finish(DisconnectReason::VersionMismatch);
                } else {
                    self.stats.packets_dropped += 1;
                }
                return;
            }
        }
        if self.keys.is_some() {
            let mut scratch = core::mem::take(&mut self.scratch);
            self.handle_sealed(now, bytes, &mut scratch);
            self.scratch = scratch;
            return;
        }
        let Ok(packet) = Packet::decode(bytes) else {
            self.stats.packets_dropped += 1;
            return;
        };
        self.handle_packet(now, &packet, false);
    }

    /// A datagram to a client with keys: sealed, or a stateless reply in
    /// clear, which it believes only before the Welcome (the server can
    /// refuse a Hello only in clear; afterwards a Disconnect in clear could
    /// come from anyone).
    fn handle_sealed(&mut self, now: Instant, bytes: &[u8], scratch: &mut Vec<u8>) {
        let Some((conn_id, seq)) = readable(bytes) else {
            self.stats.packets_dropped += 1;
            return;
        };
        if seq == 0 {
            match Packet::decode(bytes) {
                Ok(packet) if self.state == ClientState::Handshaking => {
                    self.handle_packet(now, &packet, false);
                }
                _ => self.stats.packets_dropped += 1,
            }
            return;
        }
        let conn_ok = match self.welcome {
            Some(w) => conn_id == w.conn_id,
            None => conn_id != 0,
        };
        if !conn_ok {
            self.stats.packets_dropped += 1;
            return;
        }
        if self.recv.check(seq) != Receipt::New {
            self.stats.replayed += 1;
            self.stats.packets_dropped += 1;
            return;
        }
        let Some(keys) = &self.keys else {
            return;
        };
        if open_packet(&keys.recv, bytes, scratch).is_err() {
            self.stats.auth_failed += 1;
            return;
        }
        match Packet::decode(scratch) {
            Ok(packet) => self.handle_packet(now, &packet, true),
            Err(_) => self.stats.packets_dropped += 1,
        }
    }

    /// A packet in clear, or opened (`sealed`: it authenticated under
    /// this connection's keys): the protocol proper.
    fn handle_packet(&mut self, now: Instant, packet: &Packet<'_>, sealed: bool) {
        let h = packet.header;
        // Before the Welcome only a packet carrying a Welcome that echoes
        // this run's nonce, an untracked Disconnect, or a packet sealed
        // with this run's keys is believed: anything else may be a late
        // packet for an earlier run of this client on its address, whose
        // acknowledgements and batches are not this run's. Dropped
        // unacknowledged, it is sent again.
        let conn_ok = match self.welcome {
            Some(w) => h.conn_id == w.conn_id,
            None => {
                h.seq == 0
                    || sealed
                    || packet.frames.iter().any(|f| {
                        matches!(f, Frame::Welcome(w) if w.nonce == self.nonce && w.conn_id == h.conn_id)
                    })
            }
        };
        if !conn_ok {
            self.stats.packets_dropped += 1;
            return;
        }
        if h.seq == 0 {
            // Untracked stateless reply: only its Disconnect counts.
            if let Some(reason) = packet.frames.iter().find_map(|f| match f {
                Frame::Disconnect { reason } => Some(*reason),
                _ => None,
            }) {
                self.on_disconnect(reason);
            }
            return;
        }
        if self.recv.check(h.seq) != Receipt::New {
            self.stats.packets_dropped += 1;
            return;
        }
        // First pass: accept or refuse the packet as a whole, so a packet
        // whose contents cannot be kept now is left unacknowledged (and resent).
        let welcome_here = packet.frames.iter().find_map(|f| match f {
            Frame::Welcome(w) => Some(*w),
            _ => None,
        });
        let horizon = match (self.welcome, welcome_here) {
            (Some(w), _) => Some(self.applied.saturating_add(u64::from(w.window))),
            (None, Some(w)) => Some(w.tick.saturating_add(u64::from(w.window))),
            (None, None) => None,
        };
        for f in &packet.frames {
            if let Frame::TickBatch(b) = f {
                if horizon.is_none_or(|h| b.tick > h) {
                    self.stats.packets_dropped += 1;
                    return;
                }
            }
        }
        self.on_ack(h.ack, h.ack_bits, now);
        let mut eliciting = false;
        for f in &packet.frames {
            eliciting |= f.is_ack_eliciting();
            match f {
                Frame::Padding => {}
                Frame::Welcome(w) => {
                    if self.state == ClientState::Handshaking {
                        if w.conn_id != h.conn_id || w.conn_id == 0 {
                            self.finish(DisconnectReason::ProtocolViolation);
                            return;
                        }
                        self.welcome = Some(*w);
                        self.applied = w.tick;
                        self.state = ClientState::Connected;
                        self.last_ping = now;
                        self.events.push_back(ClientEvent::Connected(*w));
                    }
                }
                Frame::TickBatch(b) => {
                    if let Err(reason) = self.buffer_part(b) {
                        self.start_closing(now, reason);
                        return;
                    }
                }
                Frame::Pong { stamp } => {
                    let sent = Instant::from_micros(*stamp);
                    if sent <= now {
                        self.rtt.sample(now - sent);
                    }
                }
                Frame::Disconnect { reason } => {
                    self.on_disconnect(*reason);
                    return;
                }
                Frame::Refused(list) => {
                    for r in list {
                        // A refusal comes again when the acknowledgement
                        // of the packet that told it was lost.
                        let key = (r.seq, r.index);
                        if self.told.contains(&key) {
                            continue;
                        }
                        if self.told.len() >= MAX_QUEUED_REFUSALS {
                            self.told.pop_front();
                        }
                        self.told.push_back(key);
                        self.stats.refused += 1;
                        self.events.push_back(ClientEvent::Refused(*r));
                    }
                }
                Frame::Hello { .. }
                | Frame::Input(_)
                | Frame::Ack { .. }
                | Frame::Ping { .. }
                | Frame::Bye => {
                    self.start_closing(now, DisconnectReason::ProtocolViolation);
                    return;
                }
            }
        }
        self.recv.record(h.seq);
        self.last_recv = now;
        self.stats.packets_received += 1;
        self.ack_due |= eliciting;
        if let Err(reason) = self.apply_ready() {
            self.start_closing(now, reason);
        }
    }

    fn buffer_part(&mut self, b: &crate::frame::TickBatch<'_>) -> Result<(), DisconnectReason> {
        if b.tick <= self.applied {
            return Ok(());
        }
        let p = self.buffered.entry(b.tick).or_insert_with(|| Partial {
            digest: b.digest,
            parts: (0..b.parts).map(|_| None).collect(),
            missing: usize::from(b.parts),
        });
        if p.parts.len() != usize::from(b.parts) || p.digest != b.digest {
            return Err(DisconnectReason::ProtocolViolation);
        }
        if let Some(slot @ None) = p.parts.get_mut(usize::from(b.part)) {
            *slot = Some(b.payload.to_vec());
            p.missing -= 1;
        }
        Ok(())
    }

    /// Applies every complete tick that follows the last applied one.
    fn apply_ready(&mut self) -> Result<(), DisconnectReason> {
        let Some(entity) = self.entity() else {
            return Ok(());
        };
        loop {
            let next = self.applied + 1;
            match self.buffered.get(&next) {
                Some(p) if p.missing == 0 => {}
                _ => break,
            }
            let Some(p) = self.buffered.remove(&next) else {
                break;
            };
            let mut events = Vec::new();
            for payload in p.parts.iter().flatten() {
                decode_part(payload, entity, &mut self.view, &mut events)
                    .map_err(|_| DisconnectReason::ProtocolViolation)?;
            }
            self.applied = next;
            self.stats.ticks_applied += 1;
            self.events.push_back(ClientEvent::Tick {
                tick: next,
                digest: p.digest,
                events,
            });
        }
        Ok(())
    }

    /// The next host-facing event, if any.
    pub fn poll_event(&mut self) -> Option<ClientEvent> {
        self.events.pop_front()
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
        let rto = self.rtt.rto(PEER_ACK_DELAY);
        let send = match self.state {
            ClientState::Handshaking => self
                .last_hello
                .is_none_or(|t| now >= t + self.config.hello_interval),
            ClientState::Connected => {
                self.ack_due
                    || self.inputs_dirty
                    || now >= self.last_ping + self.config.keepalive_interval
                    || (!self.inputs.is_empty() && now >= self.last_send + rto)
            }
            ClientState::Closing => self.last_bye.is_none_or(|t| now >= t + rto),
            ClientState::Closed(_) => false,
        };
        if !send {
            return Ok(None);
        }
        let Some(seq) = self
            .next_seq
            .checked_add(1)
            .map(|n| core::mem::replace(&mut self.next_seq, n))
        else {
            self.finish(DisconnectReason::LimitReached);
            return Ok(None);
        };
        let (ack, ack_bits) = self.recv.ack();
        let header = Header {
            conn_id: self.welcome.map_or(0, |w| w.conn_id),
            seq,
            ack,
            ack_bits,
        };
        // Every packet after the Hello is sealed: leave room for the tag.
        let sealed = self.keys.is_some() && self.state != ClientState::Handshaking;
        let room = if sealed { mtu - SEAL_OVERHEAD } else { mtu };
        let mut w = Writer::new(&mut buf[..room]);
        header.write(&mut w);
        let mut data = SentData { last_input: None };
        let mut eliciting = true;
        match self.state {
            ClientState::Handshaking => {
                self.last_hello = Some(now);
                Frame::Hello {
                    version: VERSION,
                    nonce: self.nonce,
                    token: &self.token,
                }
                .write_infallible(&mut w);
                // Pad so the server may answer without amplifying traffic.
                while w.pos() < MIN_INITIAL_LEN {
                    w.u8(0);
                }
            }
            ClientState::Connected | ClientState::Closing => {
                Frame::Ack { tick: self.applied }.write_infallible(&mut w);
                eliciting = false;
                if self.state == ClientState::Closing {
                    self.last_bye = Some(now);
                    Frame::Bye.write_infallible(&mut w);
                    eliciting = true;
                } else {
                    if now >= self.last_ping + self.config.keepalive_interval {
                        self.last_ping = now;
                        Frame::Ping {
                            stamp: now.as_micros(),
                        }
                        .write_infallible(&mut w);
                        eliciting = true;
                    }
                    if !self.inputs.is_empty() {
                        let frame = Frame::Input(InputFrame {
                            first_seq: self.first_input_seq,
                            entries: self.inputs.iter().cloned().collect(),
                        });
                        frame.write_infallible(&mut w);
                        data.last_input = Some(self.first_input_seq + self.inputs.len() as u64 - 1);
                        eliciting = true;
                    }
                }
            }
            ClientState::Closed(_) => {}
        }
        self.ack_due = false;
        self.inputs_dirty = false;
        self.last_send = now;
        if eliciting {
            self.sent.push(seq, now, data, |_, _| {});
        }
        let mut len = w.pos();
        if sealed {
            if let Some(k) = &self.keys {
                // The plaintext left room for the tag and starts with a header.
                len = seal_packet(&k.send, buf, len).unwrap_or(0);
            }
        }
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += len as u64;
        Ok(Some(Transmit {
            destination: self.server.clone(),
            len,
        }))
    }

    /// When [`handle_timeout`](Self::handle_timeout) should next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let rto = self.rtt.rto(PEER_ACK_DELAY);
        match self.state {
            ClientState::Handshaking => {
                let hello = self
                    .last_hello
                    .map_or(self.now, |t| t + self.config.hello_interval);
                Some(hello.min(self.started + self.config.idle_timeout))
            }
            ClientState::Connected => {
                let mut t = (self.last_recv + self.config.idle_timeout)
                    .min(self.last_ping + self.config.keepalive_interval);
                if !self.inputs.is_empty() {
                    t = t.min(self.last_send + rto);
                }
                if let Some(l) = self.sent.loss_deadline(rto) {
                    t = t.min(l);
                }
                Some(t)
            }
            ClientState::Closing => {
                let bye = self.last_bye.map_or(self.now, |t| t + rto);
                Some(bye.min(self.close_started + self.config.close_timeout))
            }
            ClientState::Closed(_) => None,
        }
    }

    /// Acts on every deadline that has passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        let now = self.advance(now);
        match self.state {
            ClientState::Handshaking if now >= self.started + self.config.idle_timeout => {
                self.finish(DisconnectReason::HandshakeTimeout);
            }
            ClientState::Connected if now >= self.last_recv + self.config.idle_timeout => {
                self.finish(DisconnectReason::IdleTimeout);
            }
            ClientState::Closing if now >= self.close_started + self.config.close_timeout => {
                self.finish(self.close_reason);
            }
            _ => {
                let rto = self.rtt.rto(PEER_ACK_DELAY);
                let mut lost = false;
                self.sent.on_timeout(now, rto, |_, _| lost = true);
                if lost && !self.inputs.is_empty() {
                    self.inputs_dirty = true;
                }
            }
        }
    }
}
