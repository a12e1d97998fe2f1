//! [`Storage`] on a real data folder, in the format of `docs/journal.md`.

use std::path::{Path, PathBuf};

use lockgrid_kernel::{Command, Config, Snapshot};

use super::storage::{Opened, Storage, StorageError};
use crate::journal::{Journal, JournalReader, Record, SyncPolicy};
use crate::store::{
    journal_path, list_snapshots, read_snapshot, snapshot_dir, snapshot_file_name, write_snapshot,
};

/// The data folder of `lockgrid serve`: `journal.lgj` and `snapshots/`.
///
/// Appends go through [`Journal`] (CRC-checked records, a failed write
/// undone), snapshots are written atomically (temporary file, fsync,
/// rename, fsync of the folder) and only the newest `keep_snapshots` are
/// kept. A missing snapshots folder is created again at the next snapshot.
pub struct FileStorage {
    dir: PathBuf,
    policy: SyncPolicy,
    keep_snapshots: usize,
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
            journal: None,
        }
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
        let path = journal_path(&self.dir);
        if !path.exists() {
            // Snapshots without their journal are another world's leftovers:
            // starting a new world beside them would mix two histories.
            let orphans = list_snapshots(&snapshot_dir(&self.dir))?;
            if let Some((tick, _)) = orphans.last() {
                return Err(StorageError::Refused(format!(
                    "{} holds {} snapshot(s) (the newest of tick {tick}) but no journal; move them away to start a new world there",
                    self.dir.display(),
                    orphans.len()
                )));
            }
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

    fn write_snapshot(&mut self, snapshot: &Snapshot) -> Result<(), StorageError> {
        let dir = snapshot_dir(&self.dir);
        std::fs::create_dir_all(&dir)?;
        write_snapshot(&dir, snapshot)?;
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

    fn close(&mut self) -> Result<(), StorageError> {
        match self.journal.take() {
            Some(j) => Ok(j.close()?),
            None => Ok(()),
        }
    }
}
