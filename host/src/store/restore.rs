//! The one way a world is restored from stored state: the newest usable
//! snapshot at or before a tick, checked against the journal, with every
//! snapshot passed over named with its reason. The node's startup (on a
//! data folder or the simulated disk), replay and the bots' verification
//! all start from [`restore_newest_in`].

use core::fmt;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use lockgrid_kernel::{Config, RestoreError, Snapshot, World};

use super::{journal_path, StoreError};
use crate::journal::JournalReader;
use crate::node::{FileStorage, Storage, StorageError};

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
    /// It cannot be read: the file is unreadable, truncated, fails its
    /// checksum or does not decode.
    Unreadable(StorageError),
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
            // "snapshot" is said once already, by whoever names it.
            PassedOverReason::Unreadable(StorageError::Snapshot(e)) => {
                write!(f, "unreadable: {e}")
            }
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
    /// Its tick (from its name).
    pub tick: u64,
    /// Where it is, for people: its file, or its place on a simulated disk
    /// ([`Storage::snapshot_place`]).
    pub place: String,
    /// Why it was not used.
    pub reason: PassedOverReason,
}

impl fmt::Display for PassedOver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "snapshot {}: {}", self.place, self.reason)
    }
}

/// What [`restore_newest_in`] produced.
pub struct Restored {
    /// The world: restored from a snapshot, or empty (tick 0) from the
    /// journal's config when no snapshot was usable.
    pub world: World,
    /// The snapshot used (tick and place), if any.
    pub snapshot: Option<(u64, String)>,
    /// Every snapshot passed over, newest first, with its reason.
    pub passed_over: Vec<PassedOver>,
    /// The snapshots could not even be listed (a snapshot is a cache: the
    /// world then comes from the journal alone).
    pub unlisted: Option<StorageError>,
}

/// Restores the newest usable snapshot of data folder `dir` at or before
/// tick `wanted`: [`restore_newest_in`] on the folder's files, read only.
pub fn restore_newest(dir: &Path, wanted: u64) -> Result<Restored, StoreError> {
    let config = *JournalReader::open(&journal_path(dir))?.config();
    // Reading needs no open journal: the folder is never modified.
    let mut files = FileStorage::new(dir, crate::journal::SyncPolicy::EveryTick, 0);
    restore_newest_in(&mut files, &config, wanted).map_err(StoreError::from)
}

/// Restores the newest usable snapshot in `storage` at or before tick
/// `wanted`, or an empty world of `config` (the journal's) when there is
/// none. A snapshot is usable when it reads and checks out, its config is
/// the journal's, its digest is the one the journal recorded for its tick,
/// and the kernel restores it (which re-derives and checks its digest).
/// Every other snapshot is reported in [`passed_over`](Restored::passed_over):
/// those newer than `wanted` or than the journal's end with that reason,
/// older ones only when they were tried (an older snapshot than the one
/// used is not examined).
///
/// Reads the journal once, up to the newest candidate's tick, for the
/// digests; never modifies the storage. The world is at the snapshot's
/// tick: stepping it through the later journaled ticks is the caller's.
pub fn restore_newest_in<S: Storage + ?Sized>(
    storage: &mut S,
    config: &Config,
    wanted: u64,
) -> Result<Restored, StorageError> {
    let mut passed_over = Vec::new();
    let mut candidates = Vec::new();
    let (ticks, unlisted) = match storage.snapshots() {
        Ok(ticks) => (ticks, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    for tick in ticks.into_iter().rev() {
        if tick > wanted {
            passed_over.push(PassedOver {
                tick,
                place: storage.snapshot_place(tick),
                reason: PassedOverReason::NewerThanWanted { wanted },
            });
        } else {
            candidates.push(tick);
        }
    }
    let (digests, last) = journaled_digests(storage, config, &candidates)?;
    for tick in candidates {
        let place = storage.snapshot_place(tick);
        let judged = storage
            .read_snapshot(tick)
            .map_err(PassedOverReason::Unreadable)
            .and_then(|s| judge(&s, tick, config, digests.get(&tick).copied(), last));
        let reason = match judged {
            Ok(world) => {
                return Ok(Restored {
                    world,
                    snapshot: Some((tick, place)),
                    passed_over,
                    unlisted,
                })
            }
            Err(reason) => reason,
        };
        passed_over.push(PassedOver {
            tick,
            place,
            reason,
        });
    }
    Ok(Restored {
        world: empty_world(config)?,
        snapshot: None,
        passed_over,
        unlisted,
    })
}

/// Whether snapshot `s`, stored as the snapshot of `tick`, belongs to the
/// journal of `config` whose digest at `tick` is `journaled` (`None`: the
/// journal, which ends at tick `last`, does not reach it), and restores:
/// the world it holds, or why it cannot be used. Replay judges the
/// snapshots it compares against by the same rule.
pub(crate) fn judge(
    s: &Snapshot,
    tick: u64,
    config: &Config,
    journaled: Option<u64>,
    last: u64,
) -> Result<World, PassedOverReason> {
    if s.config != *config {
        return Err(PassedOverReason::OtherConfig);
    }
    let Some(journaled) = journaled else {
        return Err(PassedOverReason::PastJournalEnd { last });
    };
    if journaled != s.digest || s.tick != tick {
        return Err(PassedOverReason::OtherHistory {
            snapshot: s.digest,
            journaled,
        });
    }
    World::restore(s).map_err(PassedOverReason::Restore)
}

fn empty_world(config: &Config) -> Result<World, StorageError> {
    World::new(*config).map_err(|e| StorageError::Store(StoreError::Config(e)))
}

/// The journal's digest at each candidate tick it holds (tick 0: the empty
/// world's), reading no further than the newest candidate, and the last
/// tick read.
fn journaled_digests<S: Storage + ?Sized>(
    storage: &mut S,
    config: &Config,
    candidates: &[u64],
) -> Result<(BTreeMap<u64, u64>, u64), StorageError> {
    let mut digests = BTreeMap::new();
    let mut last = 0;
    let Some(newest) = candidates.iter().copied().max() else {
        return Ok((digests, last));
    };
    let wanted: BTreeSet<u64> = candidates.iter().copied().collect();
    if wanted.contains(&0) {
        digests.insert(0, empty_world(config)?.digest());
    }
    if newest == 0 {
        return Ok((digests, last));
    }
    for record in storage.records()? {
        let record = record?;
        last = record.tick;
        if wanted.contains(&record.tick) {
            digests.insert(record.tick, record.digest);
        }
        if record.tick >= newest {
            break;
        }
    }
    Ok((digests, last))
}
