//! Command-line parsing and the shared error/exit handling of `lockgrid`.

mod bots;
mod cluster;
mod render;
mod replay;
mod run;
mod serve;
mod token;
mod view;

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{ArgGroup, Parser, Subcommand};
use lockgrid_host::replay::{EventFilter, TickRange};

/// lockgrid: a deterministic lockstep area-of-interest (AOI) kernel for the
/// spatial core of MMO game servers, and its tools. Feed it one tick of
/// commands (spawn, move, despawn); it tells every player what entered its
/// view, what left it and what moved, in one stable order, with a 64-bit
/// digest of the whole state. Identical inputs give identical outputs.
#[derive(Parser)]
#[command(
    name = "lockgrid",
    version,
    about = "lockgrid: a deterministic lockstep area-of-interest kernel for MMO game servers, and its tools.",
    after_help = "Start a server with `lockgrid serve`, load it with `lockgrid bots`, then look at what happened \
with `lockgrid replay DIR --verify`, `lockgrid render DIR --tick T` or `lockgrid view DIR`."
)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand)]
enum Commands {
    /// Serve a world over UDP: fixed-timestep ticks, journal and snapshots in a data folder.
    #[command(allow_negative_numbers = true)]
    Serve(Box<serve::ServeArgs>),
    /// Run protocol clients with random walks against a server and check their views.
    #[command(allow_negative_numbers = true)]
    Bots(bots::BotsArgs),
    /// Print a connect token (hex) for a client, minted with a server's key.
    #[command(allow_negative_numbers = true)]
    Token(token::TokenArgs),
    /// Run a scenario file and print its JSON Lines event stream.
    #[command(allow_negative_numbers = true)]
    Run {
        /// The scenario (JSON: {"config": {...}, "ticks": [{"commands": [...]}, ...]}), `-` for standard input; at most 256 MiB.
        scenario: PathBuf,
        /// Print a short table (ticks, events, rejections, digest, step times) instead of events.
        #[arg(long)]
        summary: bool,
        /// Also journal every tick (and write snapshots) into this data folder, which must not hold a journal yet.
        #[arg(long, value_name = "DATA_DIR")]
        journal: Option<PathBuf>,
        /// With --journal: write a state snapshot every this many ticks (0: never).
        #[arg(
            long,
            value_name = "TICKS",
            default_value_t = 600,
            requires = "journal"
        )]
        snapshot_every: u64,
        /// Print the cell-addressed events (leave/enter/update per cell) instead of the per-observer ones.
        #[arg(long, conflicts_with_all = ["summary", "journal"])]
        by_cell: bool,
        /// Refuse a world that would reserve more memory than this (e.g. 4GiB) [default: half of the machine's].
        #[arg(long, value_name = "SIZE", value_parser = lockgrid_host::memory_limit::parse_size)]
        max_memory: Option<u64>,
    },
    /// Draw the world at one tick as SVG or PNG: entities, one observer's view, the tick's changes.
    #[command(allow_negative_numbers = true)]
    Render(render::RenderArgs),
    /// Serve a local web page to scrub through the ticks of a data folder or scenario.
    #[command(allow_negative_numbers = true)]
    View(view::ViewArgs),
    /// Re-run a data folder's journal: verify digests, print events, or export a scenario.
    #[command(allow_negative_numbers = true)]
    #[command(group(ArgGroup::new("mode").required(true).args(["verify", "events", "export_scenario", "export"])))]
    Replay {
        /// The data folder (holding journal.lgj and snapshots/), or a cluster's world: nats://HOST:PORT[,nats://…]/NAME.
        data_dir: PathBuf,
        /// With a nats:// world: write its stream and snapshots into this new data folder.
        #[arg(long, value_name = "DIR")]
        export: Option<PathBuf>,
        /// Compare every tick's digest (and every snapshot) with a re-run; report the first divergence.
        #[arg(long)]
        verify: bool,
        /// Print the JSON Lines event stream (the `run` format) of the journaled ticks.
        #[arg(long)]
        events: bool,
        /// Write a scenario for the tick range, starting from the state before --from.
        #[arg(long, value_name = "FILE")]
        export_scenario: Option<PathBuf>,
        /// First tick of interest.
        #[arg(long, value_name = "T", default_value_t = 1)]
        from: u64,
        /// Last tick of interest (default: the journal's last).
        #[arg(long, value_name = "T")]
        to: Option<u64>,
        /// With --events: only this observer's events (and rejections of its commands).
        #[arg(long, value_name = "ID", conflicts_with_all = ["verify", "export_scenario"])]
        observer: Option<u64>,
    },
}

/// A failure worth one line on stderr and a non-zero exit.
pub(crate) struct Failure(String);

impl Failure {
    pub(crate) fn new(message: impl std::fmt::Display) -> Self {
        Failure(message.to_string())
    }
}

/// Turns an output error into a failure, or into a quiet success when the
/// reader went away (`lockgrid run x.json | head`).
pub(crate) fn output_error(e: io::Error) -> Option<Failure> {
    if e.kind() == io::ErrorKind::BrokenPipe {
        None
    } else {
        Some(Failure::new(format_args!("cannot write output: {e}")))
    }
}

/// Logs to stderr through `tracing`; `RUST_LOG` filters (default `info`).
pub(crate) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // A second initialisation (never done here) would only be refused.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_ansi(io::IsTerminal::is_terminal(&io::stderr()))
        .try_init();
}

pub(crate) fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Commands::Serve(args) => serve::run(*args),
        Commands::Bots(args) => bots::run(args),
        Commands::Token(args) => token::run(args),
        Commands::Run {
            scenario,
            by_cell: true,
            max_memory,
            ..
        } => run::run_by_cell(&scenario, max_memory),
        Commands::Run {
            scenario,
            summary,
            journal,
            snapshot_every,
            max_memory,
            ..
        } => run::run(
            &scenario,
            summary,
            journal.as_deref(),
            snapshot_every,
            max_memory,
        ),
        Commands::Render(args) => render::run(args),
        Commands::View(args) => view::run(args),
        Commands::Replay {
            data_dir,
            export,
            verify,
            events,
            export_scenario,
            from,
            to,
            observer,
        } => {
            let range = TickRange { from, to };
            let stream = match cluster::replay_source(&data_dir, export.as_deref()) {
                Ok(s) => s,
                Err(e) => return fail(e),
            };
            let data_dir = stream.as_ref().map_or(data_dir, |s| s.dir().to_owned());
            if export.is_some() {
                Ok(())
            } else if verify {
                replay::verify(&data_dir, range)
            } else if events {
                replay::events(&data_dir, range, EventFilter { observer })
            } else if let Some(file) = export_scenario {
                replay::export(&data_dir, range, &file)
            } else {
                // clap requires exactly one of the three modes.
                Err(Failure::new(
                    "choose --verify, --events or --export-scenario",
                ))
            }
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(e),
    }
}

fn fail(Failure(message): Failure) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::FAILURE
}
