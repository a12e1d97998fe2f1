//! The server socket's kernel buffers, sized for its clients.
//!
//! Right after a tick's datagrams leave, every client answers at once,
//! while the server may already be busy with the next tick. The kernel's
//! default receive buffer (about 200 KiB on Linux, or 400 KiB of
//! accounted memory) holds a few hundred small datagrams: with 2 000
//! clients about a quarter of what they sent was dropped before the
//! server read it (measured on loopback, see BENCHMARKS.md), which the
//! protocol then repaired by resending moves and batch parts, at the
//! cost of both sides' time. So the server asks for room for
//! [`PER_CLIENT`] bytes a client, between [`MIN_BYTES`] and [`MAX_BYTES`],
//! for receiving and for sending, and says so when the system grants less
//! (on Linux `net.core.rmem_max` and `net.core.wmem_max` cap what a
//! process may ask for).

use std::io;
use std::os::fd::AsFd;

use nix::sys::socket::{getsockopt, setsockopt, sockopt};
use tracing::{info, warn};

/// Room asked for each client: about three small datagrams as the kernel
/// accounts them (a few hundred bytes of payload in a buffer of about a
/// kilobyte each).
pub(crate) const PER_CLIENT: usize = 4 << 10;

/// The least asked for, whatever the client count.
pub(crate) const MIN_BYTES: usize = 1 << 20;

/// The most asked for, whatever the client count.
pub(crate) const MAX_BYTES: usize = 64 << 20;

/// The sizes a server of `max_clients` asks for and the ones it got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SocketBuffers {
    /// Bytes asked for, for each of the two buffers.
    pub wanted: usize,
    /// The receive buffer the system granted, as it reports it (Linux
    /// reports twice what it was asked, its own bookkeeping included).
    pub receive: usize,
    /// The send buffer, likewise.
    pub send: usize,
}

impl SocketBuffers {
    /// Whether either buffer is smaller than asked for.
    pub fn short(&self) -> bool {
        self.receive < self.wanted || self.send < self.wanted
    }
}

/// Bytes each buffer is asked to hold for `max_clients` clients.
pub(crate) fn wanted_for(max_clients: usize) -> usize {
    max_clients
        .saturating_mul(PER_CLIENT)
        .clamp(MIN_BYTES, MAX_BYTES)
}

/// Asks for buffers sized for `max_clients` on `socket` and reads back
/// what the system granted.
pub(crate) fn size_for(socket: &impl AsFd, max_clients: usize) -> io::Result<SocketBuffers> {
    let wanted = wanted_for(max_clients);
    setsockopt(socket, sockopt::RcvBuf, &wanted)?;
    setsockopt(socket, sockopt::SndBuf, &wanted)?;
    Ok(SocketBuffers {
        wanted,
        receive: getsockopt(socket, sockopt::RcvBuf)?,
        send: getsockopt(socket, sockopt::SndBuf)?,
    })
}

/// Sizes `socket`'s buffers for `max_clients` and logs what it got,
/// warning when the system granted less than asked.
pub(crate) fn size_and_report(socket: &impl AsFd, max_clients: usize) -> io::Result<SocketBuffers> {
    let got = size_for(socket, max_clients)?;
    if got.short() {
        warn!(
            wanted = got.wanted,
            receive = got.receive,
            send = got.send,
            "the socket's buffers are smaller than {max_clients} clients need: datagrams that \
             arrive while a tick runs may be dropped (raise net.core.rmem_max and net.core.wmem_max)"
        );
    } else {
        info!(receive = got.receive, send = got.send, "socket buffers");
    }
    Ok(got)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ask_grows_with_clients_within_bounds() {
        assert_eq!(wanted_for(0), MIN_BYTES);
        assert_eq!(wanted_for(2_000), 2_000 * PER_CLIENT);
        assert_eq!(wanted_for(usize::MAX), MAX_BYTES);
    }

    /// Asking makes the buffers larger than the system's defaults (or as
    /// large as asked, where the defaults already were), and the sizes
    /// reported are the ones the socket then has.
    #[test]
    fn a_socket_gets_larger_buffers_and_says_which() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let default = getsockopt(&socket, sockopt::RcvBuf).unwrap();
        let got = size_for(&socket, 2_000).unwrap();
        assert_eq!(got.wanted, 2_000 * PER_CLIENT);
        assert!(
            got.receive > default || got.receive >= got.wanted,
            "{got:?}, default {default}"
        );
        assert_eq!(got.receive, getsockopt(&socket, sockopt::RcvBuf).unwrap());
        assert_eq!(got.send, getsockopt(&socket, sockopt::SndBuf).unwrap());
    }
}
