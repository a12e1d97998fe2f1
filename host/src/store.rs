//! A data folder: the journal, periodic snapshots, and crash recovery.
//!
//! ```text
//! DATA_DIR/journal.lgj                               every tick's input and digest
//! DATA_DIR/snapshots/snapshot-00000000000000000100.lgs  state after tick 100
//! ```
//!
//! The journal is the source of truth; snapshots only shorten recovery and
//! give replays a recorded state to diff against. A damaged or unreadable
//! snapshot is skipped (and reported), never trusted.

mod leftovers;
mod recover;
mod snapshot_file;

use core::fmt;
use std::io;
use std::path::{Path, PathBuf};

use lockgrid_kernel::{Command, Config, TickReport, World};

use crate::journal::{Journal, JournalError, SyncPolicy};

pub use leftovers::remove_leftover_temp_files;
pub use recover::{recover, RecoveryReport};
pub use snapshot_file::{
    list_snapshots, read_snapshot, snapshot_file_name, write_snapshot, SnapshotError, WriteStep,
    SNAPSHOT_HEADER_LEN, SNAPSHOT_MAGIC, SNAPSHOT_VERSION,
};

/// The journal's file name inside a data folder.
pub const JOURNAL_FILE: &str = "journal.lgj";
/// The snapshots' folder name inside a data folder.
pub const SNAPSHOT_DIR: &str = "snapshots";

/// The journal of data folder `dir`.
pub fn journal_path(dir: &Path) -> PathBuf {
    dir.join(JOURNAL_FILE)
}

/// The snapshot folder of data folder `dir`.
pub fn snapshot_dir(dir: &Path) -> PathBuf {
    dir.join(SNAPSHOT_DIR)
}

/// How a [`Recorder`] persists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoreOptions {
    /// When the journal waits for the disk.
    pub sync: SyncPolicy,
    /// Write a snapshot after every tick that is a multiple of this (0: never).
    pub snapshot_every: u64,
    /// Snapshots to keep; older ones are deleted after a new one is written (0: keep all).
    pub keep_snapshots: usize,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            sync: SyncPolicy::EveryTick,
            snapshot_every: 600,
            keep_snapshots: 4,
        }
    }
}

/// Why a data folder could not be written, read or recovered.
#[derive(Debug)]
#[non_exhaustive]
pub enum StoreError {
    /// An operating-system error outside the journal and snapshots.
    Io(io::Error),
    /// The journal failed.
    Journal(JournalError),
    /// A snapshot could not be written.
    Snapshot {
        /// The file.
        path: PathBuf,
        /// Why.
        error: SnapshotError,
    },
    /// The journal's config cannot build a world.
    Config(lockgrid_kernel::ConfigError),
    /// A tick past the journal's end was asked for.
    NoSuchTick {
        /// The tick asked for.
        tick: u64,
        /// The journal's last tick.
        last: u64,
    },
    /// Re-running the journal gave another digest than the one journaled.
    Diverged {
        /// The first tick whose digests differ.
        tick: u64,
        /// The digest in the journal.
        journaled: u64,
        /// The digest the kernel computed now.
        replayed: u64,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::Io(e) => write!(f, "{e}"),
            StoreError::Journal(e) => write!(f, "journal: {e}"),
            StoreError::Snapshot { path, error } => {
                write!(f, "snapshot {}: {error}", path.display())
            }
            StoreError::Config(e) => write!(f, "journal config: {e}"),
            StoreError::NoSuchTick { tick, last } => {
                write!(f, "tick {tick} is past the journal's last tick {last}")
            }
            StoreError::Diverged {
                tick,
                journaled,
                replayed,
            } => write!(
                f,
                "tick {tick} replays to digest {replayed:016x}, the journal says {journaled:016x}"
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Io(e) => Some(e),
            StoreError::Journal(e) => Some(e),
            StoreError::Snapshot { error, .. } => Some(error),
            StoreError::Config(e) => Some(e),
            StoreError::NoSuchTick { .. } | StoreError::Diverged { .. } => None,
        }
    }
}

impl From<JournalError> for StoreError {
    fn from(e: JournalError) -> Self {
        StoreError::Journal(e)
    }
}

impl From<io::Error> for StoreError {
    fn from(e: io::Error) -> Self {
        StoreError::Io(e)
    }
}

/// Journals ticks and writes snapshots into a data folder: what a server
/// loop calls once per tick, before sending that tick's results.
pub struct Recorder {
    journal: Journal,
    dir: PathBuf,
    options: StoreOptions,
    removed_temp_files: Vec<PathBuf>,
}

impl Recorder {
    /// Creates data folder `dir` (which must not hold a journal yet) for a
    /// world built from `config`. Temporary files left there by an
    /// interrupted writer are removed first (see
    /// [`removed_temp_files`](Recorder::removed_temp_files)).
    pub fn create(
        dir: &Path,
        config: &Config,
        options: StoreOptions,
    ) -> Result<Recorder, StoreError> {
        let removed_temp_files = remove_leftover_temp_files(dir)?;
        std::fs::create_dir_all(snapshot_dir(dir))?;
        let journal = Journal::create(&journal_path(dir), config, options.sync)?;
        Ok(Recorder {
            journal,
            dir: dir.to_owned(),
            options,
            removed_temp_files,
        })
    }

    pub(crate) fn from_parts(
        journal: Journal,
        dir: &Path,
        options: StoreOptions,
        removed_temp_files: Vec<PathBuf>,
    ) -> Recorder {
        Recorder {
            journal,
            dir: dir.to_owned(),
            options,
            removed_temp_files,
        }
    }

    /// The temporary files of an interrupted writer that opening the data
    /// folder removed (each also logged as a warning).
    pub fn removed_temp_files(&self) -> &[PathBuf] {
        &self.removed_temp_files
    }

    /// The journal being written.
    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    /// Journals the tick just stepped (durable as the sync policy says) and
    /// writes a snapshot of `world` when one is due.
    pub fn record(
        &mut self,
        world: &World,
        commands: &[Command],
        report: &TickReport,
    ) -> Result<(), StoreError> {
        self.journal.append(report.tick, commands, report.digest)?;
        self.journal.sync()?;
        let every = self.options.snapshot_every;
        if every > 0 && report.tick.is_multiple_of(every) {
            self.snapshot(world)?;
        }
        Ok(())
    }

    /// Writes a snapshot of `world` now and prunes old ones.
    pub fn snapshot(&mut self, world: &World) -> Result<PathBuf, StoreError> {
        let dir = snapshot_dir(&self.dir);
        let path =
            write_snapshot(&dir, &world.snapshot()).map_err(|error| StoreError::Snapshot {
                path: dir.join(snapshot_file_name(world.tick())),
                error,
            })?;
        let keep = self.options.keep_snapshots;
        if keep > 0 {
            let all = list_snapshots(&dir)?;
            for (_, old) in all.iter().take(all.len().saturating_sub(keep)) {
                std::fs::remove_file(old)?;
            }
        }
        Ok(path)
    }

    /// Syncs and closes the journal.
    pub fn close(self) -> Result<(), StoreError> {
        Ok(self.journal.close()?)
    }
}
