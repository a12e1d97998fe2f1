//! The server socket's kernel buffers, sized for its clients, and the
//! datagrams they dropped.
//!
//! Right after a tick's datagrams leave, every client answers at once,
//! while the server may already be busy with the next tick. Linux's
//! default receive buffer (208 KiB) holds a few hundred small datagrams
//! as it accounts them: with 2 000
//! clients about a quarter of what they sent was dropped before the
//! server read it (measured on loopback, see BENCHMARKS.md), which the
//! protocol then repaired by resending moves and batch parts, at the
//! cost of both sides' time. So the server asks for room for
//! [`PER_CLIENT`] bytes a client, between [`MIN_BYTES`] and [`MAX_BYTES`],
//! for receiving and for sending, and says so when the system grants less
//! (on Linux `net.core.rmem_max` and `net.core.wmem_max` cap what a
//! process may ask for). What the buffer still drops, Linux counts per
//! socket in `/proc/net/udp`: [`Drops`] reads it for the stats file.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd};

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
pub(crate) struct SocketBuffers {
    /// Bytes asked for, for each of the two buffers.
    pub(crate) wanted: usize,
    /// The receive buffer the system granted, as it reports it (Linux
    /// reports twice what it was asked, its own bookkeeping included).
    pub(crate) receive: usize,
    /// The send buffer, likewise.
    pub(crate) send: usize,
}

impl SocketBuffers {
    /// Whether either buffer is smaller than asked for.
    pub(crate) fn short(&self) -> bool {
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
pub(crate) fn size_and_report(socket: &impl AsFd, max_clients: usize) -> io::Result<()> {
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
    Ok(())
}

/// Reads how many datagrams the system dropped at one socket, from the
/// `drops` column of its line in `/proc/self/net/udp` (or `udp6`), found by
/// the socket's inode. Reading streams the table through a buffer made
/// once, so it allocates nothing, however many sockets the machine has.
pub(crate) struct Drops {
    inode: Option<u64>,
    buf: Vec<u8>,
}

/// Bytes read from a table at a time: many lines of about 130 bytes.
const CHUNK: usize = 16 << 10;

impl Drops {
    /// The counter of `socket`; one that reads nothing where the system
    /// does not say which socket it is (no `/proc`).
    pub(crate) fn of(socket: &impl AsRawFd) -> Drops {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", socket.as_raw_fd()));
        // The link reads `socket:[INODE]`.
        let inode = link.ok().and_then(|l| {
            let inode = l.to_str()?.strip_prefix("socket:[")?.strip_suffix(']')?;
            inode.parse().ok()
        });
        Drops {
            inode,
            buf: vec![0; CHUNK],
        }
    }

    /// Datagrams dropped at the socket since it was made, or `None` where
    /// that cannot be read.
    pub(crate) fn read(&mut self) -> Option<u64> {
        let inode = self.inode?;
        ["/proc/self/net/udp", "/proc/self/net/udp6"]
            .into_iter()
            .find_map(|table| {
                let file = File::open(table).ok()?;
                drops_in(file, inode, &mut self.buf)
            })
    }
}

/// The `drops` of the line for `inode` in a `/proc/net/udp` table read
/// from `table`, with `buf` (at least one line long) as room.
fn drops_in(mut table: impl Read, inode: u64, buf: &mut [u8]) -> Option<u64> {
    let mut held = 0;
    loop {
        let n = table.read(&mut buf[held..]).ok()?;
        let end = held + n;
        let mut at = 0;
        while let Some(nl) = buf[at..end].iter().position(|&b| b == b'\n') {
            if let Some(drops) = line_drops(&buf[at..at + nl], inode) {
                return Some(drops);
            }
            at += nl + 1;
        }
        // The unfinished line goes to the front; a line longer than the
        // buffer is none of the table's.
        buf.copy_within(at..end, 0);
        held = end - at;
        if n == 0 || held == buf.len() {
            return None;
        }
    }
}

/// The last field of a table line whose tenth field is `inode`.
fn line_drops(line: &[u8], inode: u64) -> Option<u64> {
    let line = std::str::from_utf8(line).ok()?;
    let mut fields = line.split_ascii_whitespace();
    let ino: u64 = fields.nth(9)?.parse().ok()?;
    if ino != inode {
        return None;
    }
    fields.last()?.parse().ok()
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

    /// The table's header, other sockets' lines and a line cut by the
    /// buffer's end are read past; the socket's line gives its drops.
    #[test]
    fn drops_are_read_from_the_sockets_line() {
        let table = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops\n\
              12: 0100007F:1E8D 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 7\n\
              13: 0100007F:1E8E 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 99 2 0000000000000000 311\n";
        for room in [200, 1 << 14] {
            let mut buf = vec![0; room];
            assert_eq!(
                drops_in(table.as_bytes(), 99, &mut buf),
                Some(311),
                "room {room}"
            );
            assert_eq!(drops_in(table.as_bytes(), 4242, &mut buf), Some(7));
            assert_eq!(drops_in(table.as_bytes(), 5, &mut buf), None);
        }
        // A buffer shorter than a line finds nothing rather than a wrong line.
        assert_eq!(drops_in(table.as_bytes(), 99, &mut [0; 16]), None);
    }

    /// A real socket's line is found: nothing dropped yet.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_new_socket_has_dropped_nothing() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert_eq!(Drops::of(&socket).read(), Some(0));
    }
}
