//! Endpoint configuration.

use alloc::vec::Vec;
use core::fmt;
use core::net::SocketAddr;
use core::time::Duration;

use crate::frame::{MAX_PARTS, MAX_TOKEN_LEN};
use crate::packet::{HEADER_LEN, MIN_INITIAL_LEN};
use crate::token::PrivateKey;

/// Default largest datagram, in bytes (fits common paths without IP fragmentation).
pub const DEFAULT_MTU: usize = 1200;
/// Smallest MTU an endpoint accepts: room for the header, the largest
/// Welcome (190 bytes) with a Pong beside it and a seal, or a tick-batch
/// frame with the largest single event.
pub const MIN_MTU: usize = 256;
/// Largest MTU an endpoint accepts (the largest UDP payload).
pub const MAX_MTU: usize = 65_507;

/// Bytes a TickBatch frame adds around its payload at most: code, tick
/// (10), part and parts (2 each, at most [`MAX_PARTS`]), digest (8) and the
/// payload length (3, payloads are below [`MAX_MTU`]).
pub(crate) const TICK_BATCH_OVERHEAD: usize = 1 + 10 + 2 + 2 + 8 + 3;

/// A configuration value is outside its domain (the rule is named).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvalidConfig(pub &'static str);

impl fmt::Display for InvalidConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid endpoint configuration: {}", self.0)
    }
}

impl core::error::Error for InvalidConfig {}

/// Server endpoint settings. Every bound on per-connection memory is here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Largest datagram the server sends; tick batches are split to fit.
    pub mtu: usize,
    /// Most connections (accepted or awaiting the host's decision) at once.
    pub max_connections: usize,
    /// A connection that sends nothing for this long is closed.
    pub idle_timeout: Duration,
    /// A connection the host neither accepts nor rejects within this is closed.
    pub handshake_timeout: Duration,
    /// Longest the server waits before acknowledging a client packet when it
    /// has nothing else to send.
    pub max_ack_delay: Duration,
    /// Round-trip estimate before the first sample.
    pub initial_rtt: Duration,
    /// A client whose oldest unacknowledged tick is this many ticks behind
    /// is disconnected ([`TooFarBehind`](crate::DisconnectReason::TooFarBehind)).
    /// Also the window the client must buffer, announced in the Welcome.
    pub max_unacked_ticks: u32,
    /// A client whose unacknowledged batch bytes exceed this is disconnected.
    pub max_pending_bytes: usize,
    /// Most parts one tick's batch for one client may be split into.
    pub max_parts_per_tick: u16,
    /// Time between ticks, announced in the Welcome.
    pub tick_interval: Duration,
    /// Seed for connection ids; give each server process a fresh one so ids are not guessable.
    pub conn_id_seed: u64,
    /// Most queued stateless replies (Disconnects to unknown addresses);
    /// beyond it the oldest are dropped and counted.
    pub max_stateless_replies: usize,
    /// Bytes per second each client may be sent, or `None` (the default)
    /// for no limit: every Update the kernel emits is sent, as it was
    /// emitted. With a budget, Enters, Leaves and rejections always go and
    /// Updates are chosen by priority within what is left (see
    /// [`budget`](crate::budget)); an Update that would change nothing for
    /// the client is never sent.
    ///
    /// A budget must grant at least
    /// [`MIN_BUDGET_PER_TICK`](crate::budget::MIN_BUDGET_PER_TICK) bytes a
    /// tick (2 000 bytes per second at 20 Hz): less could not carry one
    /// Update beside a tick's packet.
    ///
    /// No limit is the default because the server cannot know its
    /// clients' links, and a default cap would silently slow every
    /// deployment whose clients can take more; the kernel's own update
    /// throttle already bounds what is sent. Set one for crowds: in
    /// `cargo bench -p lockgrid-protocol --bench budget`, a client among
    /// 326 walking subjects needs 43 KB/s to get every Update; at 32 KiB/s
    /// its nearest tenth is never stale and its farthest tenth at most 3
    /// ticks (p99), at 8 KiB/s 4 and 21 ticks.
    pub budget_bytes_per_sec: Option<u32>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            mtu: DEFAULT_MTU,
            max_connections: 1024,
            idle_timeout: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(5),
            max_ack_delay: Duration::from_millis(25),
            initial_rtt: Duration::from_millis(100),
            max_unacked_ticks: 100,
            max_pending_bytes: 1 << 20,
            max_parts_per_tick: 256,
            tick_interval: Duration::from_millis(50),
            conn_id_seed: 0,
            max_stateless_replies: 256,
            budget_bytes_per_sec: None,
        }
    }
}

impl ServerConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        if !(MIN_MTU..=MAX_MTU).contains(&self.mtu) {
            return Err(InvalidConfig("mtu must be in MIN_MTU..=MAX_MTU"));
        }
        if self.max_connections == 0 {
            return Err(InvalidConfig("max_connections must be positive"));
        }
        if self.max_unacked_ticks == 0 {
            return Err(InvalidConfig("max_unacked_ticks must be positive"));
        }
        if self.max_parts_per_tick == 0 || self.max_parts_per_tick > MAX_PARTS {
            return Err(InvalidConfig("max_parts_per_tick must be in 1..=MAX_PARTS"));
        }
        if self.max_pending_bytes < self.mtu {
            return Err(InvalidConfig("max_pending_bytes must be at least mtu"));
        }
        if self.idle_timeout.is_zero() || self.handshake_timeout.is_zero() {
            return Err(InvalidConfig("timeouts must be positive"));
        }
        if let Some(b) = self.budget_bytes_per_sec {
            let per_tick = u128::from(b) * self.tick_interval.as_micros() / 1_000_000;
            if per_tick < crate::budget::MIN_BUDGET_PER_TICK as u128 {
                return Err(InvalidConfig(
                    "budget_bytes_per_sec must grant at least MIN_BUDGET_PER_TICK bytes a tick",
                ));
            }
        }
        Ok(())
    }

    /// Largest batch payload in one part.
    pub(crate) fn part_budget(&self) -> usize {
        self.mtu - HEADER_LEN - TICK_BATCH_OVERHEAD
    }
}

/// Client endpoint settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// Largest datagram the client sends.
    pub mtu: usize,
    /// The connection ends if nothing is heard from the server for this long
    /// (also bounds the handshake).
    pub idle_timeout: Duration,
    /// Hello is repeated at this interval until the Welcome arrives.
    pub hello_interval: Duration,
    /// A Ping is sent at this interval, so a quiet server still answers.
    pub keepalive_interval: Duration,
    /// After [`Client::close`](crate::Client::close), Bye is repeated until
    /// the server confirms or this passes.
    pub close_timeout: Duration,
    /// Round-trip estimate before the first sample.
    pub initial_rtt: Duration,
    /// Most inputs awaiting acknowledgement; past it `send_input` refuses.
    pub max_pending_inputs: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            mtu: DEFAULT_MTU,
            idle_timeout: Duration::from_secs(10),
            hello_interval: Duration::from_millis(250),
            keepalive_interval: Duration::from_secs(1),
            close_timeout: Duration::from_secs(1),
            initial_rtt: Duration::from_millis(100),
            max_pending_inputs: 32,
        }
    }
}

impl ClientConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        if !(MIN_MTU..=MAX_MTU).contains(&self.mtu) {
            return Err(InvalidConfig("mtu must be in MIN_MTU..=MAX_MTU"));
        }
        if self.max_pending_inputs == 0
            || self.max_pending_inputs > crate::frame::MAX_INPUTS_PER_FRAME
        {
            return Err(InvalidConfig(
                "max_pending_inputs must be in 1..=MAX_INPUTS_PER_FRAME",
            ));
        }
        if self.idle_timeout.is_zero()
            || self.hello_interval.is_zero()
            || self.keepalive_interval.is_zero()
        {
            return Err(InvalidConfig("intervals and timeouts must be positive"));
        }
        const _: () = assert!(MIN_INITIAL_LEN + MAX_TOKEN_LEN < MAX_MTU);
        Ok(())
    }
}

/// What a server needs to accept only connect tokens and seal every packet.
///
/// With it, [`Server::with_security`](crate::Server::with_security) refuses
/// any Hello without a valid, unexpired token for this server and protocol
/// id, and every packet after the Hello is authenticated and encrypted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSecurity {
    /// The key shared with the backend that mints tokens.
    pub private_key: PrivateKey,
    /// The game's protocol id; tokens for another one are refused.
    pub protocol_id: u64,
    /// The addresses clients reach this server at; a token must list one.
    pub addresses: Vec<SocketAddr>,
    /// Unix time, in seconds, at [`Instant::ZERO`](crate::Instant::ZERO) of
    /// the clock the caller passes as `now`: how the server tells token
    /// expiry (Unix seconds) without reading a clock.
    pub unix_secs_at_zero: u64,
    /// Most used tokens remembered (each until it expires, and each opens
    /// one connection only); when full of
    /// live tokens the oldest is forgotten and counted in
    /// [`ServerStats::used_tokens_evicted`](crate::ServerStats::used_tokens_evicted).
    pub max_used_tokens: usize,
}

impl ServerSecurity {
    /// Security with the default table size (4096 used tokens).
    pub fn new(
        private_key: PrivateKey,
        protocol_id: u64,
        addresses: Vec<SocketAddr>,
        unix_secs_at_zero: u64,
    ) -> Self {
        ServerSecurity {
            private_key,
            protocol_id,
            addresses,
            unix_secs_at_zero,
            max_used_tokens: 4096,
        }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<(), InvalidConfig> {
        if self.addresses.is_empty() {
            return Err(InvalidConfig("security needs at least one server address"));
        }
        if self.max_used_tokens == 0 {
            return Err(InvalidConfig("max_used_tokens must be positive"));
        }
        Ok(())
    }
}
