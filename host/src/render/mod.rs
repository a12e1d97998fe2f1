//! Pictures of a tick: the world after it, one observer's view, and what
//! the tick changed — the engine of `lockgrid render` and `lockgrid view`.
//!
//! A [`Timeline`] runs a scenario once and keeps every tick's digest and at
//! most [`MAX_CHECKPOINTS`] states to restore from; [`Timeline::frame`] gives the
//! [`Frame`] of any tick; [`to_svg`] draws it as deterministic SVG text
//! and [`svg_to_png`] rasterises that. A data folder becomes a scenario
//! through [`crate::replay::export_scenario`], the code `lockgrid replay`
//! uses, so its ticks, and digests, are the journal's; [`check_journal`]
//! confirms a tick's digest against the journal with
//! [`crate::replay::write_events`].
//!
//! ```
//! use lockgrid_host::render::{to_svg, Timeline};
//! use lockgrid_host::scenario::Scenario;
//!
//! let scenario = Scenario::from_json_str(r#"{"ticks": [
//!     {"commands": [{"spawn": {"id": 1, "pos": [10, 10], "observer": true}},
//!                   {"spawn": {"id": 2, "pos": [20, 10]}}]}
//! ]}"#)?;
//! let timeline = Timeline::index(scenario, |_, _| {})?;
//! let frame = timeline.frame(1, Some(1))?;
//! assert_eq!(frame.sight.as_ref().map(|s| s.entered.clone()), Some(vec![2]));
//! let svg = to_svg(timeline.config(), &frame, frame.sight.as_ref());
//! assert!(svg.starts_with("<svg"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod frame;
mod png;
mod svg;
mod timeline;

use core::fmt;
use std::path::Path;

use lockgrid_kernel::{EntityId, RestoreError};

pub use frame::{Frame, Rejection, Sight};
pub use png::{svg_to_png, PngError};
pub use svg::{to_svg, HEIGHT, WIDTH};
pub use timeline::{TickSummary, Timeline, CHECKPOINT_EVERY, MAX_CHECKPOINTS};

use crate::replay::{export_scenario, write_events, EventFilter, ReplayError, TickRange};
use crate::scenario::Scenario;
use crate::store::StoreError;

/// Why a frame could not be made.
#[derive(Debug)]
#[non_exhaustive]
pub enum RenderError {
    /// The tick lies after the run's last.
    PastTheEnd {
        /// The tick asked for.
        tick: u64,
        /// The run's last tick.
        last: u64,
    },
    /// The chosen entity is not a live observer at that tick.
    NotAnObserver {
        /// The entity asked for.
        id: EntityId,
        /// The tick.
        tick: u64,
        /// Whether it is alive (as an NPC) then.
        alive: bool,
    },
    /// A kept state did not restore (a bug: the timeline made it).
    Restore(RestoreError),
}

impl fmt::Display for RenderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RenderError::PastTheEnd { tick, last } => {
                write!(f, "tick {tick} is past the end (the last tick is {last})")
            }
            RenderError::NotAnObserver { id, tick, alive } => {
                if *alive {
                    write!(f, "entity {id} is an NPC at tick {tick}, not an observer")
                } else {
                    write!(f, "entity {id} is not alive at tick {tick}")
                }
            }
            RenderError::Restore(e) => write!(f, "cannot restore a kept state: {e}"),
        }
    }
}

impl std::error::Error for RenderError {}

/// Every journaled tick of data folder `dir` as a scenario, read by
/// [`crate::replay::export_scenario`] from the first tick: scenario tick
/// `k` is journal tick `k`, so a re-run gives the journal's digests.
pub fn journal_scenario(dir: &Path) -> Result<Scenario, StoreError> {
    export_scenario(dir, TickRange { from: 1, to: None })
}

/// Re-runs data folder `dir`'s journal through tick `tick` with
/// [`crate::replay::write_events`], which checks every digest on the way
/// against the journal: `Ok` means the ticks a picture shows are those the
/// journal recorded.
pub fn check_journal(dir: &Path, tick: u64) -> Result<(), ReplayError> {
    if tick == 0 {
        return Ok(());
    }
    let range = TickRange {
        from: tick,
        to: Some(tick),
    };
    write_events(dir, range, EventFilter::default(), &mut std::io::sink()).map(|_| ())
}
