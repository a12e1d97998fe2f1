//! Scenario files: a world config and the commands of each tick, as JSON.
//!
//! ```json
//! {"config": {"cell_size": 50, "visibility": "radius"},
//!  "ticks": [
//!   {"commands": [{"spawn": {"id": 1, "pos": [10, 10], "observer": true}},
//!                 {"spawn": {"id": 2, "pos": [12.5, -0.25]}}]},
//!   {"commands": [{"move": {"id": 2, "pos": [14, 0], "dir": 16384, "speed": 2}}]},
//!   {"commands": [{"despawn": {"id": 2}}]}
//!  ]}
//! ```
//!
//! The first entry of `ticks` is tick 1. Every key is optional except
//! `ticks`, the `id` of each command and the `pos` of spawns and moves;
//! defaults are those of the scenario format (a spawn's `radius` defaults to
//! the config's `cell_size`; `max_observers` to `max_entities`). Unknown keys
//! are errors. Numbers are converted from their decimal text, never through
//! floating point: exactly when representable, otherwise rounded to the
//! nearest `I48F16`, ties to even (see [`crate::decimal`]).

mod de;
mod write;

use core::fmt;

use lockgrid_kernel::{Command, Config, ConfigError};

pub(crate) use write::write_command;
pub use write::write_json;

/// Largest scenario text the `lockgrid` tool reads, in bytes (256 MiB).
///
/// A parsed scenario takes about as much memory as its text, so the limit
/// bounds what one command may allocate; a longer run is better journaled
/// (`lockgrid run --journal`) or split.
pub const MAX_SCENARIO_BYTES: u64 = 256 << 20;

/// A parsed scenario: the world config and each tick's commands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scenario {
    /// The world to build; already validated when parsed from JSON.
    pub config: Config,
    /// Commands of tick 1, tick 2, …, in the order they apply.
    pub ticks: Vec<Vec<Command>>,
}

/// Why a scenario text was refused. Its `Display` is one line.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScenarioError {
    /// The text is not JSON, or not a scenario: a syntax error, unknown key,
    /// missing key, wrong type or out-of-range number.
    Json {
        /// Where in the document, as a path like `ticks[3].commands[1].move.pos`
        /// (array indices count from 0); empty at the top level.
        path: String,
        /// What is wrong there.
        message: String,
        /// 1-based line of the offending text (0 when unknown).
        line: usize,
        /// 1-based column of the offending text (0 when unknown).
        column: usize,
    },
    /// The document parsed, but its config cannot build a world.
    Config(ConfigError),
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScenarioError::Json {
                path,
                message,
                line,
                column,
            } => {
                if !path.is_empty() {
                    write!(f, "{path}: ")?;
                }
                f.write_str(message)?;
                if *line > 0 {
                    write!(f, " (line {line}, column {column})")?;
                }
                Ok(())
            }
            ScenarioError::Config(e) => write!(f, "config: {e}"),
        }
    }
}

impl std::error::Error for ScenarioError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ScenarioError::Config(e) => Some(e),
            ScenarioError::Json { .. } => None,
        }
    }
}

impl Scenario {
    /// Parses and validates a scenario document.
    ///
    /// Never panics, whatever the input (deeply nested arrays stop at the
    /// JSON parser's recursion limit with an error).
    pub fn from_json_str(text: &str) -> Result<Scenario, ScenarioError> {
        let scenario = de::parse(text)?;
        scenario.config.validate().map_err(ScenarioError::Config)?;
        Ok(scenario)
    }

    /// The scenario as a JSON document that [`Scenario::from_json_str`]
    /// reads back to an equal value: one command per line, numbers as exact
    /// decimals, keys left at their default omitted.
    pub fn to_json(&self) -> String {
        let mut out = Vec::new();
        // Writing to a Vec cannot fail, and the writer emits only ASCII.
        write_json(self, &mut out).expect("writing to a Vec cannot fail");
        String::from_utf8(out).expect("the scenario writer emits only ASCII")
    }
}

#[cfg(test)]
mod tests;
