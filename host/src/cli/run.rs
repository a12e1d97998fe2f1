//! `lockgrid run SCENARIO [--summary]`.

use std::io::{self, BufWriter, Write};
use std::path::Path;

use lockgrid_host::run::{run_scenario, summarize_scenario, RunError};
use lockgrid_host::scenario::Scenario;

use super::{output_error, Failure};

/// Reads and parses a scenario file; errors name the file and the location.
pub(crate) fn load_scenario(path: &Path) -> Result<Scenario, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Failure::new(format_args!("cannot read {}: {e}", path.display())))?;
    Scenario::from_json_str(&text)
        .map_err(|e| Failure::new(format_args!("{}: {e}", path.display())))
}

pub(crate) fn run(path: &Path, summary: bool) -> Result<(), Failure> {
    let scenario = load_scenario(path)?;
    let stdout = io::stdout().lock();
    let mut out = BufWriter::with_capacity(1 << 16, stdout);
    let result = if summary {
        summarize_scenario(&scenario).and_then(|s| {
            write!(out, "{s}")?;
            out.flush()?;
            Ok(s)
        })
    } else {
        run_scenario(&scenario, &mut out)
    };
    match result {
        Ok(_) => Ok(()),
        Err(RunError::Io(e)) => output_error(e).map_or(Ok(()), Err),
        Err(e) => Err(Failure::new(format_args!("{}: {e}", path.display()))),
    }
}
