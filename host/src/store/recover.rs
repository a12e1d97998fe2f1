//! Crash recovery: newest valid snapshot plus the journal after it.

use core::fmt;
use std::path::{Path, PathBuf};

use lockgrid_kernel::{Event, World};

use super::{
    journal_path, list_snapshots, read_snapshot, remove_leftover_temp_files, snapshot_dir,
    Recorder, StoreError, StoreOptions,
};
use crate::journal::{Journal, JournalReader, TornTail};

/// What [`recover`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Temporary files of an interrupted writer, removed (see
    /// [`remove_leftover_temp_files`](super::remove_leftover_temp_files)).
    pub removed_temp_files: Vec<PathBuf>,
    /// The torn tail cut off the journal, if any.
    pub torn_tail: Option<TornTail>,
    /// The snapshot the world was restored from (tick and file), if any.
    pub snapshot: Option<(u64, PathBuf)>,
    /// Snapshots passed over, newest first, with the reason.
    pub skipped: Vec<(PathBuf, String)>,
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
        for (path, why) in &self.skipped {
            writeln!(f, "skipped snapshot {}: {why}", path.display())?;
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

/// Reopens data folder `dir` after a stop or a crash: cuts a torn journal
/// tail, restores the newest snapshot that is valid and agrees with the
/// journal, re-runs the journaled ticks after it and checks every digest.
/// Returns the world at the journal's last tick and a recorder that appends
/// after it.
pub fn recover(
    dir: &Path,
    options: StoreOptions,
) -> Result<(World, Recorder, RecoveryReport), StoreError> {
    let removed_temp_files = remove_leftover_temp_files(dir)?;
    let path = journal_path(dir);
    let (journal, open) = Journal::open(&path, options.sync)?;
    let config = *journal.config();
    let mut skipped = Vec::new();
    let mut candidates = list_snapshots(&snapshot_dir(dir))?;
    candidates.retain(|(tick, _)| *tick <= open.last_tick);
    for (tick, snap_path) in candidates.into_iter().rev() {
        let why = match read_snapshot(&snap_path) {
            Err(e) => e.to_string(),
            Ok(s) if s.config != config => "its config differs from the journal's".to_owned(),
            Ok(s) => match World::restore(&s) {
                Err(e) => e.to_string(),
                Ok(world) => match catch_up(&path, world, Some(s.digest))? {
                    CatchUp::Done(world, replayed) => {
                        let report = RecoveryReport {
                            removed_temp_files: removed_temp_files.clone(),
                            torn_tail: open.truncated,
                            snapshot: Some((tick, snap_path)),
                            skipped,
                            replayed,
                            tick: world.tick(),
                        };
                        return Ok((
                            *world,
                            Recorder::from_parts(journal, dir, options, removed_temp_files),
                            report,
                        ));
                    }
                    CatchUp::SnapshotDisagrees { journaled } => format!(
                        "its digest {:016x} differs from the journal's {journaled:016x}",
                        s.digest
                    ),
                },
            },
        };
        skipped.push((snap_path, why));
    }
    let world = World::new(config).map_err(StoreError::Config)?;
    match catch_up(&path, world, None)? {
        CatchUp::Done(world, replayed) => {
            let report = RecoveryReport {
                removed_temp_files: removed_temp_files.clone(),
                torn_tail: open.truncated,
                snapshot: None,
                skipped,
                replayed,
                tick: world.tick(),
            };
            Ok((
                *world,
                Recorder::from_parts(journal, dir, options, removed_temp_files),
                report,
            ))
        }
        // catch_up only reports this when given a start digest to check,
        // and none was given; should it ever happen, say what it means.
        CatchUp::SnapshotDisagrees { journaled } => Err(StoreError::Diverged {
            tick: 0,
            journaled,
            replayed: World::new(config).map_err(StoreError::Config)?.digest(),
        }),
    }
}

enum CatchUp {
    Done(Box<World>, u64),
    SnapshotDisagrees { journaled: u64 },
}

/// Steps `world` through every journaled tick after its own, checking
/// digests; with `start_digest`, first checks the journal's digest at the
/// world's tick.
fn catch_up(
    path: &Path,
    mut world: World,
    start_digest: Option<u64>,
) -> Result<CatchUp, StoreError> {
    let mut reader = JournalReader::open(path)?;
    let start = world.tick();
    let mut events: Vec<Event> = Vec::new();
    let mut replayed = 0;
    while let Some(record) = reader.next_record()? {
        if record.tick < start {
            continue;
        }
        if record.tick == start {
            if let Some(digest) = start_digest {
                if digest != record.digest {
                    return Ok(CatchUp::SnapshotDisagrees {
                        journaled: record.digest,
                    });
                }
            }
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
    Ok(CatchUp::Done(Box::new(world), replayed))
}
