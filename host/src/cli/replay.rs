//! `lockgrid replay DATA_DIR (--verify | --events | --export-scenario FILE)`.

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::Path;
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use lockgrid_host::replay::{self, EventFilter, ReplayError, TickRange};

use super::{output_error, Failure};

pub(crate) fn verify(dir: &Path, range: TickRange) -> Result<(), Failure> {
    let bar = if io::stderr().is_terminal() {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{bar:40} {percent:>3}% of the journal, {elapsed} elapsed, {eta} left",
        ) {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let started = Instant::now();
    let result = replay::verify(dir, range, |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    let verified = result.map_err(|e| Failure::new(format_args!("{}: {e}", dir.display())))?;
    for passed in &verified.passed_over {
        eprintln!("note: could not use {passed}");
    }
    if let Some(torn) = &verified.torn_tail {
        eprintln!("note: the journal ends in a {torn} (left as is; the next server start cuts it)");
    }
    let elapsed = started.elapsed();
    let rate = verified.ticks as f64 / elapsed.as_secs_f64().max(1e-9);
    let from = match &verified.started_from {
        Some((tick, place)) => format!("from snapshot {place} (tick {tick})"),
        None => "from the start".to_owned(),
    };
    if let Some(desync) = verified.desync {
        print!("{desync}");
        return Err(Failure::new(format_args!(
            "desync at tick {} (re-ran {} ticks {from})",
            desync.tick, verified.ticks
        )));
    }
    let (checked, unusable) = (verified.snapshots_checked, verified.passed_over.len());
    let outcome = match (checked, unusable) {
        (0, 0) => "no snapshot in the range: all digests match".to_owned(),
        (0, n) => format!(
            "all digests match, but no snapshot could be compared: the {n} in the range could not be used (named above)"
        ),
        (k, 0) => format!("{k} snapshots compared: all digests match"),
        (k, n) => format!(
            "{k} snapshots compared, {n} could not be used (named above): all digests match"
        ),
    };
    println!(
        "verified {} ticks {from}, {outcome} ({:.3} s, {:.0} ticks/s)",
        verified.ticks,
        elapsed.as_secs_f64(),
        rate
    );
    Ok(())
}

pub(crate) fn events(dir: &Path, range: TickRange, filter: EventFilter) -> Result<(), Failure> {
    let stdout = io::stdout().lock();
    let mut out = BufWriter::with_capacity(1 << 16, stdout);
    match replay::write_events(dir, range, filter, &mut out) {
        Ok(_) => Ok(()),
        Err(ReplayError::Output(e)) => output_error(e).map_or(Ok(()), Err),
        Err(e) => Err(Failure::new(format_args!("{}: {e}", dir.display()))),
    }
}

pub(crate) fn export(dir: &Path, range: TickRange, file: &Path) -> Result<(), Failure> {
    let scenario = replay::export_scenario(dir, range)
        .map_err(|e| Failure::new(format_args!("{}: {e}", dir.display())))?;
    let mut text = Vec::new();
    lockgrid_host::scenario::write_json(&scenario, &mut text)
        .and_then(|()| std::fs::File::create(file)?.write_all(&text))
        .map_err(|e| Failure::new(format_args!("cannot write {}: {e}", file.display())))?;
    eprintln!(
        "wrote {} ticks to {}{}",
        scenario.ticks.len(),
        file.display(),
        if range.from > 1 {
            " (tick 1 rebuilds the state with spawns: throttle history and hysteresis views are not carried over)"
        } else {
            ""
        }
    );
    Ok(())
}
