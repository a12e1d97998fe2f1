//! `lockgrid render (SCENARIO.json | DATA_DIR | nats://…/NAME) --tick T [--observer ID] [-o FILE.svg|FILE.png]`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::Args;
use lockgrid_host::render::{
    check_journal, journal_scenario, svg_to_png, to_svg, RenderError, Timeline,
};
use lockgrid_host::scenario::Scenario;

use super::{output_error, Failure};

/// Flags of `lockgrid render`.
#[derive(Args, Debug)]
pub(crate) struct RenderArgs {
    /// A scenario file (`-`: standard input), a data folder (its journal is replayed), or a cluster's world: nats://HOST:PORT[,nats://…]/NAME.
    input: PathBuf,
    /// The tick to draw (0: before the first).
    #[arg(long, value_name = "T")]
    tick: u64,
    /// The observer whose view to show [default: the lowest live observer id].
    #[arg(long, value_name = "ID")]
    observer: Option<u64>,
    /// Write to this file, SVG or PNG by its extension [default: SVG on standard output].
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
}

/// What `-o` asks for.
enum Output {
    Stdout,
    Svg(PathBuf),
    Png(PathBuf),
}

fn output_of(path: Option<PathBuf>) -> Result<Output, Failure> {
    let Some(path) = path else {
        return Ok(Output::Stdout);
    };
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("svg") => Ok(Output::Svg(path)),
        Some("png") => Ok(Output::Png(path)),
        _ => Err(Failure::new(format_args!(
            "-o {}: name the file .svg or .png",
            path.display()
        ))),
    }
}

/// Reads a scenario file or a data folder's journal (through the replay code).
pub(crate) fn load_input(input: &Path) -> Result<Scenario, Failure> {
    if input.is_dir() {
        journal_scenario(input).map_err(|e| Failure::new(format_args!("{}: {e}", input.display())))
    } else {
        super::run::load_scenario(input)
    }
}

pub(crate) fn run(args: RenderArgs) -> Result<(), Failure> {
    let output = output_of(args.output)?;
    // A cluster's world is exported to a temporary data folder first, as
    // `replay` does, and drawn from there; messages still name the world.
    let exported = super::cluster::replay_source(&args.input, None)?;
    let input = exported.as_ref().map_or(args.input.as_path(), |e| e.dir());
    let shown = args.input.display();
    let mut scenario = if exported.is_some() {
        journal_scenario(input).map_err(|e| Failure::new(format_args!("{shown}: {e}")))?
    } else {
        load_input(input)?
    };
    let last = scenario.ticks.len() as u64;
    if args.tick > last {
        return Err(Failure::new(RenderError::PastTheEnd {
            tick: args.tick,
            last,
        }));
    }
    if input.is_dir() {
        check_journal(input, args.tick).map_err(|e| Failure::new(format_args!("{shown}: {e}")))?;
    }
    // Later ticks cannot change this one's picture.
    scenario.ticks.truncate(args.tick as usize);
    let timeline = Timeline::index(scenario, |_, _| {})
        .map_err(|e| Failure::new(format_args!("{shown}: config: {e}")))?;
    let frame = timeline
        .frame(args.tick, args.observer)
        .map_err(Failure::new)?;
    let svg = to_svg(timeline.config(), &frame, frame.sight.as_ref());
    let write = |path: &Path, bytes: &[u8]| {
        std::fs::write(path, bytes)
            .map_err(|e| Failure::new(format_args!("cannot write {}: {e}", path.display())))
    };
    match output {
        Output::Stdout => {
            let mut out = io::stdout().lock();
            match out.write_all(svg.as_bytes()).and_then(|()| out.flush()) {
                Ok(()) => Ok(()),
                Err(e) => output_error(e).map_or(Ok(()), Err),
            }
        }
        Output::Svg(path) => write(&path, svg.as_bytes()),
        Output::Png(path) => {
            let png = svg_to_png(&svg).map_err(Failure::new)?;
            write(&path, &png)
        }
    }
}
