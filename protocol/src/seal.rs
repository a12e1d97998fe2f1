//! Sealed packets: after the Hello, every packet of a connection that began
//! with a connect token is authenticated and encrypted with
//! ChaCha20-Poly1305 under its direction's key.
//!
//! ```text
//! offset  size  field
//!      0     2  magic "LG"             ┐ readable, authenticated as
//!      2     1  version                │ associated data (the first
//!      3     4  conn_id (u32 LE)       │ SEALED_PREFIX_LEN bytes)
//!      7     4  seq     (u32 LE)       ┘
//!     11     n  ciphertext of ack, ack_bits and the frames
//!   11+n    16  Poly1305 tag
//! ```
//!
//! The nonce is the connection id and the packet number: `conn_id` as a
//! `u32` little-endian, then `seq` as a `u64` little-endian. Packet numbers
//! never repeat within a direction (an endpoint ends the connection before
//! they run out) and each direction has its own key. A token opens at most
//! one connection per server, and the connection id tells apart the
//! connections one token may open on the several servers it lists, so a
//! nonce does not repeat under a key.

use alloc::vec::Vec;
use core::fmt;

use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{ChaCha20Poly1305, KeyInit, Nonce};

use crate::config::MAX_MTU;
use crate::packet::{MAGIC, VERSION};
use crate::token::{KEY_LEN, TAG_LEN};

/// Bytes at the start of a sealed packet that stay readable: magic,
/// version, connection id, packet number.
pub const SEALED_PREFIX_LEN: usize = 11;
/// Bytes sealing adds to a packet (the tag).
pub const SEAL_OVERHEAD: usize = TAG_LEN;

/// One direction's packet key, ready to seal or open.
#[derive(Clone)]
pub struct PacketKey(ChaCha20Poly1305);

impl fmt::Debug for PacketKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PacketKey(..)")
    }
}

impl PacketKey {
    /// A key from its bytes (one of a token's [`PacketKeys`](crate::token::PacketKeys)).
    pub fn new(key: &[u8; KEY_LEN]) -> Self {
        PacketKey(ChaCha20Poly1305::new(key.into()))
    }
}

/// Why a packet could not be sealed or opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SealError {
    /// Shorter than the readable prefix (and, to open, the tag), or longer
    /// than the largest datagram.
    BadLength,
    /// Not a packet of this protocol version (magic or version byte).
    NotAPacket,
    /// The buffer has no room for the tag; `needed` bytes would fit.
    BufferTooSmall {
        /// The buffer length sealing needs.
        needed: usize,
    },
    /// The tag does not match: altered, forged, or sealed under another key.
    Unauthentic,
}

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SealError::BadLength => f.write_str("sealed packet has an impossible length"),
            SealError::NotAPacket => f.write_str("not a sealed lockgrid packet"),
            SealError::BufferTooSmall { needed } => {
                write!(f, "buffer too small: {needed} bytes needed")
            }
            SealError::Unauthentic => f.write_str("sealed packet does not authenticate"),
        }
    }
}

impl core::error::Error for SealError {}

/// The nonce of packet number `seq` of connection `conn_id`.
pub fn nonce(conn_id: u32, seq: u32) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(&conn_id.to_le_bytes());
    n[4..].copy_from_slice(&u64::from(seq).to_le_bytes());
    n
}

/// The readable fields of a sealed packet, `(conn_id, seq)`, if it has
/// this protocol's magic and version. Not authenticated until opened.
pub fn readable(bytes: &[u8]) -> Option<(u32, u32)> {
    let prefix = bytes.get(..SEALED_PREFIX_LEN)?;
    if prefix[..2] != MAGIC || prefix[2] != VERSION {
        return None;
    }
    let conn_id = u32::from_le_bytes([prefix[3], prefix[4], prefix[5], prefix[6]]);
    let seq = u32::from_le_bytes([prefix[7], prefix[8], prefix[9], prefix[10]]);
    Some((conn_id, seq))
}

/// Seals the plaintext packet `buf[..len]` (header and frames) in place
/// and appends the tag; returns the sealed length, `len + SEAL_OVERHEAD`.
pub fn seal_packet(key: &PacketKey, buf: &mut [u8], len: usize) -> Result<usize, SealError> {
    if len < SEALED_PREFIX_LEN {
        return Err(SealError::BadLength);
    }
    let needed = len + SEAL_OVERHEAD;
    if buf.len() < needed {
        return Err(SealError::BufferTooSmall { needed });
    }
    let (conn_id, seq) = readable(buf).ok_or(SealError::NotAPacket)?;
    let (aad, rest) = buf.split_at_mut(SEALED_PREFIX_LEN);
    let (text, tail) = rest.split_at_mut(len - SEALED_PREFIX_LEN);
    let tag = key
        .0
        .encrypt_in_place_detached(Nonce::from_slice(&nonce(conn_id, seq)), aad, text)
        .map_err(|_| SealError::BadLength)?;
    tail[..TAG_LEN].copy_from_slice(&tag);
    Ok(needed)
}

/// Opens a sealed datagram into `out` (cleared first; its capacity is
/// kept between calls): afterwards `out` holds the plaintext packet, header
/// and frames, ready for [`Packet::decode`](crate::Packet::decode).
pub fn open_packet(key: &PacketKey, sealed: &[u8], out: &mut Vec<u8>) -> Result<(), SealError> {
    if sealed.len() < SEALED_PREFIX_LEN + TAG_LEN || sealed.len() > MAX_MTU {
        return Err(SealError::BadLength);
    }
    let (conn_id, seq) = readable(sealed).ok_or(SealError::NotAPacket)?;
    let (body, tag) = sealed.split_at(sealed.len() - TAG_LEN);
    out.clear();
    out.extend_from_slice(body);
    let (aad, text) = out.split_at_mut(SEALED_PREFIX_LEN);
    let opened = key.0.decrypt_in_place_detached(
        Nonce::from_slice(&nonce(conn_id, seq)),
        aad,
        text,
        tag.into(),
    );
    if opened.is_err() {
        // Never leave unauthenticated plaintext behind.
        out.clear();
        return Err(SealError::Unauthentic);
    }
    Ok(())
}
