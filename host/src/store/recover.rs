//! Crash recovery: newest usable snapshot plus the journal after it.

use core::fmt;
use std::path::{Path, PathBuf};

use lockgrid_kernel::{Event, World};

use super::restore::{restore_newest, PassedOver, PassedOverReason, Restored};
use super::{journal_path, remove_leftover_temp_files, Recorder, StoreError, StoreOptions};
use crate::journal::{Journal, JournalReader, TornTail};

/// What [`recover`] did.
#[derive(Debug)]
pub struct RecoveryReport {
    /// Temporary files of an interrupted writer, removed (see
    /// [`remove_leftover_temp_files`](super::remove_leftover_temp_files)).
    pub removed_temp_files: Vec<PathBuf>,
    /// The torn tail cut off the journal, if any.
    pub torn_tail: Option<TornTail>,
    /// The snapshot the world was restored from (tick and file), if any.
    pub snapshot: Option<(u64, PathBuf)>,
    /// Snapshots passed over, newest first, with the reason.
    pub passed_over: Vec<PassedOver>,
    /// Ticks re-run from the journal after the snapshot.
    pub replayed: u64,
    /// The tick the world is at now (the journal's last).
    pub tick: u64,
}

impl fmt::Display for RecoveryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for path in &self.removed_temp_files {
            writeln!(f, "removed leftover temporary file {}", path.display())?;
        }
        if let Some(torn) = &self.torn_tail {
            writeln!(f, "journal: cut off a {torn}")?;
        }
        for passed in &self.passed_over {
            writeln!(f, "skipped {passed}")?;
        }
        match &self.snapshot {
            Some((tick, path)) => write!(f, "restored tick {tick} from {}", path.display())?,
            None => f.write_str("started from an empty world")?,
        }
        write!(
            f,
            ", replayed {} ticks from the journal: now at tick {}",
            self.replayed, self.tick
        )
    }
}

/// Reopens data folder `dir` after a stop or a crash: removes temporary
/// files of an interrupted writer, cuts a torn journal tail, restores the
/// newest snapshot that is valid and agrees with the journal
/// ([`restore_newest`](super::restore_newest)), re-runs the journaled ticks
/// after it and checks every digest. Returns the world at the journal's
/// last tick and a recorder that appends after it.
pub fn recover(
    dir: &Path,
    options: StoreOptions,
) -> Result<(World, Recorder, RecoveryReport), StoreError> {
    let removed_temp_files = remove_leftover_temp_files(dir)?;
    let path = journal_path(dir);
    let (journal, open) = Journal::open(&path, options.sync)?;
    let Restored {
        world,
        snapshot,
        mut passed_over,
    } = restore_newest(dir, open.last_tick)?;
    for passed in &mut passed_over {
        // Asked for the journal's last tick: anything newer is past its end.
        if let PassedOverReason::NewerThanWanted { wanted } = passed.reason {
            passed.reason = PassedOverReason::PastJournalEnd { last: wanted };
        }
    }
    let (world, replayed) = catch_up(&path, world)?;
    let report = RecoveryReport {
        removed_temp_files: removed_temp_files.clone(),
        torn_tail: open.truncated,
        snapshot,
        passed_over,
        replayed,
        tick: world.tick(),
    };
    let recorder = Recorder::from_parts(journal, dir, options, removed_temp_files);
    Ok((world, recorder, report))
}

/// Steps `world` through every journaled tick after its own, checking
/// digests; returns it and the number of ticks stepped.
fn catch_up(path: &Path, mut world: World) -> Result<(World, u64), StoreError> {
    let mut reader = JournalReader::open(path)?;
    let start = world.tick();
    let mut events: Vec<Event> = Vec::new();
    let mut replayed = 0;
    while let Some(record) = reader.next_record()? {
        if record.tick <= start {
            continue;
        }
        events.clear();
        let report = world.step(&record.commands, &mut events);
        if report.digest != record.digest {
            return Err(StoreError::Diverged {
                tick: record.tick,
                journaled: record.digest,
                replayed: report.digest,
            });
        }
        replayed += 1;
    }
    Ok((world, replayed))
}
