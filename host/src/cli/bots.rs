//! `lockgrid bots --clients N --seconds S [--server ADDR] [--seed X] [--data-dir DIR] [--pace ticks|clock]`.

use std::io::{self, IsTerminal};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use lockgrid_host::bots::{run_bots, BotsOptions, Pace};
use lockgrid_host::decimal::parse_fix;

use super::Failure;

/// Flags of `lockgrid bots`.
#[derive(Args, Debug)]
pub(crate) struct BotsArgs {
    /// How many clients (one UDP socket each).
    #[arg(long, value_name = "N", default_value_t = 10)]
    clients: usize,
    /// How long the clients walk, in seconds.
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    seconds: f64,
    /// The server's address; several, comma-separated, for the nodes of a cluster
    /// (clients are spread over them and move on when theirs stops answering).
    #[arg(
        long,
        value_name = "ADDR[,ADDR…]",
        default_value = "127.0.0.1:7777",
        value_delimiter = ','
    )]
    server: Vec<SocketAddr>,
    /// Seed of the random walks.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The server's max speed (units per second); bots walk at 80 % of it.
    #[arg(long, value_name = "UNITS", default_value = "200")]
    max_speed: String,
    /// The server's data folder: after the run, what every client received
    /// is checked against a re-run of its journal.
    #[arg(long, value_name = "DIR", default_value = "lockgrid-data")]
    data_dir: PathBuf,
    /// Skip the check against the data folder (for a server on another machine).
    #[arg(long)]
    no_verify: bool,
    /// The server's private key file: each client gets a connect token minted with it.
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// When each client moves: `ticks`, once for each tick it applies, in
    /// the datagram that acknowledges it (a lockstep client); `clock`,
    /// every tick interval by its own clock, apart from its
    /// acknowledgements.
    #[arg(long, value_enum, default_value_t = PaceArg::Ticks)]
    pace: PaceArg,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum PaceArg {
    Ticks,
    Clock,
}

pub(crate) fn run(args: BotsArgs) -> Result<(), Failure> {
    super::init_logging();
    let duration = Duration::try_from_secs_f64(args.seconds)
        .map_err(|_| Failure::new("--seconds must be a non-negative number"))?;
    let max_speed = parse_fix(&args.max_speed)
        .map_err(|e| Failure::new(format_args!("--max-speed {}: {e}", args.max_speed)))?;
    if max_speed <= 0 {
        return Err(Failure::new(format_args!(
            "--max-speed {}: must be positive",
            args.max_speed
        )));
    }
    let Some((&server, more_servers)) = args.server.split_first() else {
        return Err(Failure::new("--server needs an address"));
    };
    let opts = BotsOptions {
        server,
        more_servers: more_servers.to_vec(),
        clients: args.clients,
        duration,
        seed: args.seed,
        max_speed,
        data_dir: (!args.no_verify).then_some(args.data_dir),
        key: match &args.key {
            Some(path) => Some(lockgrid_host::token::read_key_file(path).map_err(Failure::new)?),
            None => None,
        },
        pace: match args.pace {
            PaceArg::Ticks => Pace::Ticks,
            PaceArg::Clock => Pace::Clock,
        },
        ..BotsOptions::default()
    };
    let bar = if io::stderr().is_terminal() {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}") {
            bar.set_style(style);
        }
        bar
    } else {
        ProgressBar::hidden()
    };
    let terminal = io::stderr().is_terminal();
    let mut next_line = Duration::ZERO;
    let report = run_bots(&opts, |p| {
        let line = format!(
            "{:>5.1} s {:<10} {}/{} connected, tick {}, {} events",
            p.elapsed.as_secs_f64(),
            p.phase,
            p.connected,
            opts.clients,
            p.tick,
            p.events
        );
        if !terminal && p.elapsed >= next_line {
            // Not a terminal: a plain line every five seconds.
            next_line = p.elapsed + Duration::from_secs(5);
            eprintln!("bots: {line}");
        }
        bar.set_message(line);
        bar.tick();
    });
    bar.finish_and_clear();
    let report = report.map_err(|e| Failure::new(format_args!("bots: {e}")))?;
    println!("{report}");
    if let Some(lost) = &report.server_lost {
        return Err(Failure::new(format_args!("{} ({})", lost, opts.server)));
    }
    if report.mismatches > 0 {
        return Err(Failure::new(format_args!(
            "{} view mismatches",
            report.mismatches
        )));
    }
    if report.connected < report.clients {
        return Err(Failure::new(format_args!(
            "only {} of {} clients connected",
            report.connected, report.clients
        )));
    }
    Ok(())
}
