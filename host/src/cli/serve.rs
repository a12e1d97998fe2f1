//! `lockgrid serve [--addr A] [--tick-rate HZ] [--data-dir DIR] [--config FILE.toml] …`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use lockgrid_host::decimal::parse_fix;
use lockgrid_host::memory_limit::parse_size;
use lockgrid_host::metrics::MetricsEndpoint;
use lockgrid_host::scenario::Scenario;
use lockgrid_host::serve::{serve_with, ServeOptions};
use lockgrid_kernel::Config;
use serde::Deserialize;

use super::Failure;

/// Flags of `lockgrid serve`; each overrides the config file's `[server]` value.
#[derive(Args, Debug, Default)]
pub(crate) struct ServeArgs {
    /// UDP address to listen on [default: 127.0.0.1:7777].
    #[arg(long)]
    addr: Option<SocketAddr>,
    /// Ticks per second [default: 20].
    #[arg(long, value_name = "HZ")]
    tick_rate: Option<u32>,
    /// Data folder: journal, snapshots and stats; recovered if it exists [default: ./lockgrid-data].
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Most connected clients [default: 1024].
    #[arg(long, value_name = "N")]
    max_clients: Option<usize>,
    /// Wandering NPCs driven by a seeded script [default: 0].
    #[arg(long, value_name = "N")]
    npcs: Option<u32>,
    /// Seed of the NPC script [default: 0].
    #[arg(long)]
    seed: Option<u64>,
    /// Fastest an entity may move, world units per second [default: 200].
    #[arg(long, value_name = "UNITS")]
    max_speed: Option<String>,
    /// Write a state snapshot every this many ticks, 0 for never [default: 600].
    #[arg(long, value_name = "TICKS")]
    snapshot_every: Option<u64>,
    /// Disconnect a client silent for this many seconds, despawning its entity [default: 10].
    #[arg(long, value_name = "S")]
    client_timeout: Option<f64>,
    /// Serve Prometheus metrics over HTTP at http://ADDR/metrics (e.g. 127.0.0.1:9100).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// Refuse a world that would reserve more memory than this (e.g. 4GiB) [default: half of the machine's].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_memory: Option<u64>,
    /// Stop after this many ticks.
    #[arg(long, value_name = "N")]
    ticks: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "S")]
    seconds: Option<f64>,
    /// TOML file with a `[world]` table (the scenario `config` keys) and a
    /// `[server]` table (these flags' names with underscores).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileDe {
    #[serde(default)]
    server: ServerDe,
    world: Option<toml::Table>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ServerDe {
    addr: Option<SocketAddr>,
    tick_rate: Option<u32>,
    data_dir: Option<PathBuf>,
    max_clients: Option<usize>,
    npcs: Option<u32>,
    seed: Option<u64>,
    max_speed: Option<toml::Value>,
    snapshot_every: Option<u64>,
    client_timeout: Option<f64>,
    metrics: Option<SocketAddr>,
}

/// Reads the `[world]` table with the scenario parser, so the keys, defaults
/// and exact decimals are the scenario format's.
fn world_config(table: toml::Table, path: &Path) -> Result<Config, Failure> {
    let json = serde_json::json!({ "config": table, "ticks": [] });
    Scenario::from_json_str(&json.to_string())
        .map(|s| s.config)
        .map_err(|e| Failure::new(format_args!("{} [world]: {e}", path.display())))
}

fn speed_text(v: &toml::Value) -> Option<String> {
    match v {
        toml::Value::Integer(i) => Some(i.to_string()),
        toml::Value::Float(f) => Some(f.to_string()),
        toml::Value::String(s) => Some(s.clone()),
        _ => None,
    }
}

fn options(args: ServeArgs) -> Result<(ServeOptions, Option<SocketAddr>), Failure> {
    let mut opts = ServeOptions::default();
    let file = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Failure::new(format_args!("cannot read {}: {e}", path.display())))?;
            let file: FileDe = toml::from_str(&text)
                .map_err(|e| Failure::new(format_args!("{}: {e}", path.display())))?;
            if let Some(world) = file.world.clone() {
                opts.world = world_config(world, path)?;
            }
            file.server
        }
        None => FileDe::default().server,
    };
    let speed = match (&args.max_speed, &file.max_speed) {
        (Some(s), _) => Some(s.clone()),
        (None, Some(v)) => {
            Some(speed_text(v).ok_or_else(|| Failure::new("[server] max_speed must be a number"))?)
        }
        (None, None) => None,
    };
    if let Some(s) = speed {
        opts.max_speed =
            parse_fix(&s).map_err(|e| Failure::new(format_args!("--max-speed {s}: {e}")))?;
    }
    if let Some(v) = args.addr.or(file.addr) {
        opts.addr = v;
    }
    if let Some(v) = args.tick_rate.or(file.tick_rate) {
        opts.tick_rate = v;
    }
    if let Some(v) = args.data_dir.or(file.data_dir) {
        opts.data_dir = v;
    }
    if let Some(v) = args.max_clients.or(file.max_clients) {
        opts.max_clients = v;
    }
    if let Some(v) = args.npcs.or(file.npcs) {
        opts.npcs = v;
    }
    if let Some(v) = args.seed.or(file.seed) {
        opts.seed = v;
    }
    if let Some(v) = args.snapshot_every.or(file.snapshot_every) {
        opts.snapshot_every = v;
    }
    if let Some(s) = args.client_timeout.or(file.client_timeout) {
        opts.client_timeout = Duration::try_from_secs_f64(s)
            .map_err(|_| Failure::new("--client-timeout must be a non-negative number"))?;
    }
    let metrics = args.metrics.or(file.metrics);
    opts.max_memory = args.max_memory;
    opts.stop_after_ticks = args.ticks;
    if let Some(s) = args.seconds {
        opts.stop_after = Some(
            Duration::try_from_secs_f64(s)
                .map_err(|_| Failure::new("--seconds must be a non-negative number"))?,
        );
    }
    Ok((opts, metrics))
}

pub(crate) fn run(args: ServeArgs) -> Result<(), Failure> {
    super::init_logging();
    let (opts, metrics_addr) = options(args)?;
    let endpoint = match metrics_addr {
        Some(addr) => Some(
            MetricsEndpoint::start(addr, opts.metrics.clone())
                .map_err(|e| Failure::new(format_args!("--metrics {addr}: {e}")))?,
        ),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    // Ctrl-C, SIGTERM and SIGHUP all finish the tick and close the journal.
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .map_err(|e| Failure::new(format_args!("cannot install the stop-signal handler: {e}")))?;
    let data_dir = opts.data_dir.clone();
    let shown = data_dir.clone();
    let summary = serve_with(opts, &stop, |addr| {
        // One line on stdout, so scripts and tests learn the port of `--addr 127.0.0.1:0`.
        println!(
            "lockgrid serve: listening on {addr}, data in {}",
            shown.display()
        );
        if let Some(endpoint) = &endpoint {
            println!(
                "lockgrid serve: metrics on http://{}/metrics",
                endpoint.addr()
            );
        }
        let _ = std::io::Write::flush(&mut std::io::stdout());
    })
    .map_err(|e| Failure::new(format_args!("serve ({}): {e}", data_dir.display())))?;
    println!("lockgrid serve: {summary}");
    Ok(())
}
