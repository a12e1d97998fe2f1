//! Command-line parsing and the shared error/exit handling of `lockgrid`.

mod run;

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// lockgrid: a deterministic lockstep area-of-interest kernel and its tools.
#[derive(Parser)]
#[command(name = "lockgrid", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand)]
enum Commands {
    /// Run a scenario file and print its JSON Lines event stream.
    Run {
        /// The scenario (JSON: {"config": {...}, "ticks": [{"commands": [...]}, ...]}).
        scenario: PathBuf,
        /// Print a short table (ticks, events, rejections, digest, step times) instead of events.
        #[arg(long)]
        summary: bool,
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

pub(crate) fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Commands::Run { scenario, summary } => run::run(&scenario, summary),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(message)) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}
