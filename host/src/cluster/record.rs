//! The bytes the cluster exchanges: tick records on the stream (the
//! journal record of `docs/journal.md`, one message per tick, stream
//! sequence = tick), the batch header naming the forwarded batches a tick
//! took, and forwarded batches themselves. Every decoder bounds what it
//! allocates by the bytes it was given and names the stream sequence of a
//! record it refuses.

use core::fmt;

use lockgrid_kernel::Command;

use crate::journal::format::{
    decode_payload, encode_record, record_crc, PayloadFault, MAX_PAYLOAD, MIN_PAYLOAD,
    RECORD_PREFIX,
};
use crate::journal::Record;

/// The message header listing, per node slot, the last forwarded batch a
/// tick took: `"slot:seq slot:seq"`.
pub const BATCHES_HEADER: &str = "Lockgrid-Batches";

/// Most entries a batch header may name (one per node).
pub const MAX_BATCH_ENTRIES: usize = 1024;

/// Why a stream message is not the tick record it should be.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordFault {
    /// Shorter than a record's prefix and smallest payload.
    Short(usize),
    /// The prefix's length disagrees with the message's size, or is out of range.
    Length {
        /// The length the prefix declares.
        declared: u32,
        /// The payload bytes the message holds.
        held: usize,
    },
    /// The CRC does not match.
    Crc,
    /// The payload does not decode (a bad tag, flag or length).
    Payload(String),
    /// The record's tick is not its stream sequence.
    Tick(u64),
    /// The batch header is malformed.
    Batches(String),
}

impl fmt::Display for RecordFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordFault::Short(n) => write!(f, "only {n} bytes, less than any record"),
            RecordFault::Length { declared, held } => write!(
                f,
                "declares a {declared}-byte payload but holds {held} bytes"
            ),
            RecordFault::Crc => f.write_str("its CRC does not match"),
            RecordFault::Payload(why) => write!(f, "its payload does not decode ({why})"),
            RecordFault::Tick(t) => write!(f, "holds tick {t}"),
            RecordFault::Batches(why) => write!(f, "its batch header is malformed ({why})"),
        }
    }
}

/// Decodes the record a stream message at sequence `seq` holds, checking
/// length, CRC, payload and that its tick is `seq`.
pub fn decode_record(seq: u64, bytes: &[u8]) -> Result<Record, RecordFault> {
    if bytes.len() < RECORD_PREFIX + MIN_PAYLOAD {
        return Err(RecordFault::Short(bytes.len()));
    }
    let declared = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    let crc = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
    let payload = &bytes[RECORD_PREFIX..];
    if declared as usize != payload.len() || payload.len() > MAX_PAYLOAD {
        return Err(RecordFault::Length {
            declared,
            held: payload.len(),
        });
    }
    if record_crc(declared, payload) != crc {
        return Err(RecordFault::Crc);
    }
    let record = decode_payload(payload).map_err(|f| {
        RecordFault::Payload(match f {
            PayloadFault::Length => "length".into(),
            PayloadFault::Tag(t) => format!("unknown command tag {t}"),
            PayloadFault::Flag(v) => format!("observer byte {v}"),
        })
    })?;
    if record.tick != seq {
        return Err(RecordFault::Tick(record.tick));
    }
    Ok(record)
}

/// The record bytes of one tick.
pub fn encode_tick(tick: u64, commands: &[Command], digest: u64) -> Vec<u8> {
    let mut out = Vec::new();
    encode_record(&mut out, tick, commands, digest);
    out
}

/// Parses a batch header value: `(slot, last batch seq)` pairs.
pub fn decode_batches(value: &str) -> Result<Vec<(u32, u64)>, RecordFault> {
    let mut out = Vec::new();
    for part in value.split_ascii_whitespace() {
        if out.len() >= MAX_BATCH_ENTRIES {
            return Err(RecordFault::Batches(format!(
                "more than {MAX_BATCH_ENTRIES} entries"
            )));
        }
        let (slot, seq) = part
            .split_once(':')
            .ok_or_else(|| RecordFault::Batches(format!("{part:?} is not slot:seq")))?;
        let slot = slot
            .parse()
            .map_err(|_| RecordFault::Batches(format!("bad slot in {part:?}")))?;
        let seq = seq
            .parse()
            .map_err(|_| RecordFault::Batches(format!("bad seq in {part:?}")))?;
        out.push((slot, seq));
    }
    Ok(out)
}

/// Formats a batch header value.
pub fn encode_batches(batches: &[(u32, u64)]) -> String {
    let parts: Vec<String> = batches.iter().map(|(s, q)| format!("{s}:{q}")).collect();
    parts.join(" ")
}

/// One forwarded batch: a node's client commands for the leader to put
/// in a tick, numbered per node from 1.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Batch {
    /// The forwarding node's slot.
    pub slot: u32,
    /// The batch's number on that node.
    pub seq: u64,
    /// The commands, in order.
    pub commands: Vec<Command>,
}

impl Batch {
    /// Its bytes: slot, seq, then the commands as a journal record of tick 0.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(12);
        out.extend_from_slice(&self.slot.to_le_bytes());
        out.extend_from_slice(&self.seq.to_le_bytes());
        encode_record(&mut out, 0, &self.commands, 0);
        out
    }

    /// Reads a batch from untrusted bytes.
    pub fn decode(bytes: &[u8]) -> Result<Batch, RecordFault> {
        if bytes.len() < 12 {
            return Err(RecordFault::Short(bytes.len()));
        }
        let slot = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&bytes[4..12]);
        let record = decode_record(0, &bytes[12..])?;
        Ok(Batch {
            slot,
            seq: u64::from_le_bytes(seq),
            commands: record.commands,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgrid_kernel::Command;

    #[test]
    fn records_round_trip_and_refuse_damage() {
        let commands = [Command::Despawn { id: 7 }];
        let bytes = encode_tick(3, &commands, 0x0102);
        let r = decode_record(3, &bytes).unwrap();
        assert_eq!((r.tick, r.digest, r.commands.len()), (3, 0x0102, 1));
        assert_eq!(decode_record(4, &bytes), Err(RecordFault::Tick(3)));
        let mut bad = bytes.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert_eq!(decode_record(3, &bad), Err(RecordFault::Crc));
        assert!(matches!(
            decode_record(3, &bytes[..bytes.len() - 1]),
            Err(RecordFault::Length { .. })
        ));
        assert_eq!(decode_record(3, &bytes[..5]), Err(RecordFault::Short(5)));
    }

    #[test]
    fn batches_round_trip() {
        let b = Batch {
            slot: 2,
            seq: 9,
            commands: vec![Command::Despawn { id: 1 }],
        };
        assert_eq!(Batch::decode(&b.encode()).unwrap(), b);
        assert!(Batch::decode(&b.encode()[..20]).is_err());
        let h = encode_batches(&[(1, 5), (3, 8)]);
        assert_eq!(decode_batches(&h).unwrap(), vec![(1, 5), (3, 8)]);
        assert!(decode_batches("1:x").is_err());
        assert!(decode_batches("nope").is_err());
    }
}
