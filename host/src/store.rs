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
mod restore;
mod snapshot_file;

use core::fmt;
use std::io;
use std::path::{Path, PathBuf};

use lockgrid_kernel::{Command, Config, TickReport, World};

use crate::journal::{JournalError, SyncPolicy};

pub use leftovers::remove_leftover_temp_files;
pub(crate) use restore::judge;
pub use restore::{restore_newest, restore_newest_in, PassedOver, PassedOverReason, Restored};
pub use snapshot_file::{
    decode_snapshot, encode_snapshot, list_snapshots, read_snapshot, snapshot_file_name,
    write_snapshot, SnapshotError, WriteStep, SNAPSHOT_HEADER_LEN, SNAPSHOT_MAGIC,
    SNAPSHOT_VERSION,
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
    /// When a new data folder is created where snapshots but no journal
    /// exist: delete those snapshots (the operator chose a new world)
    /// instead of refusing with [`StoreError::OrphanSnapshots`].
    pub discard_orphan_snapshots: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            sync: SyncPolicy::EveryTick,
            snapshot_every: 600,
            keep_snapshots: 4,
            discard_orphan_snapshots: false,
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
    /// A new world was to be created in a data folder that has snapshots
    /// but no journal: they belong to a world whose journal is gone, and
    /// starting another next to them would mix two worlds' files.
    OrphanSnapshots {
        /// The snapshots folder.
        dir: PathBuf,
        /// How many snapshot files it holds.
        count: usize,
        /// The newest one's tick.
        newest: u64,
    },
    /// A replay's tick range does not fit the journal.
    Range(crate::replay::RangeError),
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
            StoreError::Range(e) => write!(f, "{e}"),
            StoreError::OrphanSnapshots { dir, count, newest } => write!(
                f,
                "{} holds {count} snapshot(s) (the newest of tick {newest}) but there is no journal: they belong to a world whose journal is gone. \
                 Refusing to start a new world next to them: move {} away to keep them, or delete them to start a new world (lockgrid serve --discard-snapshots does)",
                dir.display(),
                dir.display()
            ),
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
            StoreError::Range(e) => Some(e),
            StoreError::NoSuchTick { .. }
            | StoreError::OrphanSnapshots { .. }
            | StoreError::Diverged { .. } => None,
        }
    }
}

impl From<JournalError> for StoreError {
    fn from(e: JournalError) -> Self {
        StoreError::Journal(e)
    }
}

impl From<crate::node::StorageError> for StoreError {
    /// Errors of a data folder's [`FileStorage`](crate::node::FileStorage)
    /// keep their kind; what only a storage can say becomes invalid data.
    fn from(e: crate::node::StorageError) -> Self {
        use crate::node::StorageError;
        match e {
            StorageError::Io(e) => StoreError::Io(e),
            StorageError::Journal(e) => StoreError::Journal(e),
            StorageError::Store(e) => e,
            other => StoreError::Io(io::Error::new(
                io::ErrorKind::InvalidData,
                other.to_string(),
            )),
        }
    }
}

impl From<io::Error> for StoreError {
    fn from(e: io::Error) -> Self {
        StoreError::Io(e)
    }
}

/// Journals ticks and writes snapshots into a data folder for a loop that
/// steps a world itself (`lockgrid run --journal`): the node's
/// [`FileStorage`](crate::node::FileStorage) plus the snapshot schedule, so
/// both write the same files the same way.
pub struct Recorder {
    storage: crate::node::FileStorage,
    dir: PathBuf,
    snapshot_every: u64,
}

impl Recorder {
    /// Creates data folder `dir` (which must not hold a journal yet) for a
    /// world built from `config`. Temporary files left there by an
    /// interrupted writer are removed first (see
    /// [`removed_temp_files`](Recorder::removed_temp_files)). Snapshots
    /// without a journal are refused ([`StoreError::OrphanSnapshots`])
    /// unless [`StoreOptions::discard_orphan_snapshots`] says to delete them.
    pub fn create(
        dir: &Path,
        config: &Config,
        options: StoreOptions,
    ) -> Result<Recorder, StoreError> {
        use crate::node::Storage;
        // Checked before opening: opening an existing journal would cut its tail.
        if journal_path(dir).exists() {
            return Err(StoreError::Journal(JournalError::Exists));
        }
        let mut storage = crate::node::FileStorage::new(dir, options.sync, options.keep_snapshots)
            .discard_orphan_snapshots(options.discard_orphan_snapshots);
        if storage.open()?.is_some() {
            return Err(StoreError::Journal(JournalError::Exists));
        }
        storage.create(config)?;
        Ok(Recorder {
            storage,
            dir: dir.to_owned(),
            snapshot_every: options.snapshot_every,
        })
    }

    /// The temporary files of an interrupted writer that opening the data
    /// folder removed (each also logged as a warning).
    pub fn removed_temp_files(&self) -> &[PathBuf] {
        self.storage.removed_temp_files()
    }

    /// Journals the tick just stepped (durable as the sync policy says) and
    /// writes a snapshot of `world` when one is due.
    pub fn record(
        &mut self,
        world: &World,
        commands: &[Command],
        report: &TickReport,
    ) -> Result<(), StoreError> {
        use crate::node::Storage;
        self.storage.append(report.tick, commands, report.digest)?;
        self.storage.sync()?;
        let every = self.snapshot_every;
        if every > 0 && report.tick.is_multiple_of(every) {
            self.snapshot(world)?;
        }
        Ok(())
    }

    /// Writes a snapshot of `world` now and prunes old ones.
    pub fn snapshot(&mut self, world: &World) -> Result<PathBuf, StoreError> {
        use crate::node::{Storage, StorageError};
        let path = snapshot_dir(&self.dir).join(snapshot_file_name(world.tick()));
        match self.storage.write_snapshot(&world.snapshot()) {
            Ok(()) => Ok(path),
            Err(StorageError::Snapshot(error)) => Err(StoreError::Snapshot { path, error }),
            Err(e) => Err(e.into()),
        }
    }

    /// Syncs and closes the journal.
    pub fn close(mut self) -> Result<(), StoreError> {
        use crate::node::Storage;
        Ok(self.storage.close()?)
    }
}

/// Refuses (or, when told, deletes and logs) snapshots in a data folder
/// that has no journal.
pub(crate) fn refuse_orphan_snapshots(dir: &Path, discard: bool) -> Result<(), StoreError> {
    let snaps = snapshot_dir(dir);
    let found = list_snapshots(&snaps)?;
    let Some((newest, _)) = found.last() else {
        return Ok(());
    };
    if !discard {
        return Err(StoreError::OrphanSnapshots {
            dir: snaps,
            count: found.len(),
            newest: *newest,
        });
    }
    for (tick, path) in &found {
        std::fs::remove_file(path)?;
        tracing::warn!(file = %path.display(), tick, "deleted a snapshot of a world whose journal is gone");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_without_a_journal_are_refused_unless_discarded() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config::default();
        let options = StoreOptions::default();
        let mut world = World::new(config).unwrap();
        let mut recorder = Recorder::create(dir.path(), &config, options).unwrap();
        let report = world.step(&[], &mut Vec::new());
        recorder.record(&world, &[], &report).unwrap();
        recorder.snapshot(&world).unwrap();
        recorder.close().unwrap();
        std::fs::remove_file(journal_path(dir.path())).unwrap();

        let err = Recorder::create(dir.path(), &config, options)
            .err()
            .unwrap();
        assert!(
            matches!(
                err,
                StoreError::OrphanSnapshots {
                    count: 1,
                    newest: 1,
                    ..
                }
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains("but there is no journal") && text.contains("--discard-snapshots"),
            "{text}"
        );
        assert!(!journal_path(dir.path()).exists());
        assert_eq!(list_snapshots(&snapshot_dir(dir.path())).unwrap().len(), 1);

        let discard = StoreOptions {
            discard_orphan_snapshots: true,
            ..options
        };
        Recorder::create(dir.path(), &config, discard)
            .unwrap()
            .close()
            .unwrap();
        assert!(list_snapshots(&snapshot_dir(dir.path()))
            .unwrap()
            .is_empty());
        assert!(journal_path(dir.path()).exists());
    }
}
