//! Everything that can be wrong with a journal, by name.

use core::fmt;
use std::io;

/// What is wrong with one record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordFault {
    /// The file ends inside the record.
    Truncated,
    /// The length prefix is below the smallest or above the largest payload.
    Length(u32),
    /// The CRC does not match the length and payload.
    Checksum,
    /// The CRC matches but the payload does not decode (ends inside a
    /// command, trailing bytes, unknown command tag or flag).
    Payload,
    /// The record's tick does not follow the previous record's.
    TickSequence {
        /// The tick that should come next.
        expected: u64,
        /// The tick found.
        found: u64,
    },
}

impl fmt::Display for RecordFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordFault::Truncated => f.write_str("the file ends inside the record"),
            RecordFault::Length(n) => write!(f, "impossible payload length {n}"),
            RecordFault::Checksum => f.write_str("CRC mismatch"),
            RecordFault::Payload => f.write_str("the payload does not decode"),
            RecordFault::TickSequence { expected, found } => {
                write!(f, "tick {found} where tick {expected} should follow")
            }
        }
    }
}

/// An incomplete last record, cut off by a crash mid-append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TornTail {
    /// File offset where the bad record starts (the journal's valid length).
    pub offset: u64,
    /// Bytes from `offset` to the end of the file.
    pub bytes: u64,
    /// What was wrong with it.
    pub fault: RecordFault,
    /// The last complete tick before it (0 when none).
    pub after_tick: u64,
    /// How many of the `bytes` are not zero.
    pub nonzero: u64,
}

impl fmt::Display for TornTail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "torn tail after tick {}: {} bytes at offset {} ({}; {}; no valid record follows)",
            self.after_tick,
            self.bytes,
            self.offset,
            self.fault,
            Content(self.nonzero)
        )
    }
}

/// How a damaged region reads to a person: all zeros, or how much is not.
struct Content(u64);

impl fmt::Display for Content {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str("all zero bytes"),
            n => write!(f, "{n} non-zero bytes"),
        }
    }
}

/// Why a journal cannot be opened, read or appended to.
#[derive(Debug)]
#[non_exhaustive]
pub enum JournalError {
    /// An operating-system error.
    Io(io::Error),
    /// `create` found a journal already there.
    Exists,
    /// The file is shorter than its header.
    TruncatedHeader {
        /// The file's length.
        len: u64,
    },
    /// The file does not start with the journal magic.
    BadMagic,
    /// The header names a format version this build cannot read.
    UnsupportedVersion(u32),
    /// The header's config length does not match its version.
    BadConfigLength(u32),
    /// The header's CRC does not match.
    HeaderChecksum,
    /// The header's config has an unknown visibility code.
    BadVisibility(u8),
    /// A damaged record is followed by a valid record of a later tick: not
    /// a torn tail but corruption of durable data. Nothing is truncated.
    Corrupt {
        /// File offset of the damaged record.
        offset: u64,
        /// The last good tick before it.
        after_tick: u64,
        /// What is wrong with it.
        fault: RecordFault,
        /// File offset of the first valid record found after it.
        next_offset: u64,
        /// That record's tick.
        next_tick: u64,
    },
    /// No valid record follows a damaged record, but the damaged region is
    /// larger than a crash can leave ([`MAX_TAIL`](super::MAX_TAIL) bytes):
    /// acknowledged ticks were probably lost. Nothing is truncated.
    TailTooLong {
        /// File offset of the damaged record.
        offset: u64,
        /// The last good tick before it.
        after_tick: u64,
        /// What is wrong with it.
        fault: RecordFault,
        /// Bytes from `offset` to the end of the file.
        bytes: u64,
        /// How many of them are not zero.
        nonzero: u64,
    },
    /// The damaged region holds more record-like headers than could be
    /// checked in time linear in its size, so whether valid records follow
    /// is unknown (only a file crafted for it does this). Nothing is truncated.
    Undecided {
        /// File offset of the damaged record.
        offset: u64,
        /// The last good tick before it.
        after_tick: u64,
        /// What is wrong with it.
        fault: RecordFault,
        /// Bytes from `offset` to the end of the file.
        bytes: u64,
    },
    /// `append` was given a tick that does not follow the last one.
    OutOfSequence {
        /// The tick that should come next.
        expected: u64,
        /// The tick given.
        given: u64,
    },
    /// `append` was given a tick whose record would exceed the largest payload.
    TickTooLarge {
        /// Encoded payload size.
        bytes: usize,
    },
    /// An earlier write failed and could not be undone: the file's end is
    /// unknown, so nothing more is appended. Reopen to recover.
    Poisoned,
}

impl fmt::Display for JournalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JournalError::Io(e) => write!(f, "{e}"),
            JournalError::Exists => f.write_str("a journal already exists"),
            JournalError::TruncatedHeader { len } => {
                write!(f, "the file ({len} bytes) is shorter than a journal header")
            }
            JournalError::BadMagic => f.write_str("not a lockgrid journal (bad magic)"),
            JournalError::UnsupportedVersion(v) => write!(
                f,
                "unsupported journal version {v} (this build reads version {})",
                super::VERSION
            ),
            JournalError::BadConfigLength(n) => write!(f, "bad config length {n} in the header"),
            JournalError::HeaderChecksum => f.write_str("header CRC mismatch"),
            JournalError::BadVisibility(v) => write!(f, "unknown visibility code {v} in the header"),
            JournalError::Corrupt {
                offset,
                after_tick,
                fault,
                next_offset,
                next_tick,
            } => write!(
                f,
                "corrupt record at offset {offset} after tick {after_tick}: {fault}; a valid record of tick {next_tick} follows at offset {next_offset}, so this is damage to durable data, not a torn tail (nothing was changed)"
            ),
            JournalError::TailTooLong {
                offset,
                after_tick,
                fault,
                bytes,
                nonzero,
            } => write!(
                f,
                "unreadable tail after tick {after_tick}: {bytes} bytes at offset {offset} ({fault}; {}; no valid record follows), more than an interrupted append leaves (at most {} bytes), so acknowledged ticks were probably lost; nothing was changed. To go on from tick {after_tick}, cut the journal to {offset} bytes (truncate -s {offset} journal.lgj)",
                Content(*nonzero),
                super::MAX_TAIL
            ),
            JournalError::Undecided {
                offset,
                after_tick,
                fault,
                bytes,
            } => write!(
                f,
                "damaged record at offset {offset} after tick {after_tick}: {fault}; the {bytes} bytes after it hold too many record-like headers to check whether valid records follow, so it is not taken for a torn tail (nothing was changed)"
            ),
            JournalError::OutOfSequence { expected, given } => {
                write!(f, "tick {given} appended where tick {expected} should follow")
            }
            JournalError::TickTooLarge { bytes } => {
                write!(f, "a tick of {bytes} bytes exceeds the largest record")
            }
            JournalError::Poisoned => {
                f.write_str("an earlier write failed; reopen the journal to recover")
            }
        }
    }
}

impl std::error::Error for JournalError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            JournalError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for JournalError {
    fn from(e: io::Error) -> Self {
        JournalError::Io(e)
    }
}
