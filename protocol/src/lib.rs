//! lockgrid-protocol: the sans-IO wire layer between a lockgrid server and its clients.
//!
//! It contains no networking code and reads no clock: bytes in, bytes out,
//! and every time-dependent call takes `now`. The host owns the sockets,
//! the clock, authentication and game rules; this crate owns the packet
//! format, the handshake, reliability and the per-client view model. It
//! does not run the kernel either: the host steps the
//! [`World`](lockgrid_kernel::World) and hands each tick's events to the
//! [`Server`].
//!
//! What it provides:
//! - the wire format ([`packet`], [`frame`], [`batch`]), specified in
//!   `docs/protocol.md`, with stable frame codes;
//! - a [`Server`] endpoint (many clients) and a [`Client`] endpoint, in the
//!   quinn-proto shape: `handle_datagram`, `poll_transmit`, `poll_event`,
//!   `poll_timeout`, `handle_timeout`;
//! - a [`View`]: the entity id → state map a client builds from the tick
//!   batches it applies, equal to the kernel's view of its observer.
//! - an optional per-connection bandwidth budget ([`budget`],
//!   [`ServerConfig::budget_bytes_per_sec`]): Enter and Leave always go,
//!   Updates fill what the budget leaves, nearest and stalest first, each
//!   carrying the subject's newest state.
//! - security in the netcode manner ([`token`], [`seal`]): a backend
//!   mints a connect token under a key it shares with the servers; a
//!   server built with [`Server::with_security`] lets in only valid,
//!   unexpired tokens for itself, as the entity the token names, and every
//!   packet after the Hello is authenticated and encrypted with the
//!   token's per-connection keys, replays dropped. Keys, nonces and the
//!   Unix time come from the caller; the crate draws no randomness.
//!
//! Guarantees: inputs reach the server's host exactly once and in tick
//! order; every tick's Enter, Leave and rejection events reach the client
//! exactly once, ticks applied consecutively; Updates carry only changed
//! fields and the client never sees a Leave or Update for a subject it does
//! not hold. Decoding any bytes yields a value or a typed error, never a
//! panic, and no allocation is sized by an untrusted length. Per-connection
//! memory is bounded by [`ServerConfig`], and reserved when a client is
//! accepted ([`Server::reserved_per_connection`]): a steady server
//! allocates nothing per tick.
//!
//! # The drive loop
//!
//! Call order per wake-up: `handle_datagram` for what arrived (or
//! `handle_timeout` if [`Server::poll_timeout`] passed), `push_tick` when a
//! tick ran, then drain `poll_event` and `poll_transmit`. Time never goes
//! backwards (an earlier `now` counts as the latest one seen).
//!
//! ```no_run
//! use lockgrid_kernel::{Command, Config, Fix, Pos, Spawn, World};
//! use lockgrid_protocol::{ClientLimits, Instant, Server, ServerConfig, ServerEvent, WorldParams};
//! # fn socket_recv() -> Option<(u32, Vec<u8>)> { None }
//! # fn socket_send(_to: u32, _bytes: &[u8]) {}
//! # fn clock_micros() -> u64 { 0 }
//! # fn token_ok(_t: &[u8]) -> bool { true }
//!
//! let config = Config::default();
//! let mut world = World::new(config).expect("valid config");
//! let mut server: Server<u32> =
//!     Server::new(ServerConfig::default(), WorldParams::from(&config)).expect("valid config");
//! let mut buf = vec![0u8; server.config().mtu];
//! let (mut commands, mut events) = (Vec::new(), Vec::new());
//! let tick_every = 50_000; // microseconds
//! let mut next_tick = clock_micros();
//! let mut next_entity = 1_000_000u64;
//! loop {
//!     let now = Instant::from_micros(clock_micros());
//!     // 1. Datagrams in.
//!     while let Some((from, bytes)) = socket_recv() {
//!         server.handle_datagram(now, from, &bytes);
//!     }
//!     // 2. Timers.
//!     if server.poll_timeout().is_some_and(|t| t <= now) {
//!         server.handle_timeout(now);
//!     }
//!     // 3. What the clients asked for.
//!     while let Some(ev) = server.poll_event() {
//!         match ev {
//!             ServerEvent::Connecting { conn, token, .. } => {
//!                 if token_ok(&token) {
//!                     next_entity += 1;
//!                     // The Welcome tells the client its spawn and limits.
//!                     let at = Pos::from_ints(100, 100);
//!                     let spawn = Spawn::observer(next_entity, at, Fix::from_num(150));
//!                     server.accept(conn, &spawn, ClientLimits::NONE).expect("fresh entity");
//!                     commands.push(Command::Spawn(spawn));
//!                 } else {
//!                     let _ = server.reject(conn, lockgrid_protocol::DisconnectReason::TokenRejected);
//!                 }
//!             }
//!             // Only commands for the connection's own entity arrive here;
//!             // the host still checks speed and bounds.
//!             ServerEvent::Input { .. } => commands.extend_from_slice(server.input_commands()),
//!             ServerEvent::Disconnected { entity: Some(id), .. } => commands.push(Command::Despawn { id }),
//!             ServerEvent::Disconnected { .. } => {}
//!         }
//!     }
//!     // 4. The tick.
//!     if now.as_micros() >= next_tick {
//!         next_tick += tick_every;
//!         events.clear();
//!         let report = world.step(&commands, &mut events);
//!         commands.clear();
//!         server.push_tick(now, report.tick, report.digest, &events).expect("kernel order");
//!     }
//!     // 5. Datagrams out.
//!     while let Some(t) = server.poll_transmit(now, &mut buf).expect("buffer holds the mtu") {
//!         socket_send(t.destination, &buf[..t.len]);
//!     }
//!     // 6. Sleep until the earliest of poll_timeout, next_tick or a datagram.
//! }
//! ```
//!
//! A client is driven the same way with [`Client`]: `send_input` queues its
//! commands, `poll_event` yields [`ClientEvent::Tick`] as ticks apply, and
//! [`Client::view`] is what its entity sees.
#![no_std]
#![forbid(unsafe_code)]

extern crate alloc;

mod ack;
pub mod batch;
pub mod budget;
mod client;
mod config;
mod error;
pub mod frame;
pub mod packet;
mod reason;
mod refusal;
pub mod seal;
mod server;
mod time;
mod timers;
pub mod token;
mod used_tokens;
mod view;
mod wire;

pub use budget::BudgetStats;
pub use client::{Client, ClientEvent, ClientState, ClientStats, InputError};
pub use config::{
    ClientConfig, InvalidConfig, ServerConfig, ServerSecurity, DEFAULT_MTU, MAX_MTU, MIN_MTU,
};
pub use error::{BatchError, BufferTooSmall, DecodeError, EncodeError};
pub use frame::{ClientLimits, Frame, InputEntry, InputFrame, TickBatch, Welcome, WorldParams};
pub use packet::{Header, Packet, HEADER_LEN, MAGIC, VERSION};
pub use reason::DisconnectReason;
pub use refusal::{InputRefusal, RefusedInput, MAX_REFUSALS_PER_FRAME};
pub use server::{
    ConnError, ConnId, ConnStats, PushTickError, Server, ServerEvent, ServerStats,
    MAX_QUEUED_REFUSALS,
};
pub use time::Instant;
pub use token::{ConnectToken, PrivateKey, TokenClaims, TokenError, TokenParams};
pub use view::{Seen, View};
pub use wire::{unzigzag, varint_len, zigzag};

/// A datagram an endpoint wrote into the caller's buffer: send
/// `buf[..len]` to `destination`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit<A> {
    /// Where to send it.
    pub destination: A,
    /// How many bytes of the buffer it took.
    pub len: usize,
}
