//! Offline replay of a data folder: verify digests tick by tick, print the
//! event stream of a tick range, or export a tick range as a scenario.

mod diff;

use core::fmt;
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use lockgrid_kernel::{Command, EntityId, EntityState, Event, World};

pub use diff::{diff_snapshots, diff_states, EntityDiff};

use crate::journal::{JournalReader, Record};
use crate::jsonl;
use crate::scenario::Scenario;
use crate::store::{
    journal_path, judge, list_snapshots, read_snapshot, restore_newest, snapshot_dir, PassedOver,
    PassedOverReason, Restored, StoreError,
};

/// Ticks `from..=to` of a replay (`to: None` means to the journal's end).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TickRange {
    /// First tick of interest (0 and 1 both mean the first tick).
    pub from: u64,
    /// Last tick of interest.
    pub to: Option<u64>,
}

/// Why a [`TickRange`] cannot be replayed from a journal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RangeError {
    /// The range ends at tick 0: ticks are numbered from 1, so it holds none.
    ToZero,
    /// The range starts after it ends: it holds no tick.
    FromAfterTo {
        /// Its first tick.
        from: u64,
        /// Its last tick.
        to: u64,
    },
    /// The range starts after the journal's last tick.
    FromPastEnd {
        /// Its first tick.
        from: u64,
        /// The journal's last tick (0: the journal has none).
        last: u64,
    },
    /// The range ends after the journal's last tick.
    ToPastEnd {
        /// Its last tick.
        to: u64,
        /// The journal's last tick (0: the journal has none).
        last: u64,
    },
}

impl fmt::Display for RangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RangeError::ToZero => {
                f.write_str("--to 0: ticks are numbered from 1, so the range holds no tick")
            }
            RangeError::FromAfterTo { from, to } => {
                write!(
                    f,
                    "--from {from} is after --to {to}: the range holds no tick"
                )
            }
            RangeError::FromPastEnd { from, last } => write!(
                f,
                "--from {from} is past the journal's last tick {last}{}",
                Ticks(*last)
            ),
            RangeError::ToPastEnd { to, last } => write!(
                f,
                "--to {to} is past the journal's last tick {last}{}",
                Ticks(*last)
            ),
        }
    }
}

impl std::error::Error for RangeError {}

/// "(it holds ticks 1 to N)", for a range message.
struct Ticks(u64);

impl fmt::Display for Ticks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str(" (it holds no tick yet)"),
            1 => f.write_str(" (it holds tick 1 only)"),
            n => write!(f, " (it holds ticks 1 to {n})"),
        }
    }
}

impl TickRange {
    /// Checks the range against a journal whose last tick is `last`: it
    /// must hold a tick, start no later than `last` and end no later than
    /// `last`. The default range of an empty journal is accepted (there is
    /// simply nothing to replay).
    pub fn check(&self, last: u64) -> Result<(), RangeError> {
        if self.to == Some(0) {
            return Err(RangeError::ToZero);
        }
        if let Some(to) = self.to.filter(|to| *to < self.first()) {
            return Err(RangeError::FromAfterTo {
                from: self.from,
                to,
            });
        }
        if self.first() > last.max(1) {
            return Err(RangeError::FromPastEnd {
                from: self.from,
                last,
            });
        }
        match self.to {
            Some(to) if to > last => Err(RangeError::ToPastEnd { to, last }),
            _ => Ok(()),
        }
    }

    fn first(&self) -> u64 {
        self.from.max(1)
    }
    fn contains(&self, tick: u64) -> bool {
        tick >= self.first() && self.to.is_none_or(|to| tick <= to)
    }
    fn past(&self, tick: u64) -> bool {
        self.to.is_some_and(|to| tick > to)
    }
}

/// A world positioned just before the first tick of interest, and the
/// journal reader to continue from.
struct Start {
    world: World,
    reader: JournalReader,
    /// The snapshot it was restored from, if any.
    snapshot: Option<(u64, String)>,
    /// Snapshots at or before the start that could not be used, with the reason.
    passed_over: Vec<PassedOver>,
}

/// Checks `range` against the journal of `dir` (one read of it, no
/// stepping): an empty range or one past the journal's end is an error
/// before any work or output.
fn check_range(dir: &Path, range: TickRange) -> Result<(), StoreError> {
    if let Some(to) = range.to {
        // No tick: say so without reading anything.
        range
            .check(to.max(range.first()))
            .map_err(StoreError::Range)?;
    }
    let mut reader = JournalReader::open(&journal_path(dir))?;
    while reader.next_record()?.is_some() {}
    range.check(reader.last_tick()).map_err(StoreError::Range)
}

/// Restores the newest usable snapshot at or before `before` (else an empty
/// world); the reader is positioned at the start of the journal. Snapshots
/// after `before` are not reported: the replay reaches them, or they lie
/// outside its range.
fn start_before(dir: &Path, before: u64) -> Result<Start, StoreError> {
    let Restored {
        world,
        snapshot,
        mut passed_over,
        unlisted,
    } = restore_newest(dir, before)?;
    if let Some(e) = unlisted {
        return Err(StoreError::from(e));
    }
    passed_over.retain(|p| !matches!(p.reason, PassedOverReason::NewerThanWanted { .. }));
    Ok(Start {
        world,
        reader: JournalReader::open(&journal_path(dir))?,
        snapshot,
        passed_over,
    })
}

/// Where a verification found the replay and the record parting ways.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desync {
    /// The first divergent tick.
    pub tick: u64,
    /// What disagreed.
    pub kind: DesyncKind,
    /// The commands of that tick, as journaled.
    pub commands: Vec<Command>,
    /// The closest state comparison available.
    pub comparison: Comparison,
}

/// What disagreed at the divergent tick.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DesyncKind {
    /// The replayed digest differs from the journaled one.
    Digest {
        /// In the journal.
        journaled: u64,
        /// Computed now.
        replayed: u64,
    },
    /// A snapshot file that belongs to this journal (its config and digest
    /// are the journal's, and the kernel restores it) holds another state
    /// than the replay at its tick: the digest missed a difference.
    Snapshot {
        /// The snapshot file.
        path: PathBuf,
    },
}

/// The state comparison attached to a [`Desync`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Comparison {
    /// A recorded snapshot at or after the divergent tick, against the replay
    /// carried on to the same tick.
    Snapshot {
        /// The snapshot's tick.
        tick: u64,
        /// The snapshot file.
        path: PathBuf,
        /// Entity by entity differences (recorded vs replayed).
        diffs: Vec<EntityDiff>,
    },
    /// No recorded state to compare with: what the divergent tick did to the
    /// entities its commands name, in the replay (before vs after).
    Touched(Vec<EntityDiff>),
}

impl fmt::Display for Desync {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "DESYNC at tick {}", self.tick)?;
        match &self.kind {
            DesyncKind::Digest {
                journaled,
                replayed,
            } => writeln!(
                f,
                "  digest: journal {journaled:016x}, replay {replayed:016x}"
            )?,
            DesyncKind::Snapshot { path } => writeln!(
                f,
                "  the snapshot {} belongs to this journal (same config, same digest) and restores, but its state differs from the replay",
                path.display()
            )?,
        }
        writeln!(
            f,
            "commands of tick {} ({}):",
            self.tick,
            self.commands.len()
        )?;
        const SHOWN: usize = 20;
        for c in self.commands.iter().take(SHOWN) {
            writeln!(f, "  {}", command_line(c))?;
        }
        if self.commands.len() > SHOWN {
            writeln!(f, "  … {} more", self.commands.len() - SHOWN)?;
        }
        match &self.comparison {
            Comparison::Snapshot { tick, path, diffs } => {
                writeln!(
                    f,
                    "state at tick {tick}: recorded ({}) vs replayed, {} entities differ:",
                    path.display(),
                    diffs.len()
                )?;
                for d in diffs {
                    writeln!(f, "{d}")?;
                }
                if diffs.is_empty() {
                    writeln!(
                        f,
                        "  (none: the replayed state matches the recorded one, so the journaled digest itself is suspect)"
                    )?;
                }
            }
            Comparison::Touched(diffs) => {
                writeln!(
                    f,
                    "no snapshot at or after tick {} to compare with (the journal keeps digests, not states);",
                    self.tick
                )?;
                writeln!(
                    f,
                    "what tick {} did to the entities it names, in the replay (\"recorded\" = before, \"replayed\" = after):",
                    self.tick
                )?;
                for d in diffs {
                    writeln!(f, "{d}")?;
                }
                writeln!(
                    f,
                    "snapshots written more often (or one at the incident) allow a full state diff"
                )?;
            }
        }
        Ok(())
    }
}

fn command_line(c: &Command) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail, and the writer emits only ASCII.
    let _ = crate::scenario::write_command(c, None, &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// The result of [`verify`].
#[derive(Debug)]
pub struct Verified {
    /// Ticks re-run and checked.
    pub ticks: u64,
    /// The snapshot the run started from, if any.
    pub started_from: Option<(u64, String)>,
    /// Snapshot files whose state was compared with the replay.
    pub snapshots_checked: u64,
    /// Snapshots in the verified range that could not be used, as a start
    /// or for comparison, newest first for the start and then in tick
    /// order, each with its reason: damaged, or not of this journal
    /// ([`PassedOverReason::is_foreign`]), which is no fault of the journal.
    pub passed_over: Vec<PassedOver>,
    /// A torn tail at the end of the journal (not modified by a replay).
    pub torn_tail: Option<crate::journal::TornTail>,
    /// The first divergence, if any.
    pub desync: Option<Box<Desync>>,
}

/// Re-runs the journal of data folder `dir` over `range` (from the newest
/// snapshot before it, or from the start), comparing every tick's digest
/// with the journal and every snapshot passed with the replayed state.
/// Stops at the first divergence and describes it. `progress` gets
/// `(bytes read, journal size)` now and then.
pub fn verify(
    dir: &Path,
    range: TickRange,
    mut progress: impl FnMut(u64, u64),
) -> Result<Verified, StoreError> {
    check_range(dir, range)?;
    let total = std::fs::metadata(journal_path(dir))?.len();
    let Start {
        mut world,
        mut reader,
        snapshot,
        passed_over,
    } = start_before(dir, range.first() - 1)?;
    let start = world.tick();
    let config = *world.config();
    // The snapshots of the range: each is compared with the replayed state.
    // Those before it were tried as a start already.
    let all: BTreeMap<u64, PathBuf> = list_snapshots(&snapshot_dir(dir))?.into_iter().collect();
    let snapshots: BTreeMap<u64, PathBuf> = all
        .iter()
        .filter(|(tick, _)| range.contains(**tick) && **tick > start)
        .map(|(tick, path)| (*tick, path.clone()))
        .collect();
    let mut out = Verified {
        ticks: 0,
        started_from: snapshot,
        snapshots_checked: 0,
        passed_over,
        torn_tail: None,
        desync: None,
    };
    let mut events: Vec<Event> = Vec::new();
    let mut before: Vec<(EntityId, Option<EntityState>)> = Vec::new();
    let mut ended = true;
    while let Some(record) = reader.next_record()? {
        if record.tick % 1024 == 0 {
            progress(reader.offset(), total);
        }
        if record.tick <= start {
            continue;
        }
        if range.past(record.tick) {
            ended = false;
            break;
        }
        before.clear();
        before.extend(
            record
                .commands
                .iter()
                .map(|c| (c.entity(), world.entity(c.entity()))),
        );
        events.clear();
        let report = world.step(&record.commands, &mut events);
        out.ticks += 1;
        if report.digest != record.digest {
            let kind = DesyncKind::Digest {
                journaled: record.digest,
                replayed: report.digest,
            };
            let comparison = compare_later(&mut world, &mut reader, &all, &before)?;
            out.desync = Some(Box::new(Desync {
                tick: record.tick,
                kind,
                commands: record.commands,
                comparison,
            }));
            return Ok(out);
        }
        let Some(path) = snapshots.get(&record.tick) else {
            continue;
        };
        match check_snapshot(path, &config, record.digest, &world) {
            Ok(None) => out.snapshots_checked += 1,
            Ok(Some(recorded)) => {
                out.snapshots_checked += 1;
                out.desync = Some(Box::new(Desync {
                    tick: record.tick,
                    kind: DesyncKind::Snapshot { path: path.clone() },
                    commands: record.commands,
                    comparison: Comparison::Snapshot {
                        tick: record.tick,
                        path: path.clone(),
                        diffs: diff_snapshots(&recorded, &world.snapshot()),
                    },
                }));
                return Ok(out);
            }
            Err(reason) => out.passed_over.push(PassedOver {
                tick: record.tick,
                place: path.display().to_string(),
                reason,
            }),
        }
    }
    if ended {
        // Snapshots of ticks the journal does not have belong to another history.
        let last = reader.last_tick();
        for (tick, path) in snapshots.range(last.saturating_add(1)..) {
            out.passed_over.push(PassedOver {
                tick: *tick,
                place: path.display().to_string(),
                reason: PassedOverReason::PastJournalEnd { last },
            });
        }
    }
    progress(total, total);
    out.torn_tail = reader.torn_tail();
    Ok(out)
}

/// Checks the snapshot file at `path` against the journal (`config`, and
/// `journaled`, its digest at the snapshot's tick) and against the replayed
/// `world` at that tick: `Ok(None)` when it matches, `Ok(Some(state))` when
/// it belongs to this journal yet holds another state (a desync the digest
/// missed), `Err(reason)` when it cannot be used: damaged, or another
/// world's or another history's, which is no fault of the journal.
fn check_snapshot(
    path: &Path,
    config: &lockgrid_kernel::Config,
    journaled: u64,
    world: &World,
) -> Result<Option<lockgrid_kernel::Snapshot>, PassedOverReason> {
    let recorded = read_snapshot(path).map_err(|e| PassedOverReason::Unreadable(e.into()))?;
    // The journal reaches this tick: it is the replayed world's.
    judge(
        &recorded,
        world.tick(),
        config,
        Some(journaled),
        world.tick(),
    )?;
    Ok((recorded != world.snapshot()).then_some(recorded))
}

/// After a digest mismatch: carry the replay on to the first readable
/// snapshot at or after the current tick and diff against it; without one,
/// describe what the divergent tick did to the entities it named.
fn compare_later(
    world: &mut World,
    reader: &mut JournalReader,
    snapshots: &BTreeMap<u64, PathBuf>,
    before: &[(EntityId, Option<EntityState>)],
) -> Result<Comparison, StoreError> {
    let config = *world.config();
    let later = snapshots.range(world.tick()..).find_map(|(tick, path)| {
        read_snapshot(path)
            .ok()
            .filter(|s| s.config == config)
            .map(|s| (*tick, path.clone(), s))
    });
    if let Some((tick, path, recorded)) = later {
        let mut events = Vec::new();
        while world.tick() < tick {
            let Some(record) = reader.next_record()? else {
                break;
            };
            events.clear();
            world.step(&record.commands, &mut events);
        }
        if world.tick() == tick {
            let diffs = diff_snapshots(&recorded, &world.snapshot());
            return Ok(Comparison::Snapshot { tick, path, diffs });
        }
    }
    let mut seen = Vec::new();
    let mut diffs = Vec::new();
    for (id, old) in before {
        if seen.contains(id) {
            continue;
        }
        seen.push(*id);
        if let Some(d) = diff_states(*id, *old, world.entity(*id)) {
            diffs.push(d);
        }
    }
    Ok(Comparison::Touched(diffs))
}

/// Filters for [`write_events`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EventFilter {
    /// Keep only this observer's view events and the rejections of commands
    /// naming this entity.
    pub observer: Option<EntityId>,
}

fn keep(filter: &EventFilter, e: &Event) -> bool {
    let Some(id) = filter.observer else {
        return true;
    };
    match *e {
        Event::Rejected { entity, .. } => entity == id,
        Event::Leave { observer, .. }
        | Event::Enter { observer, .. }
        | Event::Update { observer, .. } => observer == id,
    }
}

/// Why [`write_events`] stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum ReplayError {
    /// Reading the data folder failed, or the replay diverged from the journal.
    Store(StoreError),
    /// Writing the output failed.
    Output(io::Error),
}

impl fmt::Display for ReplayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReplayError::Store(e) => write!(f, "{e}"),
            ReplayError::Output(e) => write!(f, "cannot write output: {e}"),
        }
    }
}

impl std::error::Error for ReplayError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ReplayError::Store(e) => Some(e),
            ReplayError::Output(e) => Some(e),
        }
    }
}

impl From<StoreError> for ReplayError {
    fn from(e: StoreError) -> Self {
        ReplayError::Store(e)
    }
}

/// Writes the JSON Lines event stream (the `lockgrid run` format) of the
/// journaled ticks in `range`. With an observer filter, each tick line
/// counts the events written for that tick. Every digest is checked; a
/// divergence stops the stream with [`StoreError::Diverged`].
pub fn write_events<W: Write + ?Sized>(
    dir: &Path,
    range: TickRange,
    filter: EventFilter,
    out: &mut W,
) -> Result<u64, ReplayError> {
    check_range(dir, range)?;
    let mut world_start = start_before(dir, range.first() - 1)?;
    let start = world_start.world.tick();
    let mut events: Vec<Event> = Vec::new();
    let mut written = 0;
    while let Some(record) = world_start.reader.next_record().map_err(StoreError::from)? {
        if record.tick <= start {
            continue;
        }
        if range.past(record.tick) {
            break;
        }
        events.clear();
        let report = world_start.world.step(&record.commands, &mut events);
        if report.digest != record.digest {
            return Err(StoreError::Diverged {
                tick: record.tick,
                journaled: record.digest,
                replayed: report.digest,
            }
            .into());
        }
        if !range.contains(record.tick) {
            continue;
        }
        let mut n = 0;
        for e in events.iter().filter(|e| keep(&filter, e)) {
            jsonl::write_event(out, report.tick, e).map_err(ReplayError::Output)?;
            n += 1;
        }
        jsonl::write_tick_line(out, report.tick, report.digest, n).map_err(ReplayError::Output)?;
        written += 1;
    }
    out.flush().map_err(ReplayError::Output)?;
    Ok(written)
}

/// Builds a scenario for the journaled ticks in `range`, starting from the
/// state after tick `range.from - 1`.
///
/// When that state is not empty, scenario tick 1 spawns every live entity
/// (ascending id) with its exact position, heading, speed, radius and
/// masks, and journal tick `from + k` becomes scenario tick `k + 2`;
/// otherwise journal tick `from + k` is scenario tick `k + 1`. Spawns cannot carry the
/// kernel's throttle history or hysteresis views, so the first ticks of the
/// exported run may show different Updates and, near the hysteresis band,
/// different views than the journal; its digests differ from the journal's.
pub fn export_scenario(dir: &Path, range: TickRange) -> Result<Scenario, StoreError> {
    check_range(dir, range)?;
    let first = range.first();
    let Start {
        mut world,
        mut reader,
        ..
    } = start_before(dir, first - 1)?;
    let start = world.tick();
    let mut events = Vec::new();
    let mut ticks: Vec<Vec<Command>> = Vec::new();
    let mut reached = world.tick() + 1 >= first;
    while let Some(Record {
        tick,
        digest,
        commands,
    }) = reader.next_record()?
    {
        if tick <= start {
            continue;
        }
        if range.past(tick) {
            break;
        }
        if tick < first {
            events.clear();
            let report = world.step(&commands, &mut events);
            if report.digest != digest {
                return Err(StoreError::Diverged {
                    tick,
                    journaled: digest,
                    replayed: report.digest,
                });
            }
            reached = tick + 1 >= first;
            continue;
        }
        if ticks.is_empty() {
            ticks.push(spawns_of(&world));
        }
        ticks.push(commands);
    }
    if !reached {
        // The journal shrank since check_range read it (a server cut a
        // torn tail meanwhile): name the tick asked for.
        return Err(StoreError::NoSuchTick {
            tick: first,
            last: reader.last_tick(),
        });
    }
    if ticks.is_empty() {
        ticks.push(spawns_of(&world));
    }
    if ticks.first().is_some_and(Vec::is_empty) {
        ticks.remove(0);
    }
    Ok(Scenario {
        config: *world.config(),
        ticks,
    })
}

fn spawns_of(world: &World) -> Vec<Command> {
    let mut states: Vec<EntityState> = world.entities().collect();
    states.sort_unstable_by_key(|s| s.id);
    states
        .into_iter()
        .map(|s| Command::Spawn(s.spawn()))
        .collect()
}

#[cfg(test)]
mod tests;
