//! Running a scenario through the kernel: the engine of `lockgrid run`.

use core::fmt;
use std::io::{self, Write};
use std::time::{Duration, Instant};

use lockgrid_kernel::{Command, ConfigError, Event, RejectReason, TickReport, World};

use crate::jsonl;
use crate::scenario::Scenario;

/// Why a run stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunError {
    /// The scenario's config cannot build a world.
    Config(ConfigError),
    /// Writing the output (or the per-tick hook) failed.
    Io(io::Error),
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Config(e) => write!(f, "config: {e}"),
            RunError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Config(e) => Some(e),
            RunError::Io(e) => Some(e),
        }
    }
}

impl From<io::Error> for RunError {
    fn from(e: io::Error) -> Self {
        RunError::Io(e)
    }
}

/// What a run produced, for the `--summary` table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunSummary {
    /// Ticks run.
    pub ticks: u64,
    /// Digest after the last tick (that of the empty world when no tick ran).
    pub final_digest: u64,
    /// Enter events.
    pub enters: u64,
    /// Leave events.
    pub leaves: u64,
    /// Update events.
    pub updates: u64,
    /// Rejections per reason, indexed like [`RejectReason::ALL`].
    pub rejections: [u64; 5],
    /// Wall time of each `World::step` call, in tick order.
    pub step_times: Vec<Duration>,
}

impl RunSummary {
    /// All events, rejections included.
    pub fn events(&self) -> u64 {
        self.enters + self.leaves + self.updates + self.rejected()
    }

    /// All rejections.
    pub fn rejected(&self) -> u64 {
        self.rejections.iter().sum()
    }

    /// Median `step` time (the upper median for an even count); zero without ticks.
    pub fn median_step(&self) -> Duration {
        let mut t = self.step_times.clone();
        t.sort_unstable();
        t.get(t.len() / 2).copied().unwrap_or_default()
    }

    /// Longest `step` time; zero without ticks.
    pub fn max_step(&self) -> Duration {
        self.step_times.iter().copied().max().unwrap_or_default()
    }

    fn count(&mut self, event: &Event) {
        match *event {
            Event::Rejected { reason, .. } => {
                let i = RejectReason::ALL
                    .iter()
                    .position(|r| *r == reason)
                    .unwrap_or(0); // ALL lists every reason
                self.rejections[i] += 1;
            }
            Event::Leave { .. } => self.leaves += 1,
            Event::Enter { .. } => self.enters += 1,
            Event::Update { .. } => self.updates += 1,
        }
    }
}

impl fmt::Display for RunSummary {
    /// A short table for people, not for parsing: labels in one column
    /// wide enough for the longest (`    unknown_entity`), figures
    /// right-aligned in a column as wide as the digest.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const LABEL: usize = 19;
        let mut row = |label: &str, value: &dyn fmt::Display| {
            writeln!(f, "{label:<LABEL$}{:>16}", value.to_string())
        };
        row("ticks", &self.ticks)?;
        row("events", &self.events())?;
        row("  enter", &self.enters)?;
        row("  leave", &self.leaves)?;
        row("  update", &self.updates)?;
        row("  rejected", &self.rejected())?;
        for (reason, n) in RejectReason::ALL.iter().zip(self.rejections) {
            if n > 0 {
                row(&format!("    {}", reason.as_str()), &n)?;
            }
        }
        row("step time median", &Micros(self.median_step()))?;
        row("step time max", &Micros(self.max_step()))?;
        row("final digest", &format_args!("{:016x}", self.final_digest))
    }
}

/// A duration in microseconds with one decimal, e.g. `12.3 µs`.
struct Micros(Duration);

impl fmt::Display for Micros {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tenths = self.0.as_nanos() / 100;
        let text = format!("{}.{} µs", tenths / 10, tenths % 10);
        f.pad(&text)
    }
}

/// What a per-tick hook of [`run_with`] sees after each step.
pub struct TickOutput<'a> {
    /// The world after the tick.
    pub world: &'a World,
    /// The commands the tick applied, in order.
    pub commands: &'a [Command],
    /// Tick number, digest and event count.
    pub report: &'a TickReport,
    /// The tick's events in contract order.
    pub events: &'a [Event],
}

/// Runs `scenario` and calls `on_tick` after every step, outside the timed
/// region. The hook's first error stops the run.
pub fn run_with<F>(scenario: &Scenario, mut on_tick: F) -> Result<RunSummary, RunError>
where
    F: FnMut(TickOutput<'_>) -> io::Result<()>,
{
    let mut world = World::new(scenario.config).map_err(RunError::Config)?;
    let mut summary = RunSummary {
        final_digest: world.digest(),
        step_times: Vec::with_capacity(scenario.ticks.len()),
        ..RunSummary::default()
    };
    let mut events: Vec<Event> = Vec::new();
    for commands in &scenario.ticks {
        events.clear();
        let start = Instant::now();
        let report = world.step(commands, &mut events);
        summary.step_times.push(start.elapsed());
        summary.ticks += 1;
        summary.final_digest = report.digest;
        for event in &events {
            summary.count(event);
        }
        on_tick(TickOutput {
            world: &world,
            commands,
            report: &report,
            events: &events,
        })?;
    }
    Ok(summary)
}

/// Runs `scenario`, writing its JSON Lines event stream to `out` (see
/// [`crate::jsonl`]). Flushes `out` at the end.
pub fn run_scenario<W: Write + ?Sized>(
    scenario: &Scenario,
    out: &mut W,
) -> Result<RunSummary, RunError> {
    let summary = run_with(scenario, |t| jsonl::write_tick(out, t.report, t.events))?;
    out.flush()?;
    Ok(summary)
}

/// Runs `scenario` without writing events, for `--summary`.
pub fn summarize_scenario(scenario: &Scenario) -> Result<RunSummary, RunError> {
    run_with(scenario, |_| Ok(()))
}
