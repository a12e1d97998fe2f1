//! Error types, one per API surface.

use core::fmt;

/// A caller-owned buffer was too small; `needed` bytes would have fit the output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferTooSmall {
    /// The buffer length the output needs.
    pub needed: usize,
}

impl fmt::Display for BufferTooSmall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "buffer too small: {} bytes needed", self.needed)
    }
}

impl core::error::Error for BufferTooSmall {}

/// Why a value could not be encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum EncodeError {
    /// The output buffer is too small; `needed` bytes would fit the whole encoding.
    BufferTooSmall {
        /// The buffer length the encoding needs.
        needed: usize,
    },
    /// The value breaks a rule of the wire format (named), so it has no encoding.
    Invalid(&'static str),
}

impl From<BufferTooSmall> for EncodeError {
    fn from(e: BufferTooSmall) -> Self {
        EncodeError::BufferTooSmall { needed: e.needed }
    }
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EncodeError::BufferTooSmall { needed } => {
                write!(f, "buffer too small: {needed} bytes needed")
            }
            EncodeError::Invalid(what) => write!(f, "value has no encoding: {what}"),
        }
    }
}

impl core::error::Error for EncodeError {}

/// Why a byte string is not a valid packet, frame or batch.
///
/// Decoding never panics and never allocates more than the input could
/// describe; every malformed input maps to one of these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// The input ended inside a value.
    UnexpectedEnd,
    /// The first two bytes are not the magic `LG`.
    BadMagic,
    /// The packet's protocol version is not this crate's.
    UnsupportedVersion(u8),
    /// A varint is longer than the canonical encoding of its value.
    NonCanonicalVarint,
    /// A varint does not fit 64 bits.
    VarintOverflow,
    /// A field's value is outside its domain (the field is named).
    OutOfRange(&'static str),
    /// An unknown frame code.
    UnknownFrame(u8),
    /// An unknown command kind in an Input frame.
    UnknownCommand(u8),
    /// A count exceeds a protocol limit or the bytes left (the field is named).
    TooMany(&'static str),
    /// Bytes remain after a value that must fill its input exactly.
    TrailingBytes,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::UnexpectedEnd => f.write_str("input ended inside a value"),
            DecodeError::BadMagic => f.write_str("not a lockgrid packet (bad magic)"),
            DecodeError::UnsupportedVersion(v) => write!(f, "unsupported protocol version {v}"),
            DecodeError::NonCanonicalVarint => f.write_str("varint is not in canonical form"),
            DecodeError::VarintOverflow => f.write_str("varint does not fit 64 bits"),
            DecodeError::OutOfRange(field) => write!(f, "{field} is out of range"),
            DecodeError::UnknownFrame(c) => write!(f, "unknown frame code 0x{c:02x}"),
            DecodeError::UnknownCommand(c) => write!(f, "unknown command kind {c}"),
            DecodeError::TooMany(field) => write!(f, "too many {field}"),
            DecodeError::TrailingBytes => f.write_str("trailing bytes after value"),
        }
    }
}

impl core::error::Error for DecodeError {}

/// Why a tick batch could not be encoded or applied to a view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BatchError {
    /// The bytes are malformed.
    Decode(DecodeError),
    /// Not even one event (or an empty batch) fits the buffer; `needed` bytes would.
    BufferTooSmall {
        /// Bytes the smallest non-empty part needs.
        needed: usize,
    },
    /// Events are not in contract order for one observer.
    OutOfOrder,
    /// View events name more than one observer.
    MixedObservers,
    /// A Leave or Update names a subject the view does not hold.
    NotVisible(u64),
    /// An Enter names a subject the view already holds.
    AlreadyVisible(u64),
}

impl From<DecodeError> for BatchError {
    fn from(e: DecodeError) -> Self {
        BatchError::Decode(e)
    }
}

impl fmt::Display for BatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BatchError::Decode(e) => write!(f, "malformed batch: {e}"),
            BatchError::BufferTooSmall { needed } => {
                write!(f, "buffer too small: {needed} bytes needed")
            }
            BatchError::OutOfOrder => f.write_str("events are not in contract order"),
            BatchError::MixedObservers => f.write_str("events name more than one observer"),
            BatchError::NotVisible(id) => write!(f, "subject {id} is not in the view"),
            BatchError::AlreadyVisible(id) => write!(f, "subject {id} is already in the view"),
        }
    }
}

impl core::error::Error for BatchError {}
