//! `lockgrid view (DATA_DIR | SCENARIO.json) [--port P]`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use lockgrid_host::view::{serve_view, Source};

use super::Failure;

/// Flags of `lockgrid view`.
#[derive(Args, Debug)]
pub(crate) struct ViewArgs {
    /// A data folder (its journal is verified and replayed) or a scenario file (`-`: standard input).
    input: PathBuf,
    /// Port on 127.0.0.1 to serve the page on (0: any free port).
    #[arg(long, value_name = "P", default_value_t = 7780)]
    port: u16,
}

pub(crate) fn run(args: ViewArgs) -> Result<(), Failure> {
    let source = if args.input.is_dir() {
        Source::DataDir(args.input.clone())
    } else {
        Source::Scenario(Box::new(super::run::load_scenario(&args.input)?))
    };
    let title = args.input.file_name().map_or_else(
        || args.input.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    serve_view(source, &title, args.port, |addr| {
        // One line on stdout, so scripts and tests learn the port of `--port 0`.
        println!("lockgrid view: http://{addr}/ (Ctrl-C to stop)");
        let _ = std::io::stdout().flush();
    })
    .map_err(|e| Failure::new(format_args!("view on 127.0.0.1:{}: {e}", args.port)))
}
