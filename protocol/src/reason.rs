//! Why a connection ended: the reason codes carried by Disconnect frames.

use core::fmt;

/// Why a connection ended. The numeric codes are part of the wire format
/// and are never reused; unknown codes from a newer peer decode to
/// [`DisconnectReason::Other`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum DisconnectReason {
    /// 1: the peer said Bye, or the local side closed gracefully.
    Closed,
    /// 2: the peer speaks another protocol version.
    VersionMismatch,
    /// 3: the host refused the Hello's token.
    TokenRejected,
    /// 4: nothing was heard from the peer for the idle timeout.
    IdleTimeout,
    /// 5: the client stopped acknowledging tick batches past the server's bound.
    TooFarBehind,
    /// 6: the peer sent something the protocol forbids.
    ProtocolViolation,
    /// 7: the server has no room for another connection.
    ServerFull,
    /// 8: the server holds no connection for this address and id.
    UnknownConnection,
    /// 9: the host ended the connection.
    Kicked,
    /// 10: the handshake did not complete in time.
    HandshakeTimeout,
    /// 11: the server's tick events disagreed with what it sent this client
    /// (the host broke the event contract for this connection).
    Desync,
    /// 12: a protocol limit was reached (packet numbers exhausted, a tick's
    /// batch beyond the part limit).
    LimitReached,
    /// 13: a key is configured and the Hello carried no token.
    TokenMissing,
    /// 14: the token is malformed or does not authenticate under the server's key (forged or altered).
    TokenInvalid,
    /// 15: the token's expiry has passed.
    TokenExpired,
    /// 16: the token is for another protocol id.
    TokenWrongProtocol,
    /// 17: the token does not list this server's address.
    TokenWrongServer,
    /// 18: the token already opened a connection (from this or another address).
    TokenReused,
    /// 19: the server is shutting down (the client may reconnect later).
    ShuttingDown,
    /// A code this version does not know.
    Other(u8),
}

impl DisconnectReason {
    /// The wire code.
    pub const fn code(self) -> u8 {
        match self {
            DisconnectReason::Closed => 1,
            DisconnectReason::VersionMismatch => 2,
            DisconnectReason::TokenRejected => 3,
            DisconnectReason::IdleTimeout => 4,
            DisconnectReason::TooFarBehind => 5,
            DisconnectReason::ProtocolViolation => 6,
            DisconnectReason::ServerFull => 7,
            DisconnectReason::UnknownConnection => 8,
            DisconnectReason::Kicked => 9,
            DisconnectReason::HandshakeTimeout => 10,
            DisconnectReason::Desync => 11,
            DisconnectReason::LimitReached => 12,
            DisconnectReason::TokenMissing => 13,
            DisconnectReason::TokenInvalid => 14,
            DisconnectReason::TokenExpired => 15,
            DisconnectReason::TokenWrongProtocol => 16,
            DisconnectReason::TokenWrongServer => 17,
            DisconnectReason::TokenReused => 18,
            DisconnectReason::ShuttingDown => 19,
            DisconnectReason::Other(c) => c,
        }
    }

    /// The reason for a wire code; never fails.
    pub const fn from_code(code: u8) -> Self {
        match code {
            1 => DisconnectReason::Closed,
            2 => DisconnectReason::VersionMismatch,
            3 => DisconnectReason::TokenRejected,
            4 => DisconnectReason::IdleTimeout,
            5 => DisconnectReason::TooFarBehind,
            6 => DisconnectReason::ProtocolViolation,
            7 => DisconnectReason::ServerFull,
            8 => DisconnectReason::UnknownConnection,
            9 => DisconnectReason::Kicked,
            10 => DisconnectReason::HandshakeTimeout,
            11 => DisconnectReason::Desync,
            12 => DisconnectReason::LimitReached,
            13 => DisconnectReason::TokenMissing,
            14 => DisconnectReason::TokenInvalid,
            15 => DisconnectReason::TokenExpired,
            16 => DisconnectReason::TokenWrongProtocol,
            17 => DisconnectReason::TokenWrongServer,
            18 => DisconnectReason::TokenReused,
            19 => DisconnectReason::ShuttingDown,
            c => DisconnectReason::Other(c),
        }
    }
}

impl fmt::Display for DisconnectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DisconnectReason::Closed => f.write_str("closed"),
            DisconnectReason::VersionMismatch => f.write_str("protocol version mismatch"),
            DisconnectReason::TokenRejected => f.write_str("token rejected"),
            DisconnectReason::IdleTimeout => f.write_str("idle timeout"),
            DisconnectReason::TooFarBehind => f.write_str("client too far behind"),
            DisconnectReason::ProtocolViolation => f.write_str("protocol violation"),
            DisconnectReason::ServerFull => f.write_str("server full"),
            DisconnectReason::UnknownConnection => f.write_str("unknown connection"),
            DisconnectReason::Kicked => f.write_str("kicked by host"),
            DisconnectReason::HandshakeTimeout => f.write_str("handshake timeout"),
            DisconnectReason::Desync => f.write_str("view desync"),
            DisconnectReason::LimitReached => f.write_str("protocol limit reached"),
            DisconnectReason::TokenMissing => f.write_str("no connect token"),
            DisconnectReason::TokenInvalid => f.write_str("invalid connect token"),
            DisconnectReason::TokenExpired => f.write_str("connect token expired"),
            DisconnectReason::TokenWrongProtocol => {
                f.write_str("connect token for another protocol id")
            }
            DisconnectReason::TokenWrongServer => f.write_str("connect token for another server"),
            DisconnectReason::TokenReused => f.write_str("connect token already used"),
            DisconnectReason::ShuttingDown => f.write_str("server shutting down"),
            DisconnectReason::Other(c) => write!(f, "reason {c}"),
        }
    }
}
