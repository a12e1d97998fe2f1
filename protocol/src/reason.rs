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
            DisconnectReason::Other(c) => write!(f, "reason {c}"),
        }
    }
}
