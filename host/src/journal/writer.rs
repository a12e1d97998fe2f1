//! Appending to a journal, with a documented durability policy.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};

use lockgrid_kernel::{Command, Config};

use super::error::{JournalError, TornTail};
use super::format::{encode_header, encode_record, payload_len, MAX_PAYLOAD};
use super::reader::JournalReader;
use super::syncer::Syncer;

/// When [`Journal::sync`] forces appended ticks to stable storage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Every call to `sync` waits for the disk (`fdatasync`): a tick is
    /// durable before its results leave the process. The default.
    #[default]
    EveryTick,
    /// `sync` waits for the disk once per this many ticks; a crash may lose
    /// up to that many acknowledged ticks.
    EveryTicks(NonZeroU32),
    /// Never wait; the operating system writes back when it likes. For tests
    /// and throwaway runs only.
    Never,
}

/// What [`Journal::open`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenReport {
    /// The last complete tick in the journal (0 when it has none).
    pub last_tick: u64,
    /// Its digest.
    pub last_digest: Option<u64>,
    /// The torn tail that was cut off, if any.
    pub truncated: Option<TornTail>,
}

/// An append-only journal of every tick's kernel input and digest.
///
/// A server loop calls [`append`](Journal::append) with the tick's commands
/// (in the order applied) and the resulting digest, then
/// [`sync`](Journal::sync), and only then sends the tick's results. Between
/// the two it may call [`start_sync`](Journal::start_sync) and do other
/// work (encode the tick's packets, say) while the disk writes.
pub struct Journal {
    file: File,
    path: PathBuf,
    config: Config,
    policy: SyncPolicy,
    /// Length of the file up to the last complete record.
    end: u64,
    last_tick: u64,
    unsynced: u32,
    /// Ticks the sync begun by [`start_sync`](Journal::start_sync) covers
    /// (0: none is under way).
    in_flight: u32,
    /// Made at the first [`start_sync`](Journal::start_sync).
    syncer: Option<Syncer>,
    poisoned: bool,
    buf: Vec<u8>,
}

impl Journal {
    /// Creates a new journal at `path` for a world built from `config`.
    ///
    /// The header is written to a temporary file, synced and renamed into
    /// place (and the folder synced), so a journal file either has a whole
    /// header or does not exist.
    pub fn create(
        path: &Path,
        config: &Config,
        policy: SyncPolicy,
    ) -> Result<Journal, JournalError> {
        if path.exists() {
            return Err(JournalError::Exists);
        }
        let header = encode_header(config);
        let tmp = path.with_extension("tmp");
        {
            let mut f = File::create(&tmp)?;
            f.write_all(&header)?;
            f.sync_all()?;
        }
        fs::rename(&tmp, path)?;
        sync_parent(path)?;
        let file = OpenOptions::new().append(true).open(path)?;
        Ok(Journal {
            file,
            path: path.to_owned(),
            config: *config,
            policy,
            end: header.len() as u64,
            last_tick: 0,
            unsynced: 0,
            in_flight: 0,
            syncer: None,
            poisoned: false,
            buf: Vec::new(),
        })
    }

    /// Opens an existing journal for appending. Reads it to the end; a torn
    /// tail (an incomplete last record from a crash mid-append) is cut off,
    /// synced, and reported in the [`OpenReport`]. Corruption followed by
    /// valid records is an error and changes nothing.
    pub fn open(path: &Path, policy: SyncPolicy) -> Result<(Journal, OpenReport), JournalError> {
        let mut reader = JournalReader::open(path)?;
        while reader.next_record()?.is_some() {}
        let truncated = reader.torn_tail();
        let file = OpenOptions::new().append(true).open(path)?;
        if let Some(torn) = truncated {
            file.set_len(torn.offset)?;
            file.sync_all()?;
        }
        let report = OpenReport {
            last_tick: reader.last_tick(),
            last_digest: reader.last_digest(),
            truncated,
        };
        Ok((
            Journal {
                file,
                path: path.to_owned(),
                config: *reader.config(),
                policy,
                end: reader.offset(),
                last_tick: reader.last_tick(),
                unsynced: 0,
                in_flight: 0,
                syncer: None,
                poisoned: false,
                buf: Vec::new(),
            },
            report,
        ))
    }

    /// The world config the journal belongs to.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The journal's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The last tick appended (0 when none).
    pub fn last_tick(&self) -> u64 {
        self.last_tick
    }

    /// Appends one tick: `tick` must be the last tick + 1, `commands` every
    /// command of the tick in the order applied, `digest` the world's digest
    /// after it. The record reaches the operating system before this returns;
    /// call [`sync`](Journal::sync) to make it durable.
    ///
    /// A failed write is undone (the file is cut back to the last complete
    /// record); if even that fails the journal refuses further appends.
    pub fn append(
        &mut self,
        tick: u64,
        commands: &[Command],
        digest: u64,
    ) -> Result<(), JournalError> {
        if self.poisoned {
            return Err(JournalError::Poisoned);
        }
        let expected = self.last_tick.saturating_add(1);
        if tick != expected {
            return Err(JournalError::OutOfSequence {
                expected,
                given: tick,
            });
        }
        let bytes = payload_len(commands);
        if bytes > MAX_PAYLOAD {
            return Err(JournalError::TickTooLarge { bytes });
        }
        self.buf.clear();
        encode_record(&mut self.buf, tick, commands, digest);
        if let Err(e) = self.file.write_all(&self.buf) {
            if self.file.set_len(self.end).is_err() {
                self.poisoned = true;
            }
            return Err(JournalError::Io(e));
        }
        self.end += self.buf.len() as u64;
        self.last_tick = tick;
        self.unsynced += 1;
        Ok(())
    }

    /// Makes appended ticks durable as the [`SyncPolicy`] says, finishing
    /// the sync [`start_sync`](Journal::start_sync) began.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        if self.in_flight > 0 {
            self.finish_sync()?;
        }
        if self.sync_due() {
            self.sync_now()?;
        }
        Ok(())
    }

    /// Begins the sync that [`sync`](Journal::sync) would do, on the
    /// journal's sync thread, and returns at once; `sync` then waits for it
    /// to end. What it covers is every tick appended so far. Without a
    /// thread (it could not be started) `sync` does the work itself.
    pub fn start_sync(&mut self) -> Result<(), JournalError> {
        if self.poisoned {
            return Err(JournalError::Poisoned);
        }
        if self.in_flight > 0 || !self.sync_due() {
            return Ok(());
        }
        if self.syncer.is_none() {
            // A duplicate descriptor: syncing it syncs the journal's file.
            self.syncer = self.file.try_clone().and_then(Syncer::spawn).ok();
        }
        if self.syncer.as_ref().is_some_and(Syncer::start) {
            self.in_flight = self.unsynced;
        }
        Ok(())
    }

    fn sync_due(&self) -> bool {
        match self.policy {
            SyncPolicy::EveryTick => self.unsynced > 0,
            SyncPolicy::EveryTicks(n) => self.unsynced >= n.get(),
            SyncPolicy::Never => false,
        }
    }

    /// Waits for the sync under way; the ticks it covered are durable.
    fn finish_sync(&mut self) -> Result<(), JournalError> {
        let covered = std::mem::take(&mut self.in_flight);
        let result = match &self.syncer {
            Some(s) => s.finish(),
            None => Ok(()),
        };
        result?;
        self.unsynced -= covered.min(self.unsynced);
        Ok(())
    }

    /// Makes every appended tick durable now, whatever the policy.
    pub fn sync_now(&mut self) -> Result<(), JournalError> {
        if self.poisoned {
            return Err(JournalError::Poisoned);
        }
        if self.in_flight > 0 {
            // Its result does not matter: this sync covers it.
            let _ = self.finish_sync();
        }
        self.file.sync_data()?;
        self.unsynced = 0;
        Ok(())
    }

    /// Syncs and closes the journal.
    pub fn close(mut self) -> Result<(), JournalError> {
        self.sync_now()
    }
}

/// Syncs the folder holding `path`, so a rename or creation in it is durable.
pub(crate) fn sync_parent(path: &Path) -> io::Result<()> {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    #[cfg(unix)]
    {
        File::open(parent)?.sync_all()
    }
    #[cfg(not(unix))]
    {
        // Folders cannot be opened for syncing here; the rename is as
        // durable as the platform makes it.
        let _ = parent;
        Ok(())
    }
}
