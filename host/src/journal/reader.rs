//! Reading a journal front to back, telling a torn tail from corruption.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use lockgrid_kernel::Config;

use super::error::{JournalError, RecordFault, TornTail};
use super::format::{
    decode_header, decode_payload, record_crc, HeaderFault, Record, HEADER_LEN, MAX_PAYLOAD,
    MIN_PAYLOAD, RECORD_PREFIX,
};
use super::tail::scan_tail;

/// Reads a journal's records in order without modifying the file.
///
/// A damaged record is a *torn tail* (reported by [`JournalReader::torn_tail`],
/// reading simply ends) when no valid later record follows it anywhere in
/// the file and the damaged region is no larger than a crash can leave
/// ([`MAX_TAIL`]); a valid later record makes it [`JournalError::Corrupt`],
/// a larger region [`JournalError::TailTooLong`]. Telling them apart reads
/// the rest of the file once, in time linear in its size.
pub struct JournalReader {
    file: BufReader<File>,
    config: Config,
    offset: u64,
    len: u64,
    last_tick: u64,
    last_digest: Option<u64>,
    torn: Option<TornTail>,
    done: bool,
    payload: Vec<u8>,
}

impl JournalReader {
    /// Opens a journal and checks its header.
    pub fn open(path: &Path) -> Result<JournalReader, JournalError> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        let config = read_header(&mut file, len)?;
        Ok(JournalReader {
            file: BufReader::with_capacity(1 << 16, file),
            config,
            offset: HEADER_LEN as u64,
            len,
            last_tick: 0,
            last_digest: None,
            torn: None,
            done: false,
            payload: Vec::new(),
        })
    }

    /// The world config the journal belongs to.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The tick of the last record read (0 before the first).
    pub fn last_tick(&self) -> u64 {
        self.last_tick
    }

    /// The digest of the last record read.
    pub fn last_digest(&self) -> Option<u64> {
        self.last_digest
    }

    /// File offset just past the last record read.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The torn tail found at the end, once reading has reached it.
    pub fn torn_tail(&self) -> Option<TornTail> {
        self.torn
    }

    /// The next record, or `None` at the end (clean, or at a torn tail).
    pub fn next_record(&mut self) -> Result<Option<Record>, JournalError> {
        if self.done {
            return Ok(None);
        }
        match self.read_one()? {
            Ok(Some(record)) => {
                self.offset += (RECORD_PREFIX + self.payload.len()) as u64;
                self.last_tick = record.tick;
                self.last_digest = Some(record.digest);
                Ok(Some(record))
            }
            Ok(None) => {
                self.done = true;
                Ok(None)
            }
            Err(fault) => {
                self.done = true;
                // A duplicate handle: reading is over, so sharing the offset is harmless.
                let mut file = self.file.get_ref().try_clone()?;
                let (offset, after_tick) = (self.offset, self.last_tick);
                let also_after = match fault {
                    RecordFault::TickSequence { found, .. } => Some(found),
                    _ => None,
                };
                let scan = scan_tail(&mut file, offset, self.len, after_tick, also_after)?;
                let bytes = self.len - offset;
                if let Some((next_offset, next_tick)) = scan.later_record {
                    return Err(JournalError::Corrupt {
                        offset,
                        after_tick,
                        fault,
                        next_offset,
                        next_tick,
                    });
                }
                if scan.undecided {
                    return Err(JournalError::Undecided {
                        offset,
                        after_tick,
                        fault,
                        bytes,
                    });
                }
                if bytes > MAX_TAIL {
                    return Err(JournalError::TailTooLong {
                        offset,
                        after_tick,
                        fault,
                        bytes,
                        nonzero: scan.nonzero,
                    });
                }
                self.torn = Some(TornTail {
                    offset,
                    bytes,
                    fault,
                    after_tick,
                    nonzero: scan.nonzero,
                });
                Ok(None)
            }
        }
    }

    /// Reads the record at `self.offset`: `Ok(None)` at a clean end.
    fn read_one(&mut self) -> io::Result<Result<Option<Record>, RecordFault>> {
        let mut prefix = [0u8; RECORD_PREFIX];
        match read_full(&mut self.file, &mut prefix)? {
            0 => return Ok(Ok(None)),
            RECORD_PREFIX => {}
            _ => return Ok(Err(RecordFault::Truncated)),
        }
        let len = u32::from_le_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
        let crc = u32::from_le_bytes([prefix[4], prefix[5], prefix[6], prefix[7]]);
        if (len as usize) < MIN_PAYLOAD || len as usize > MAX_PAYLOAD {
            return Ok(Err(RecordFault::Length(len)));
        }
        self.payload.resize(len as usize, 0);
        if read_full(&mut self.file, &mut self.payload)? < len as usize {
            return Ok(Err(RecordFault::Truncated));
        }
        Ok(check_record(len, crc, &self.payload, self.last_tick).map(Some))
    }
}

/// Validates a complete record read at the position after `last_tick`.
fn check_record(len: u32, crc: u32, payload: &[u8], last_tick: u64) -> Result<Record, RecordFault> {
    if record_crc(len, payload) != crc {
        return Err(RecordFault::Checksum);
    }
    let record = decode_payload(payload).map_err(|_| RecordFault::Payload)?;
    let expected = last_tick.saturating_add(1);
    if record.tick != expected {
        return Err(RecordFault::TickSequence {
            expected,
            found: record.tick,
        });
    }
    Ok(record)
}

/// Reads and checks the header; the file is left positioned after it.
pub(crate) fn read_header(file: &mut File, len: u64) -> Result<Config, JournalError> {
    if len < HEADER_LEN as u64 {
        return Err(JournalError::TruncatedHeader { len });
    }
    let mut header = [0u8; HEADER_LEN];
    file.seek(SeekFrom::Start(0))?;
    file.read_exact(&mut header)?;
    decode_header(&header).map_err(|fault| match fault {
        HeaderFault::Magic => JournalError::BadMagic,
        HeaderFault::Version(v) => JournalError::UnsupportedVersion(v),
        HeaderFault::ConfigLen(n) => JournalError::BadConfigLength(n),
        HeaderFault::Crc => JournalError::HeaderChecksum,
        HeaderFault::Visibility(v) => JournalError::BadVisibility(v),
    })
}

/// Fills `buf` as far as the reader allows; returns the bytes read.
fn read_full<R: Read>(reader: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Largest damaged region still taken for a torn tail: a crash can tear at
/// most the records written since the last sync (a sync-per-tick journal
/// tears at most one, plus the zeros of a partly written page). Anything
/// larger means acknowledged ticks were lost, which an operator must see
/// before the journal is cut.
pub const MAX_TAIL: u64 = 4 * (RECORD_PREFIX + MAX_PAYLOAD) as u64;
