//! Opening a node's world from its storage: the newest usable snapshot,
//! then the journal after it, every digest checked.

use core::fmt;

use lockgrid_kernel::{Config, Event, World};

use super::storage::{Storage, StorageError};
use super::NodeError;

/// What opening the storage did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestoreReport {
    /// The storage held no journal: a new one was created.
    pub created: bool,
    /// What was cut off the journal's end, if anything.
    pub cut: Option<String>,
    /// The tick of the snapshot the world was restored from, if any.
    pub snapshot: Option<u64>,
    /// Snapshots passed over, newest first: tick and reason.
    pub skipped: Vec<(u64, String)>,
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
        for (tick, why) in &self.skipped {
            write!(f, "skipped the snapshot of tick {tick}: {why}; ")?;
        }
        match self.snapshot {
            Some(tick) => write!(f, "restored tick {tick} from its snapshot")?,
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
/// digest, and stepped through every later journaled tick. A snapshot is
/// a cache, so one that cannot be used is skipped and reported; a journal
/// whose own ticks do not replay to their digests is an error.
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
    let mut report = RestoreReport {
        cut: opened.cut,
        ..RestoreReport::default()
    };
    let ticks = match storage.snapshots() {
        Ok(t) => t,
        Err(e) => {
            report
                .skipped
                .push((0, format!("the snapshots cannot be listed: {e}")));
            Vec::new()
        }
    };
    for tick in ticks.into_iter().rev().filter(|&t| t <= opened.last_tick) {
        let world = match storage.read_snapshot(tick) {
            Err(e) => Err(e.to_string()),
            Ok(s) if s.config != opened.config => {
                Err("its config differs from the journal's".to_owned())
            }
            Ok(s) => World::restore(&s).map_err(|e| e.to_string()),
        };
        match world.map(|w| catch_up(storage, w, true)) {
            Ok(Ok(Some((world, replayed)))) => {
                report.snapshot = Some(tick);
                report.replayed = replayed;
                report.tick = world.tick();
                return Ok((world, report));
            }
            Ok(Ok(None)) => report
                .skipped
                .push((tick, "its digest differs from the journal's".to_owned())),
            Ok(Err(e)) => return Err(e),
            Err(why) => report.skipped.push((tick, why)),
        }
    }
    let world =
        World::new(opened.config).map_err(|e| NodeError::Config(format!("journal config: {e}")))?;
    match catch_up(storage, world, false)? {
        Some((world, replayed)) => {
            report.replayed = replayed;
            report.tick = world.tick();
            Ok((world, report))
        }
        // Only a start digest can disagree, and none was checked.
        None => Err(NodeError::Storage(StorageError::Damaged(
            "the journal disagrees with an empty world".into(),
        ))),
    }
}

/// Steps `world` through every journaled tick after its own. With
/// `check_start`, the journal's digest at the world's tick must equal the
/// world's (else `None`: the snapshot does not belong to this journal).
fn catch_up<S: Storage>(
    storage: &mut S,
    mut world: World,
    check_start: bool,
) -> Result<Option<(World, u64)>, NodeError> {
    let start = world.tick();
    let mut events: Vec<Event> = Vec::new();
    let mut replayed = 0;
    for record in storage.records()? {
        let record = record?;
        if record.tick < start {
            continue;
        }
        if record.tick == start {
            if check_start && record.digest != world.digest() {
                return Ok(None);
            }
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
    Ok(Some((world, replayed)))
}
