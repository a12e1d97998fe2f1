//! The one way a data folder's state is restored: the newest usable
//! snapshot at or before a tick, checked against the journal, with every
//! snapshot passed over named with its reason. Recovery, replay and the
//! bots' verification all start from it.

use core::fmt;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use lockgrid_kernel::{Config, RestoreError, World};

use super::{journal_path, list_snapshots, read_snapshot, snapshot_dir, SnapshotError, StoreError};
use crate::journal::JournalReader;

/// Why a snapshot was not used.
#[derive(Debug)]
#[non_exhaustive]
pub enum PassedOverReason {
    /// Its tick is after the tick asked for.
    NewerThanWanted {
        /// The tick asked for.
        wanted: u64,
    },
    /// Its tick is past the journal's last tick: it belongs to another
    /// history (a journal that was replaced or cut).
    PastJournalEnd {
        /// The journal's last tick.
        last: u64,
    },
    /// The file is unreadable, truncated, fails its checksum or does not
    /// decode.
    Unreadable(SnapshotError),
    /// Its world config differs from the journal's: another world's snapshot.
    OtherConfig,
    /// Its digest differs from the digest the journal recorded for its
    /// tick: a snapshot of another history of this world.
    OtherHistory {
        /// The snapshot's digest.
        snapshot: u64,
        /// The journal's digest at the snapshot's tick.
        journaled: u64,
    },
    /// The kernel refused its state.
    Restore(RestoreError),
}

impl fmt::Display for PassedOverReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PassedOverReason::NewerThanWanted { wanted } => {
                write!(f, "newer than tick {wanted}, the start asked for")
            }
            PassedOverReason::PastJournalEnd { last } => write!(
                f,
                "its tick is past the journal's last tick {last}: it does not belong to this journal"
            ),
            PassedOverReason::Unreadable(e) => write!(f, "unreadable: {e}"),
            PassedOverReason::OtherConfig => f.write_str(
                "its world config differs from the journal's: it does not belong to this journal",
            ),
            PassedOverReason::OtherHistory {
                snapshot,
                journaled,
            } => write!(
                f,
                "its digest {snapshot:016x} differs from the journal's {journaled:016x} at its tick: it does not belong to this journal (another history)"
            ),
            PassedOverReason::Restore(e) => write!(f, "the kernel refused its state: {e}"),
        }
    }
}

impl PassedOverReason {
    /// Whether the snapshot is readable but belongs to another journal
    /// (another world or another history), as opposed to damaged.
    pub fn is_foreign(&self) -> bool {
        matches!(
            self,
            PassedOverReason::PastJournalEnd { .. }
                | PassedOverReason::OtherConfig
                | PassedOverReason::OtherHistory { .. }
        )
    }
}

/// A snapshot not used, and why.
#[derive(Debug)]
pub struct PassedOver {
    /// Its tick (from its file name).
    pub tick: u64,
    /// Its file.
    pub path: PathBuf,
    /// Why it was not used.
    pub reason: PassedOverReason,
}

impl fmt::Display for PassedOver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "snapshot {}: {}", self.path.display(), self.reason)
    }
}

/// What [`restore_newest`] produced.
pub struct Restored {
    /// The world: restored from a snapshot, or empty (tick 0) from the
    /// journal's config when no snapshot was usable.
    pub world: World,
    /// The snapshot used (tick and file), if any.
    pub snapshot: Option<(u64, PathBuf)>,
    /// Every snapshot passed over, newest first, with its reason.
    pub passed_over: Vec<PassedOver>,
}

/// Restores the newest usable snapshot of data folder `dir` at or before
/// tick `wanted`, or an empty world of the journal's config when there is
/// none. A snapshot is usable when its file checks out, its config is the
/// journal's, its digest is the one the journal recorded for its tick, and
/// the kernel restores it (which re-derives and checks its digest). Every
/// other snapshot in the folder is reported in
/// [`passed_over`](Restored::passed_over): those newer than `wanted` or than
/// the journal's end with that reason, older ones only when they were tried
/// (an older snapshot than the one used is not examined).
///
/// Reads the journal once, up to the newest candidate's tick, for the
/// digests; never modifies the folder.
pub fn restore_newest(dir: &Path, wanted: u64) -> Result<Restored, StoreError> {
    let mut reader = JournalReader::open(&journal_path(dir))?;
    let config = *reader.config();
    let mut passed_over = Vec::new();
    let mut candidates = Vec::new();
    for (tick, path) in list_snapshots(&snapshot_dir(dir))?.into_iter().rev() {
        if tick > wanted {
            passed_over.push(PassedOver {
                tick,
                path,
                reason: PassedOverReason::NewerThanWanted { wanted },
            });
        } else {
            candidates.push((tick, path));
        }
    }
    let digests = journaled_digests(&mut reader, &config, &candidates)?;
    let last = reader.last_tick();
    for (tick, path) in candidates {
        let reason = match read_snapshot(&path) {
            Err(e) => PassedOverReason::Unreadable(e),
            Ok(s) if s.config != config => PassedOverReason::OtherConfig,
            Ok(s) => match digests.get(&tick) {
                None => PassedOverReason::PastJournalEnd { last },
                Some(&journaled) if journaled != s.digest || s.tick != tick => {
                    PassedOverReason::OtherHistory {
                        snapshot: s.digest,
                        journaled,
                    }
                }
                Some(_) => match World::restore(&s) {
                    Ok(world) => {
                        return Ok(Restored {
                            world,
                            snapshot: Some((tick, path)),
                            passed_over,
                        })
                    }
                    Err(e) => PassedOverReason::Restore(e),
                },
            },
        };
        passed_over.push(PassedOver { tick, path, reason });
    }
    Ok(Restored {
        world: World::new(config).map_err(StoreError::Config)?,
        snapshot: None,
        passed_over,
    })
}

/// The journal's digest at each candidate tick it holds (tick 0: the empty
/// world's), reading no further than the newest candidate.
fn journaled_digests(
    reader: &mut JournalReader,
    config: &Config,
    candidates: &[(u64, PathBuf)],
) -> Result<BTreeMap<u64, u64>, StoreError> {
    let mut digests = BTreeMap::new();
    let Some(newest) = candidates.iter().map(|(t, _)| *t).max() else {
        return Ok(digests);
    };
    let wanted: BTreeSet<u64> = candidates.iter().map(|(t, _)| *t).collect();
    if wanted.contains(&0) {
        digests.insert(0, World::new(*config).map_err(StoreError::Config)?.digest());
    }
    while reader.last_tick() < newest {
        let Some(record) = reader.next_record()? else {
            break;
        };
        if wanted.contains(&record.tick) {
            digests.insert(record.tick, record.digest);
        }
    }
    Ok(digests)
}
