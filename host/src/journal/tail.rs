//! What follows a damaged record: one pass over the rest of the file, in
//! time linear in its size, that says whether a valid record of a later
//! tick starts anywhere after the damage and what the damaged bytes are.
//!
//! A record can start at any byte offset after the damage, so every offset
//! is a candidate. Checking a candidate's CRC costs its claimed length (up
//! to 16 MiB), and in random bytes one offset in 256 claims a plausible
//! length: checking them all was quadratic (a few tens of MiB of garbage
//! took tens of seconds). A candidate's CRC is therefore only computed when
//! its tick is one that could really follow — greater than the last good
//! tick and at most one more per 28 bytes (the smallest record) since the
//! damage — and its command count fits its length. Random bytes pass that
//! filter about once in 2^40 offsets. A file crafted to pass it everywhere
//! cannot make the scan quadratic either: CRC work is capped at a multiple
//! of the damaged region's size, and past the cap the scan says so instead
//! of guessing.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use super::format::{decode_payload, record_crc, MAX_PAYLOAD, MIN_PAYLOAD, RECORD_PREFIX};

/// The smallest whole record: prefix and an empty tick.
const MIN_RECORD: u64 = (RECORD_PREFIX + MIN_PAYLOAD) as u64;
/// Bytes of a candidate looked at before its CRC: prefix, tick, digest,
/// command count, first command tag.
const PEEK: usize = RECORD_PREFIX + MIN_PAYLOAD + 1;
/// Candidate starts examined per read.
const CHUNK: usize = 1 << 20;
/// Smallest and largest encoded command, tag included (`format.rs`).
const MIN_COMMAND: u64 = 9;
const MAX_COMMAND: u64 = 52;

/// What [`scan_tail`] found after a damaged record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TailScan {
    /// The first valid record of a later tick after the damage:
    /// `(file offset, tick)`.
    pub later_record: Option<(u64, u64)>,
    /// Bytes from the damage to the end of the file that are not zero
    /// (counted up to `later_record` when one was found).
    pub nonzero: u64,
    /// The CRC work cap was reached before every record-like candidate was
    /// checked: whether valid records follow is unknown.
    pub undecided: bool,
}

/// Scans `file[offset..len]`, where the record at `offset` is damaged and
/// `last_tick` is the last good tick. `also_after` is a second tick a later
/// record may continue from (the tick a complete record out of sequence
/// carried), so records continuing either numbering are found.
pub(crate) fn scan_tail(
    file: &mut File,
    offset: u64,
    len: u64,
    last_tick: u64,
    also_after: Option<u64>,
) -> io::Result<TailScan> {
    let rest = len.saturating_sub(offset);
    let mut budget = rest
        .saturating_mul(4)
        .saturating_add(4 * (RECORD_PREFIX + MAX_PAYLOAD) as u64);
    let mut scan = TailScan {
        later_record: None,
        nonzero: 0,
        undecided: false,
    };
    let mut window = vec![0u8; CHUNK + PEEK];
    let mut payload = Vec::new();
    let mut chunk_start = offset;
    while chunk_start < len {
        let filled = read_at(file, chunk_start, &mut window)?;
        let owned = filled.min(CHUNK);
        scan.nonzero += window[..owned].iter().filter(|b| **b != 0).count() as u64;
        // The length alone rules out nearly every offset; this loop is
        // the whole cost of a garbage tail, so it looks at nothing else.
        let lengths = window[..filled.min(owned + 3)].windows(4).enumerate();
        for (i, word) in lengths {
            let n = u32::from_le_bytes([word[0], word[1], word[2], word[3]]) as usize;
            if !(MIN_PAYLOAD..=MAX_PAYLOAD).contains(&n) {
                continue;
            }
            let at = chunk_start + i as u64;
            if at == offset {
                continue; // the damaged record itself
            }
            let Some(head) = window.get(i..i + PEEK.min(filled - i)) else {
                break;
            };
            let Some((payload_len, tick)) =
                record_like(head, at - offset, len - at, last_tick, also_after)
            else {
                continue;
            };
            if budget < u64::from(payload_len) {
                scan.undecided = true;
                return Ok(scan);
            }
            budget -= u64::from(payload_len);
            payload.resize(payload_len as usize, 0);
            let read = read_at(file, at + RECORD_PREFIX as u64, &mut payload)?;
            let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
            if read == payload.len()
                && record_crc(payload_len, &payload) == crc
                && decode_payload(&payload).is_ok()
            {
                // Count what lies between the damage and the record only.
                scan.nonzero -= window[i..owned].iter().filter(|b| **b != 0).count() as u64;
                scan.later_record = Some((at, tick));
                return Ok(scan);
            }
        }
        chunk_start += owned as u64;
        if owned == 0 {
            break;
        }
    }
    Ok(scan)
}

/// Whether the bytes at a candidate start look like a record of a tick that
/// could follow: returns its payload length and tick. `distance` is the
/// candidate's distance from the damage, `remaining` the file's bytes from it.
fn record_like(
    head: &[u8],
    distance: u64,
    remaining: u64,
    last_tick: u64,
    also_after: Option<u64>,
) -> Option<(u32, u64)> {
    if head.len() < PEEK - 1 {
        return None;
    }
    let u32_at =
        |at: usize| u32::from_le_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let len = u32_at(0);
    if (len as usize) < MIN_PAYLOAD
        || len as usize > MAX_PAYLOAD
        || (RECORD_PREFIX as u64 + u64::from(len)) > remaining
    {
        return None;
    }
    let mut tick = [0u8; 8];
    tick.copy_from_slice(&head[RECORD_PREFIX..RECORD_PREFIX + 8]);
    let tick = u64::from_le_bytes(tick);
    // Every record between the damage and this one takes at least MIN_RECORD bytes.
    let most_ahead = 1 + distance / MIN_RECORD;
    let follows = |after: u64| tick > after && tick - after <= most_ahead;
    if !follows(last_tick) && !also_after.is_some_and(follows) {
        return None;
    }
    let count = u64::from(u32_at(RECORD_PREFIX + 16));
    let commands = u64::from(len) - MIN_PAYLOAD as u64;
    if count == 0 {
        return (commands == 0).then_some((len, tick));
    }
    let tag = *head.get(PEEK - 1)?;
    let fits = count * MIN_COMMAND <= commands && commands <= count * MAX_COMMAND;
    (fits && (1..=3).contains(&tag)).then_some((len, tick))
}

/// Reads from `at` until `buf` is full or the file ends; returns the bytes read.
fn read_at(file: &mut File, at: u64, buf: &mut [u8]) -> io::Result<usize> {
    file.seek(SeekFrom::Start(at))?;
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}
