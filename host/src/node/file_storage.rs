//! [`Storage`] on a real data folder, in the format of `docs/journal.md`.

use std::path::{Path, PathBuf};

use lockgrid_kernel::{Command, Config, Snapshot};
use tracing::warn;

use super::storage::{Opened, Storage, StorageError};
use crate::journal::{Journal, JournalReader, Record, SyncPolicy};
use crate::store::{
    journal_path, list_snapshots, read_snapshot, refuse_orphan_snapshots,
    remove_leftover_temp_files, snapshot_dir, snapshot_file_name, write_snapshot,
};

/// The data folder of `lockgrid serve`: `journal.lgj` and `snapshots/`.
///
/// Appends go through [`Journal`] (CRC-checked records, a failed write
/// undone), snapshots are written atomically (temporary file, fsync,
/// rename, fsync of the folder) and only the newest `keep_snapshots` are
/// kept. A missing snapshots folder is created again at the next snapshot.
///
/// Opening the folder removes the temporary files an interrupted writer
/// left there ([`removed_temp_files`](Self::removed_temp_files), each also
/// logged) and refuses snapshots without a journal: they belong to a world
/// whose journal is gone ([`StoreError::OrphanSnapshots`](crate::store::StoreError::OrphanSnapshots)),
/// unless [`discard_orphan_snapshots`](Self::discard_orphan_snapshots) says
/// to delete them.
pub struct FileStorage {
    dir: PathBuf,
    policy: SyncPolicy,
    keep_snapshots: usize,
    discard_orphan_snapshots: bool,
    removed_temp_files: Vec<PathBuf>,
    journal: Option<Journal>,
}

impl FileStorage {
    /// A storage in data folder `dir` (created on [`Storage::create`]);
    /// keeps the newest `keep_snapshots` snapshots (0: all).
    pub fn new(dir: &Path, policy: SyncPolicy, keep_snapshots: usize) -> FileStorage {
        FileStorage {
            dir: dir.to_owned(),
            policy,
            keep_snapshots,
            discard_orphan_snapshots: false,
            removed_temp_files: Vec::new(),
            journal: None,
        }
    }

    /// With `discard`, snapshots found without a journal are deleted (the
    /// operator chose a new world there) instead of refused.
    pub fn discard_orphan_snapshots(mut self, discard: bool) -> FileStorage {
        self.discard_orphan_snapshots = discard;
        self
    }

    /// The temporary files of an interrupted writer that
    /// [`Storage::open`] removed.
    pub fn removed_temp_files(&self) -> &[PathBuf] {
        &self.removed_temp_files
    }

    /// The data folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn journal(&mut self) -> Result<&mut Journal, StorageError> {
        self.journal
            .as_mut()
            .ok_or_else(|| StorageError::Refused("the journal is not open".into()))
    }

    fn prune(&self) -> Result<(), StorageError> {
        if self.keep_snapshots == 0 {
            return Ok(());
        }
        let all = list_snapshots(&snapshot_dir(&self.dir))?;
        for (_, old) in all
            .iter()
            .take(all.len().saturating_sub(self.keep_snapshots))
        {
            std::fs::remove_file(old)?;
        }
        Ok(())
    }
}

impl Storage for FileStorage {
    fn open(&mut self) -> Result<Option<Opened>, StorageError> {
        // Leftovers are garbage nobody reads: failing to remove them is
        // worth a warning, not a server that refuses to start.
        self.removed_temp_files = remove_leftover_temp_files(&self.dir).unwrap_or_else(|e| {
            warn!(dir = %self.dir.display(), "cannot remove leftover temporary files: {e}");
            Vec::new()
        });
        let path = journal_path(&self.dir);
        if !path.exists() {
            // Snapshots without their journal are another world's leftovers:
            // starting a new world beside them would mix two histories.
            refuse_orphan_snapshots(&self.dir, self.discard_orphan_snapshots)?;
            return Ok(None);
        }
        let (journal, report) = Journal::open(&path, self.policy)?;
        let opened = Opened {
            config: *journal.config(),
            last_tick: report.last_tick,
            cut: report.truncated.map(|t| t.to_string()),
        };
        self.journal = Some(journal);
        Ok(Some(opened))
    }

    fn create(&mut self, config: &Config) -> Result<(), StorageError> {
        std::fs::create_dir_all(snapshot_dir(&self.dir))?;
        self.journal = Some(Journal::create(
            &journal_path(&self.dir),
            config,
            self.policy,
        )?);
        Ok(())
    }

    fn records(
        &mut self,
    ) -> Result<Box<dyn Iterator<Item = Result<Record, StorageError>> + '_>, StorageError> {
        let mut reader = JournalReader::open(&journal_path(&self.dir))?;
        Ok(Box::new(std::iter::from_fn(move || {
            reader.next_record().map_err(StorageError::from).transpose()
        })))
    }

    fn append(&mut self, tick: u64, commands: &[Command], digest: u64) -> Result<(), StorageError> {
        Ok(self.journal()?.append(tick, commands, digest)?)
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        Ok(self.journal()?.sync()?)
    }

    fn start_sync(&mut self) -> Result<(), StorageError> {
        Ok(self.journal()?.start_sync()?)
    }

    fn write_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), StorageError> {
        // The writer recreates a missing folder and says which step failed.
        write_snapshot(&snapshot_dir(&self.dir), snapshot)?;
        self.prune()
    }

    fn snapshots(&mut self) -> Result<Vec<u64>, StorageError> {
        Ok(list_snapshots(&snapshot_dir(&self.dir))?
            .into_iter()
            .map(|(tick, _)| tick)
            .collect())
    }

    fn read_snapshot(&mut self, tick: u64) -> Result<Snapshot, StorageError> {
        let path = snapshot_dir(&self.dir).join(snapshot_file_name(tick));
        Ok(read_snapshot(&path)?)
    }

    fn snapshot_place(&self, tick: u64) -> String {
        snapshot_dir(&self.dir)
            .join(snapshot_file_name(tick))
            .display()
            .to_string()
    }

    fn close(&mut self) -> Result<(), StorageError> {
        match self.journal.take() {
            Some(j) => Ok(j.close()?),
            None => Ok(()),
        }
    }
}
