//! Opening a node's world from its storage: the newest usable snapshot
//! ([`restore_newest_in`], the one restore of the crate), then the journal
//! after it, every digest checked.

use core::fmt;

use lockgrid_kernel::{Config, Event, World};

use super::storage::{Storage, StorageError};
use super::NodeError;
use crate::store::{restore_newest_in, PassedOver, PassedOverReason, Restored};

/// What opening the storage did.
#[derive(Debug, Default)]
pub struct RestoreReport {
    /// The storage held no journal: a new one was created.
    pub created: bool,
    /// What was cut off the journal's end, if anything.
    pub cut: Option<String>,
    /// The snapshot the world was restored from (tick and place), if any.
    pub snapshot: Option<(u64, String)>,
    /// Snapshots passed over, newest first, each with its reason.
    pub passed_over: Vec<PassedOver>,
    /// Why the snapshots could not be listed, if they could not.
    pub unlisted: Option<String>,
    /// Ticks re-run from the journal.
    pub replayed: u64,
    /// The tick the world is at now.
    pub tick: u64,
}

impl fmt::Display for RestoreReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.created {
            return f.write_str("created a new journal");
        }
        if let Some(cut) = &self.cut {
            write!(f, "journal: cut off {cut}; ")?;
        }
        if let Some(why) = &self.unlisted {
            write!(f, "the snapshots cannot be listed ({why}); ")?;
        }
        for passed in &self.passed_over {
            write!(f, "skipped {passed}; ")?;
        }
        match &self.snapshot {
            Some((tick, place)) => write!(f, "restored tick {tick} from snapshot {place}")?,
            None => f.write_str("started from an empty world")?,
        }
        write!(
            f,
            ", replayed {} ticks from the journal: now at tick {}",
            self.replayed, self.tick
        )
    }
}

/// Opens `storage`: a storage without a journal gets a new one for a world
/// of `config`; otherwise the world is the journal's, restored from the
/// newest snapshot that reads, restores and agrees with the journal's
/// digest ([`restore_newest_in`]), and stepped through every later
/// journaled tick. A snapshot is a cache, so one that cannot be used is
/// passed over and reported; a journal whose own ticks do not replay to
/// their digests is an error.
pub fn restore<S: Storage>(
    storage: &mut S,
    config: &Config,
) -> Result<(World, RestoreReport), NodeError> {
    let Some(opened) = storage.open()? else {
        let world =
            World::new(*config).map_err(|e| NodeError::Config(format!("world config: {e}")))?;
        storage.create(config)?;
        return Ok((
            world,
            RestoreReport {
                created: true,
                ..RestoreReport::default()
            },
        ));
    };
    let Restored {
        world,
        snapshot,
        mut passed_over,
        unlisted,
    } = restore_newest_in(storage, &opened.config, opened.last_tick)?;
    for passed in &mut passed_over {
        // Asked for the journal's last tick: anything newer is past its end.
        if let PassedOverReason::NewerThanWanted { wanted } = passed.reason {
            passed.reason = PassedOverReason::PastJournalEnd { last: wanted };
        }
    }
    let (world, replayed) = catch_up(storage, world)?;
    let report = RestoreReport {
        created: false,
        cut: opened.cut,
        snapshot,
        passed_over,
        unlisted: unlisted.map(|e| e.to_string()),
        replayed,
        tick: world.tick(),
    };
    if report.tick != opened.last_tick {
        return Err(NodeError::Storage(StorageError::Damaged(format!(
            "the journal ends at tick {}, but its records replay only to tick {}",
            opened.last_tick, report.tick
        ))));
    }
    Ok((world, report))
}

/// Steps `world` through every journaled tick after its own, checking each
/// digest; returns it and the number of ticks stepped.
fn catch_up<S: Storage>(storage: &mut S, mut world: World) -> Result<(World, u64), NodeError> {
    let start = world.tick();
    let mut events: Vec<Event> = Vec::new();
    let mut replayed = 0;
    for record in storage.records()? {
        let record = record?;
        if record.tick <= start {
            continue;
        }
        events.clear();
        let report = world.step(&record.commands, &mut events);
        if report.digest != record.digest {
            return Err(NodeError::Diverged {
                tick: record.tick,
                journaled: record.digest,
                replayed: report.digest,
            });
        }
        replayed += 1;
    }
    Ok((world, replayed))
}
