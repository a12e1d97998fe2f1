//! Datagrams in and out in batches: on Linux one `sendmmsg` carries up to
//! [`BATCH`] datagrams of a tick and one `recvmmsg` takes up to [`BATCH`]
//! queued datagrams, through `nix`'s safe wrappers; elsewhere one
//! `send_to` / `recv_from` each. The buffers are made once, so batching
//! allocates nothing per tick.

use std::io;
use std::net::{SocketAddr, UdpSocket};

use lockgrid_protocol::MAX_MTU;
use tracing::debug;

/// Most datagrams one system call carries.
pub(crate) const BATCH: usize = 64;

/// Room for one received datagram: one byte more than the largest MTU, so
/// an oversized datagram is seen as such (and refused) instead of cut.
pub(crate) const RECV_SLOT: usize = MAX_MTU + 1;

/// Datagrams waiting to leave together.
pub(crate) struct Outbox {
    bytes: Vec<u8>,
    to: Vec<SocketAddr>,
    lens: Vec<usize>,
    #[cfg(target_os = "linux")]
    headers: nix::sys::socket::MultiHeaders<nix::sys::socket::SockaddrStorage>,
}

impl Outbox {
    pub(crate) fn new() -> Self {
        Outbox {
            bytes: vec![0; BATCH * MAX_MTU],
            to: Vec::with_capacity(BATCH),
            lens: Vec::with_capacity(BATCH),
            #[cfg(target_os = "linux")]
            headers: nix::sys::socket::MultiHeaders::preallocate(BATCH, None),
        }
    }

    /// Where the next datagram is written (the largest MTU long).
    pub(crate) fn slot(&mut self) -> &mut [u8] {
        let at = self.lens.len().min(BATCH - 1) * MAX_MTU;
        &mut self.bytes[at..at + MAX_MTU]
    }

    /// Keeps the datagram just written in [`slot`](Self::slot); sends the
    /// batch when it is full.
    pub(crate) fn push(&mut self, socket: &UdpSocket, to: SocketAddr, len: usize) {
        self.to.push(to);
        self.lens.push(len.min(MAX_MTU));
        if self.lens.len() >= BATCH {
            self.flush(socket);
        }
    }

    /// Sends every datagram kept. A datagram the system refuses (a full
    /// send buffer, an unreachable peer) is lost: the protocol sends again
    /// what matters.
    pub(crate) fn flush(&mut self, socket: &UdpSocket) {
        let n = self.lens.len();
        let mut start = 0;
        while start < n {
            match self.send_from(socket, start) {
                Ok(0) => start += 1,
                Ok(k) => start += k,
                Err(e) => {
                    debug!(to = %self.to[start], "send failed: {e}");
                    start += 1;
                }
            }
        }
        self.to.clear();
        self.lens.clear();
    }

    /// Sends datagrams `start..` in one call; how many left.
    #[cfg(target_os = "linux")]
    fn send_from(&mut self, socket: &UdpSocket, start: usize) -> io::Result<usize> {
        use nix::sys::socket::{sendmmsg, ControlMessage, MsgFlags, SockaddrStorage};
        use std::io::IoSlice;
        use std::os::fd::AsRawFd;

        let n = self.lens.len() - start;
        let bytes = &self.bytes;
        let lens = &self.lens[start..];
        let slices: [[IoSlice<'_>; 1]; BATCH] = std::array::from_fn(|i| {
            let len = lens.get(i).copied().unwrap_or(0);
            let at = (start + i).min(BATCH - 1) * MAX_MTU;
            [IoSlice::new(&bytes[at..at + len])]
        });
        let addrs: [Option<SockaddrStorage>; BATCH] =
            std::array::from_fn(|i| self.to.get(start + i).map(|a| SockaddrStorage::from(*a)));
        let cmsgs: [ControlMessage<'_>; 0] = [];
        let results = sendmmsg(
            socket.as_raw_fd(),
            &mut self.headers,
            &slices[..n],
            &addrs[..n],
            cmsgs,
            MsgFlags::empty(),
        )
        .map_err(io::Error::from)?;
        Ok(results.count())
    }

    #[cfg(not(target_os = "linux"))]
    fn send_from(&mut self, socket: &UdpSocket, start: usize) -> io::Result<usize> {
        let at = start * MAX_MTU;
        socket.send_to(&self.bytes[at..at + self.lens[start]], self.to[start])?;
        Ok(1)
    }
}

/// Room for a batch of received datagrams.
pub(crate) struct Inbox {
    bytes: Vec<u8>,
    got: [(Option<SocketAddr>, usize); BATCH],
    #[cfg(target_os = "linux")]
    headers: nix::sys::socket::MultiHeaders<nix::sys::socket::SockaddrStorage>,
}

impl Inbox {
    pub(crate) fn new() -> Self {
        Inbox {
            bytes: vec![0; BATCH * RECV_SLOT],
            got: [(None, 0); BATCH],
            #[cfg(target_os = "linux")]
            headers: nix::sys::socket::MultiHeaders::preallocate(BATCH, None),
        }
    }

    /// Takes what is queued on `socket` (non-blocking) without waiting, up to [`BATCH`]
    /// datagrams, and hands each to `each`; returns how many were taken
    /// (0 when none was queued).
    pub(crate) fn receive(
        &mut self,
        socket: &UdpSocket,
        mut each: impl FnMut(SocketAddr, &[u8]),
    ) -> io::Result<usize> {
        let n = match self.take(socket) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(0),
            Err(e) => return Err(e),
        };
        for i in 0..n {
            if let (Some(from), len) = self.got[i] {
                let at = i * RECV_SLOT;
                each(from, &self.bytes[at..at + len.min(RECV_SLOT)]);
            }
        }
        Ok(n)
    }

    #[cfg(target_os = "linux")]
    fn take(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        use nix::sys::socket::{recvmmsg, MsgFlags, SockaddrStorage};
        use std::io::IoSliceMut;
        use std::net::{SocketAddrV4, SocketAddrV6};
        use std::os::fd::AsRawFd;

        let mut rest: &mut [u8] = &mut self.bytes;
        let mut slices: [[IoSliceMut<'_>; 1]; BATCH] = std::array::from_fn(|_| {
            let (slot, tail) = std::mem::take(&mut rest).split_at_mut(RECV_SLOT);
            rest = tail;
            [IoSliceMut::new(slot)]
        });
        let results = recvmmsg(
            socket.as_raw_fd(),
            &mut self.headers,
            slices.iter_mut(),
            MsgFlags::MSG_DONTWAIT,
            None,
        )
        .map_err(io::Error::from)?;
        let mut n = 0;
        for (got, msg) in self.got.iter_mut().zip(results) {
            let from: Option<SockaddrStorage> = msg.address;
            let from = from.and_then(|a| {
                if let Some(v4) = a.as_sockaddr_in() {
                    Some(SocketAddr::V4(SocketAddrV4::from(*v4)))
                } else {
                    a.as_sockaddr_in6()
                        .map(|v6| SocketAddr::V6(SocketAddrV6::from(*v6)))
                }
            });
            *got = (from, msg.bytes);
            n += 1;
        }
        Ok(n)
    }

    /// One datagram; the socket is non-blocking by then.
    #[cfg(not(target_os = "linux"))]
    fn take(&mut self, socket: &UdpSocket) -> io::Result<usize> {
        let (len, from) = socket.recv_from(&mut self.bytes[..RECV_SLOT])?;
        self.got[0] = (Some(from), len);
        Ok(1)
    }
}
