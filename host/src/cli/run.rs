//! `lockgrid run SCENARIO [--summary] [--journal DIR]`.

use std::io::{self, BufWriter, Read, Write};
use std::path::Path;

use lockgrid_host::cell_stream::run_by_cell as run_cells;
use lockgrid_host::jsonl;
use lockgrid_host::memory_limit::MemoryLimit;
use lockgrid_host::run::{run_scenario, run_with, summarize_scenario, RunError};
use lockgrid_host::scenario::{Scenario, MAX_SCENARIO_BYTES};
use lockgrid_host::store::{Recorder, StoreOptions};

use super::{output_error, Failure};

/// Reads and parses a scenario file (`-`: standard input); errors name the
/// file and the location.
pub(crate) fn load_scenario(path: &Path) -> Result<Scenario, Failure> {
    let stdin = path.as_os_str() == "-";
    let shown = if stdin {
        "standard input".to_owned()
    } else {
        path.display().to_string()
    };
    let cannot = |e: io::Error| Failure::new(format_args!("cannot read {shown}: {e}"));
    let too_large = || {
        Failure::new(format_args!(
            "{shown}: a scenario may hold at most {MAX_SCENARIO_BYTES} bytes (256 MiB)"
        ))
    };
    let mut bytes = Vec::new();
    if !stdin && std::fs::metadata(path).is_ok_and(|m| m.len() > MAX_SCENARIO_BYTES) {
        // Refused before reading anything; the read below still stops at the
        // limit for files that grow or lie about their size.
        return Err(too_large());
    }
    if stdin {
        io::stdin()
            .lock()
            .take(MAX_SCENARIO_BYTES + 1)
            .read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_SCENARIO_BYTES + 1).read_to_end(&mut bytes))
    }
    .map_err(cannot)?;
    if bytes.len() as u64 > MAX_SCENARIO_BYTES {
        return Err(too_large());
    }
    let text = String::from_utf8(bytes).map_err(|e| {
        Failure::new(format_args!(
            "{shown}: not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    Scenario::from_json_str(&text).map_err(|e| Failure::new(format_args!("{shown}: {e}")))
}

pub(crate) fn run(
    path: &Path,
    summary: bool,
    journal: Option<&Path>,
    snapshot_every: u64,
    max_memory: Option<u64>,
) -> Result<(), Failure> {
    let scenario = load_scenario(path)?;
    check_memory(path, &scenario, max_memory)?;
    let stdout = io::stdout().lock();
    let mut out = BufWriter::with_capacity(1 << 16, stdout);
    let result = if let Some(dir) = journal {
        let options = StoreOptions {
            snapshot_every,
            ..StoreOptions::default()
        };
        let mut recorder = Recorder::create(dir, &scenario.config, options)
            .map_err(|e| Failure::new(format_args!("{}: {e}", dir.display())))?;
        // Journal first: a tick's results go out only once it is durable.
        let mut store_error = None;
        let result = run_with(&scenario, |t| {
            if let Err(e) = recorder.record(t.world, t.commands, t.report) {
                store_error = Some(e);
                return Err(io::Error::other("journal failed"));
            }
            if summary {
                Ok(())
            } else {
                jsonl::write_tick(&mut out, t.report, t.events)
            }
        });
        if let Some(e) = store_error {
            return Err(Failure::new(format_args!("{}: {e}", dir.display())));
        }
        recorder
            .close()
            .map_err(|e| Failure::new(format_args!("{}: {e}", dir.display())))?;
        result.and_then(|s| {
            if summary {
                write!(out, "{s}")?;
            }
            out.flush()?;
            Ok(s)
        })
    } else if summary {
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
        Err(e) if path.as_os_str() == "-" => Err(Failure::new(format_args!("standard input: {e}"))),
        Err(e) => Err(Failure::new(format_args!("{}: {e}", path.display()))),
    }
}

/// `lockgrid run SCENARIO --by-cell`: the cell-addressed event stream.
pub(crate) fn run_by_cell(path: &Path, max_memory: Option<u64>) -> Result<(), Failure> {
    let scenario = load_scenario(path)?;
    check_memory(path, &scenario, max_memory)?;
    let mut out = BufWriter::with_capacity(1 << 16, io::stdout().lock());
    match run_cells(&scenario, &mut out) {
        Ok(_) => Ok(()),
        Err(RunError::Io(e)) => output_error(e).map_or(Ok(()), Err),
        Err(e) => Err(Failure::new(format_args!("{}: {e}", path.display()))),
    }
}

/// Refuses a scenario whose world would reserve more than the limit
/// (`--max-memory`, else half of the machine's memory), before building it.
fn check_memory(path: &Path, scenario: &Scenario, max_memory: Option<u64>) -> Result<(), Failure> {
    let limit = max_memory.map_or_else(MemoryLimit::default_for_machine, MemoryLimit::given);
    limit
        .check(&scenario.config)
        .map_err(|e| Failure::new(format_args!("{}: {e}", path.display())))
}
