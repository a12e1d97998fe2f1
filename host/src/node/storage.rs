//! The node's persistence, behind a small trait: a journal of tick records
//! and a set of state snapshots.
//!
//! The node calls [`Storage::append`] then [`Storage::sync`] for every tick
//! and sends nothing about the tick before `sync` returns; it calls
//! [`Storage::write_snapshot`] now and then and survives its failure. Two
//! implementations ship: [`FileStorage`](super::FileStorage), the data
//! folder of `docs/journal.md`, and [`MemStorage`](super::MemStorage), a
//! simulated disk for tests that can lose or tear unsynced writes and fail
//! on request.

use core::fmt;
use std::io;

use lockgrid_kernel::{Command, Config, Snapshot};

use crate::journal::{JournalError, Record};
use crate::store::{SnapshotError, StoreError};

/// What [`Storage::open`] found in a storage that already holds a journal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opened {
    /// The world config the journal was created for.
    pub config: Config,
    /// The last complete tick in the journal (0 when it has none).
    pub last_tick: u64,
    /// What was cut off the journal's end (an incomplete last record left
    /// by a crash), said in words; `None` when the journal ended cleanly.
    pub cut: Option<String>,
}

/// Where the node's journal and snapshots live.
///
/// Every method may fail; what the node does then is part of its contract:
/// a failed `append` or `sync` stops the node (no tick after the last
/// durable one is ever sent), a failed `write_snapshot` is counted and the
/// node serves on.
pub trait Storage {
    /// Opens what the storage holds: `None` when it holds no journal yet,
    /// else the journal's config and last tick, after cutting off an
    /// incomplete last record.
    fn open(&mut self) -> Result<Option<Opened>, StorageError>;

    /// Starts an empty journal for a world built from `config`.
    fn create(&mut self, config: &Config) -> Result<(), StorageError>;

    /// Every journaled record, in tick order (as [`open`](Self::open) left
    /// the journal).
    fn records(
        &mut self,
    ) -> Result<Box<dyn Iterator<Item = Result<Record, StorageError>> + '_>, StorageError>;

    /// Appends one tick: `tick` is the last tick + 1, `commands` the tick's
    /// commands in the order applied, `digest` the world's digest after it.
    /// Not yet durable.
    fn append(&mut self, tick: u64, commands: &[Command], digest: u64) -> Result<(), StorageError>;

    /// Makes every appended tick durable, finishing what
    /// [`start_sync`](Self::start_sync) began.
    fn sync(&mut self) -> Result<(), StorageError>;

    /// Begins making every appended tick durable, for [`sync`](Self::sync)
    /// to finish: the node routes and encodes the tick (sending nothing)
    /// in between, so a storage that can wait for its disk elsewhere hides
    /// that wait. By default nothing happens here and `sync` does it all.
    fn start_sync(&mut self) -> Result<(), StorageError> {
        Ok(())
    }

    /// Stores a snapshot (replacing one of the same tick) and may drop old ones.
    fn write_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), StorageError>;

    /// The ticks of the stored snapshots, ascending.
    fn snapshots(&mut self) -> Result<Vec<u64>, StorageError>;

    /// Reads and checks the snapshot of `tick`.
    fn read_snapshot(&mut self, tick: u64) -> Result<Snapshot, StorageError>;

    /// Where the snapshot of `tick` is, said for people (a file's path, a
    /// place on a simulated disk): what reports of passed-over snapshots show.
    fn snapshot_place(&self, tick: u64) -> String {
        format!("of tick {tick}")
    }

    /// Makes everything durable and releases the storage.
    fn close(&mut self) -> Result<(), StorageError>;
}

/// Why a storage operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum StorageError {
    /// An operating-system (or simulated) I/O error.
    Io(io::Error),
    /// The journal refused or failed.
    Journal(JournalError),
    /// A snapshot could not be written or read.
    Snapshot(SnapshotError),
    /// The stored bytes are not what the format says.
    Damaged(String),
    /// The storage is in a state the node cannot start from.
    Refused(String),
    /// The data folder refused (snapshots without a journal, say) or
    /// holds a journal whose config cannot build a world.
    Store(StoreError),
}

impl fmt::Display for StorageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StorageError::Io(e) => write!(f, "{e}"),
            StorageError::Journal(e) => write!(f, "journal: {e}"),
            StorageError::Snapshot(e) => write!(f, "snapshot: {e}"),
            StorageError::Damaged(m) => write!(f, "damaged: {m}"),
            StorageError::Refused(m) => f.write_str(m),
            StorageError::Store(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for StorageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StorageError::Io(e) => Some(e),
            StorageError::Journal(e) => Some(e),
            StorageError::Snapshot(e) => Some(e),
            StorageError::Store(e) => Some(e),
            StorageError::Damaged(_) | StorageError::Refused(_) => None,
        }
    }
}

impl From<io::Error> for StorageError {
    fn from(e: io::Error) -> Self {
        StorageError::Io(e)
    }
}

impl From<JournalError> for StorageError {
    fn from(e: JournalError) -> Self {
        StorageError::Journal(e)
    }
}

impl From<StoreError> for StorageError {
    fn from(e: StoreError) -> Self {
        StorageError::Store(e)
    }
}

impl From<SnapshotError> for StorageError {
    fn from(e: SnapshotError) -> Self {
        StorageError::Snapshot(e)
    }
}
