//! A run indexed once, so any tick can be looked at without re-running
//! from the start: each tick's digest and event counts, and a state
//! snapshot every so many ticks to restore from.

use lockgrid_kernel::{Config, ConfigError, EntityId, Event, Snapshot, World};

use super::{Frame, RenderError};
use crate::scenario::Scenario;

/// Fewest ticks between two kept states: reaching any tick of a short run
/// re-runs at most this many ticks.
pub const CHECKPOINT_EVERY: u64 = 256;

/// Most states kept besides the empty world's: a longer run spaces them
/// wider, so memory stays bounded by this many world states whatever the
/// length of the journal, and a frame re-runs at most `ticks / 256` ticks.
pub const MAX_CHECKPOINTS: u64 = 256;

/// What one tick produced, as the timeline lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickSummary {
    /// The tick (the first is 1).
    pub tick: u64,
    /// Digest of the state after the tick.
    pub digest: u64,
    /// Enter, Leave and Update events of every observer.
    pub view_events: u64,
    /// Rejected commands.
    pub rejected: u64,
}

/// A scenario run once through the kernel and indexed by tick.
pub struct Timeline {
    scenario: Scenario,
    ticks: Vec<TickSummary>,
    /// `(tick, state after it)`, ascending; the first is tick 0 (empty world).
    checkpoints: Vec<(u64, Snapshot)>,
}

impl Timeline {
    /// Runs `scenario` to its end, keeping a state every
    /// `max(CHECKPOINT_EVERY, ticks / MAX_CHECKPOINTS)` ticks;
    /// `progress(done, total)` hears of every 64th tick and of the last.
    pub fn index(
        scenario: Scenario,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<Timeline, ConfigError> {
        let mut world = World::new(scenario.config)?;
        let total = scenario.ticks.len() as u64;
        let mut ticks = Vec::with_capacity(scenario.ticks.len());
        let every = CHECKPOINT_EVERY.max(total.div_ceil(MAX_CHECKPOINTS));
        let mut checkpoints = vec![(0, world.snapshot())];
        let mut events: Vec<Event> = Vec::new();
        for commands in &scenario.ticks {
            events.clear();
            let report = world.step(commands, &mut events);
            let rejected = events
                .iter()
                .filter(|e| matches!(e, Event::Rejected { .. }))
                .count() as u64;
            ticks.push(TickSummary {
                tick: report.tick,
                digest: report.digest,
                view_events: report.events - rejected,
                rejected,
            });
            if report.tick % every == 0 {
                checkpoints.push((report.tick, world.snapshot()));
            }
            if report.tick % 64 == 0 || report.tick == total {
                progress(report.tick, total);
            }
        }
        Ok(Timeline {
            scenario,
            ticks,
            checkpoints,
        })
    }

    /// The world's config.
    pub fn config(&self) -> &Config {
        &self.scenario.config
    }

    /// The last tick (0 for a run without ticks).
    pub fn last_tick(&self) -> u64 {
        self.ticks.len() as u64
    }

    /// Every tick's summary, tick 1 first.
    pub fn ticks(&self) -> &[TickSummary] {
        &self.ticks
    }

    /// The world after `tick` (0: before the first), with that tick's
    /// events, re-run from the nearest kept state before it, seen by
    /// `observer` (see [`Frame::of`]).
    pub fn frame(&self, tick: u64, observer: Option<EntityId>) -> Result<Frame, RenderError> {
        if tick > self.last_tick() {
            return Err(RenderError::PastTheEnd {
                tick,
                last: self.last_tick(),
            });
        }
        // The state after tick - 1 is needed to see tick's events.
        let before = tick.saturating_sub(1);
        let (start, snapshot) = self
            .checkpoints
            .iter()
            .rev()
            .find(|(t, _)| *t <= before)
            .unwrap_or(&self.checkpoints[0]); // tick 0 is always kept
        let mut world = World::restore(snapshot).map_err(RenderError::Restore)?;
        let mut events: Vec<Event> = Vec::new();
        for t in *start + 1..=tick {
            events.clear();
            // t - 1 < last_tick, so the index is in range.
            world.step(&self.scenario.ticks[(t - 1) as usize], &mut events);
        }
        if tick == 0 {
            events.clear();
        }
        Frame::of(&world, events, observer)
    }
}
