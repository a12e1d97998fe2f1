//! Packets: a fixed header followed by frames.

use alloc::vec::Vec;

use crate::error::{DecodeError, EncodeError};
use crate::frame::{Frame, InputScratch};
use crate::wire::{Reader, Writer};

/// The first two bytes of every packet: `LG`.
pub const MAGIC: [u8; 2] = *b"LG";
/// The protocol version this crate speaks.
pub const VERSION: u8 = 2;
/// Bytes in a packet header.
pub const HEADER_LEN: usize = 19;
/// The smallest datagram a client's first packet may be; a server answers
/// a datagram from an unknown address only if it is at least this long and
/// at least as long as the answer, so it never amplifies traffic.
pub const MIN_INITIAL_LEN: usize = 64;

/// The packet header.
///
/// ```text
/// offset size field
///      0    2 magic "LG"
///      2    1 version
///      3    4 conn_id  (u32 LE; 0 before the Welcome)
///      7    4 seq      (u32 LE; 1, 2, 3, … per direction; 0 = not tracked)
///     11    4 ack      (u32 LE; highest seq received from the peer, 0 = none)
///     15    4 ack_bits (u32 LE; bit i set = seq ack-1-i received)
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// The connection id the server assigned (0 before the Welcome).
    pub conn_id: u32,
    /// This packet's sequence number in its direction; 0 for packets that
    /// are never acknowledged (stateless replies).
    pub seq: u32,
    /// Highest sequence number received from the peer (0 if none).
    pub ack: u32,
    /// Bit `i` set means packet `ack - 1 - i` was received too.
    pub ack_bits: u32,
}

impl Header {
    pub(crate) fn write(&self, w: &mut Writer<'_>) {
        w.bytes(&MAGIC);
        w.u8(VERSION);
        w.u32_le(self.conn_id);
        w.u32_le(self.seq);
        w.u32_le(self.ack);
        w.u32_le(self.ack_bits);
    }

    /// Encodes the header into `buf`.
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        let mut w = Writer::new(buf);
        self.write(&mut w);
        Ok(w.finish()?)
    }

    /// Decodes the header at the start of `bytes`.
    pub fn decode(bytes: &[u8]) -> Result<Header, DecodeError> {
        let mut r = Reader::new(bytes);
        Header::read(&mut r)
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Header, DecodeError> {
        if r.array::<2>()? != MAGIC {
            return Err(DecodeError::BadMagic);
        }
        let version = r.u8()?;
        if version != VERSION {
            return Err(DecodeError::UnsupportedVersion(version));
        }
        Ok(Header {
            conn_id: r.u32_le()?,
            seq: r.u32_le()?,
            ack: r.u32_le()?,
            ack_bits: r.u32_le()?,
        })
    }
}

/// A decoded packet: its header and its frames in order (padding included).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet<'a> {
    /// The header.
    pub header: Header,
    /// The frames, in the order they appear.
    pub frames: Vec<Frame<'a>>,
}

impl<'a> Packet<'a> {
    /// Decodes a whole datagram. Any malformed byte makes the whole packet
    /// an error: a receiver never acts on part of a packet.
    pub fn decode(bytes: &'a [u8]) -> Result<Packet<'a>, DecodeError> {
        let mut r = Reader::new(bytes);
        let header = Header::read(&mut r)?;
        let mut frames = Vec::new();
        while !r.is_empty() {
            frames.push(Frame::read(&mut r)?);
        }
        Ok(Packet { header, frames })
    }

    /// Encodes the packet into `buf`; returns the bytes written, or how many are needed.
    pub fn encode(&self, buf: &mut [u8]) -> Result<usize, EncodeError> {
        encode_packet(&self.header, &self.frames, buf)
    }
}

/// A packet whose frames all decode, read again frame by frame when asked:
/// what [`Packet::decode`] accepts, without collecting the frames, so the
/// server's receive path keeps no memory per packet.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Parsed<'a> {
    pub(crate) header: Header,
    body: &'a [u8],
}

impl<'a> Parsed<'a> {
    /// Checks the header and every frame, as [`Packet::decode`] does;
    /// Input frames are read into `input` (reusing its vectors).
    pub(crate) fn decode(
        bytes: &'a [u8],
        input: &mut InputScratch,
    ) -> Result<Parsed<'a>, DecodeError> {
        let mut r = Reader::new(bytes);
        let header = Header::read(&mut r)?;
        let body = r.bytes(r.remaining())?;
        let mut check = Reader::new(body);
        while !check.is_empty() {
            Frame::read_reusing(&mut check, input)?;
        }
        Ok(Parsed { header, body })
    }

    /// A reader at the first frame, for [`read_next`](Self::read_next).
    pub(crate) fn body(&self) -> Reader<'a> {
        Reader::new(self.body)
    }

    /// The next frame, `Some(None)` for an Input frame (read into
    /// `input`), `None` after the last.
    pub(crate) fn read_next(
        r: &mut Reader<'a>,
        input: &mut InputScratch,
    ) -> Option<Option<Frame<'a>>> {
        if r.is_empty() {
            None
        } else {
            // Every frame decoded in `decode`, so reading again cannot fail.
            Frame::read_reusing(r, input).ok()
        }
    }

    /// The frames, in order.
    pub(crate) fn frames(&self) -> impl Iterator<Item = Frame<'a>> + 'a {
        let mut r = Reader::new(self.body);
        // Every frame decoded in `decode`, so reading again cannot fail.
        core::iter::from_fn(move || {
            if r.is_empty() {
                None
            } else {
                Frame::read(&mut r).ok()
            }
        })
    }
}

/// Encodes a header and frames into `buf`; returns the bytes written, or how many are needed.
pub fn encode_packet(
    header: &Header,
    frames: &[Frame<'_>],
    buf: &mut [u8],
) -> Result<usize, EncodeError> {
    let mut w = Writer::new(buf);
    header.write(&mut w);
    for f in frames {
        f.write(&mut w)?;
    }
    Ok(w.finish()?)
}

/// Reads a datagram's protocol version without decoding the rest, if its
/// magic is right: how a server answers a client of another version.
pub fn peek_version(bytes: &[u8]) -> Option<u8> {
    match bytes {
        [m0, m1, v, ..] if [*m0, *m1] == MAGIC => Some(*v),
        _ => None,
    }
}
