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
use lockgrid_host::scenario::{Scenario, ScenarioError};
use lockgrid_host::serve::{serve_with, ServeOptions};
use lockgrid_kernel::{Config, Fix};
use serde::Deserialize;
use toml::de::DeValue;

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
    /// Clients spawn in a square this many cells across around the
    /// world's centre, clamped to the world; the world's width spreads
    /// them over it [default: 8].
    #[arg(long, value_name = "CELLS", value_parser = clap::value_parser!(u32).range(1..))]
    spawn_area: Option<u32>,
    /// Write a state snapshot every this many ticks, 0 for never [default: 600].
    #[arg(long, value_name = "TICKS")]
    snapshot_every: Option<u64>,
    /// Threads that step the world, the serving one included: the busy
    /// radius-mode tick's search for pairs splits over them [default: 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=8))]
    threads: Option<u32>,
    /// Disconnect a client silent for this many seconds, despawning its entity [default: 10].
    #[arg(long, value_name = "S")]
    client_timeout: Option<f64>,
    /// Serve Prometheus metrics over HTTP at http://ADDR/metrics (e.g. 127.0.0.1:9100).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<SocketAddr>,
    /// Bytes per second each client may be sent (e.g. 32KiB): Enters and
    /// Leaves always go, Updates fill what is left, nearest and stalest
    /// first [default: no limit].
    #[arg(long, value_name = "SIZE", value_parser = parse_budget)]
    budget: Option<u32>,
    /// Refuse a world that would reserve more memory than this (e.g. 4GiB) [default: half of the machine's].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_memory: Option<u64>,
    /// Stop after this many ticks.
    #[arg(long, value_name = "N")]
    ticks: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long, value_name = "S")]
    seconds: Option<f64>,
    /// With no journal in the data folder but snapshots left there: delete them and start a new world.
    #[arg(long)]
    discard_snapshots: bool,
    /// Private key file (64 hex digits) shared with the token minter: only
    /// clients with a connect token connect, and packets are sealed.
    #[arg(long, value_name = "FILE")]
    key: Option<PathBuf>,
    /// Join a cluster: NATS server URLs, comma-separated (nats://127.0.0.1:4222,nats://…); see docs/cluster.md.
    #[arg(long, value_name = "URLS", requires = "world")]
    cluster: Option<String>,
    /// With --cluster: the world's name (its stream and buckets on NATS).
    #[arg(long, value_name = "NAME", requires = "cluster")]
    world: Option<String>,
    /// TOML file with a `[world]` table (the scenario `config` keys) and a
    /// `[server]` table (these flags' names with underscores).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Largest `--config` file read, in bytes: a real config is a few hundred
/// bytes, and the limit keeps a wrong path (a journal, a device) from
/// being read whole into memory.
pub(crate) const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The shape of a config file, for its checks of keys and types. Numbers of
/// `[world]` and `[server] max_speed` are read again from their source text
/// by [`ConfigFile::read`], so they never pass through `f64`.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct FileDe {
    #[serde(default)]
    server: ServerDe,
    #[allow(dead_code)] // read from the source text instead, see `world_config`
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
    #[allow(dead_code)] // read from the source text instead, see `speed_text`
    max_speed: Option<toml::Value>,
    spawn_area: Option<u32>,
    snapshot_every: Option<u64>,
    threads: Option<u32>,
    client_timeout: Option<f64>,
    metrics: Option<SocketAddr>,
    budget: Option<BudgetDe>,
}

/// `[server] budget`: bytes per second as a number, or a size with a unit.
#[derive(Deserialize)]
#[serde(untagged)]
enum BudgetDe {
    Bytes(u64),
    Text(String),
}

/// A per-client budget: a size (`32KiB`, `8000`) per second, 1 byte to 4 GiB − 1.
fn parse_budget(text: &str) -> Result<u32, String> {
    let n = parse_size(text)?;
    match u32::try_from(n) {
        Ok(0) => Err("a budget must be positive".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "{n} bytes per second is over the largest budget, 4GiB"
        )),
    }
}

/// A config file, read: its `[server]` values, its world (when it has a
/// `[world]` table) and its `[server] max_speed` as exact decimal text.
struct ConfigFile {
    server: ServerDe,
    world: Option<Config>,
    max_speed: Option<String>,
}

impl ConfigFile {
    fn read(path: &Path) -> Result<ConfigFile, Failure> {
        let text = read_config_text(path)?;
        let fail =
            |e: &dyn std::fmt::Display| Failure::new(format_args!("{}: {e}", path.display()));
        let file: FileDe = toml::from_str(&text).map_err(|e| fail(&e))?;
        if let Some(s) = file.server.client_timeout {
            // A duration: f64 is exact enough, but NaN and the like are not durations.
            if !(s.is_finite() && s > 0.0) {
                return Err(fail(&format_args!(
                    "[server] client_timeout: {s} is not a positive number of seconds"
                )));
            }
        }
        // The same text parsed again, keeping every value's source text.
        let doc = toml::de::DeTable::parse(&text).map_err(|e| fail(&e))?;
        let doc = doc.get_ref();
        let world = match doc.get("world") {
            Some(world) => Some(world_config(world.get_ref(), path)?),
            None => None,
        };
        let max_speed = match doc.get("server").and_then(|s| s.get_ref().get("max_speed")) {
            Some(v) => Some(
                speed_text(v.get_ref())
                    .map_err(|e| fail(&format_args!("[server] max_speed: {e}")))?,
            ),
            None => None,
        };
        Ok(ConfigFile {
            server: file.server,
            world,
            max_speed,
        })
    }
}

/// Reads at most [`MAX_CONFIG_BYTES`] of a config file as UTF-8.
fn read_config_text(path: &Path) -> Result<String, Failure> {
    use std::io::Read;
    let cannot =
        |e: std::io::Error| Failure::new(format_args!("cannot read {}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(cannot)?;
    let too_large = || {
        Failure::new(format_args!(
            "{}: a config file may hold at most {MAX_CONFIG_BYTES} bytes",
            path.display()
        ))
    };
    if file.metadata().is_ok_and(|m| m.len() > MAX_CONFIG_BYTES) {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Err(too_large());
    }
    String::from_utf8(bytes)
        .map_err(|_| Failure::new(format_args!("{}: not UTF-8 text", path.display())))
}

/// Reads the `[world]` table with the scenario parser, so the keys, defaults
/// and exact decimals are the scenario format's. Each number goes to the
/// scenario parser as its own TOML source text (underscores and a leading
/// `+` dropped, other bases written out in decimal), never through `f64`.
fn world_config(world: &DeValue<'_>, path: &Path) -> Result<Config, Failure> {
    let fail =
        |e: &dyn std::fmt::Display| Failure::new(format_args!("{} [world]: {e}", path.display()));
    if !world.is_table() {
        return Err(fail(&format_args!(
            "expected a table, found {}",
            world.type_str()
        )));
    }
    let config = json_of(world, "").map_err(|e| fail(&e))?;
    let json = serde_json::json!({ "config": config, "ticks": [] });
    Scenario::from_json_str(&json.to_string())
        .map(|s| s.config)
        .map_err(|e| match e {
            ScenarioError::Json {
                path: key, message, ..
            } => {
                let key = key.strip_prefix("config.").unwrap_or(&key);
                fail(&format_args!("{key}: {message}"))
            }
            e => fail(&e),
        })
}

/// A TOML value as JSON, numbers kept as their exact decimal text. `key`
/// names the value in errors (empty for the `[world]` table itself).
fn json_of(value: &DeValue<'_>, key: &str) -> Result<serde_json::Value, String> {
    use serde_json::Value as Json;
    Ok(match value {
        DeValue::Integer(_) | DeValue::Float(_) => {
            let text = number_text(value).map_err(|e| format!("{key}: {e}"))?;
            // With `arbitrary_precision`, a Number keeps its text as written.
            Json::Number(
                serde_json::from_str(&text)
                    .map_err(|_| format!("{key}: {text} is not a decimal number"))?,
            )
        }
        DeValue::String(s) => Json::String(s.to_string()),
        DeValue::Boolean(b) => Json::Bool(*b),
        DeValue::Datetime(d) => {
            return Err(format!("{key}: expected a number, found the date {d}"))
        }
        DeValue::Array(items) => Json::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, v)| json_of(v.get_ref(), &format!("{key}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        DeValue::Table(table) => Json::Object(
            table
                .iter()
                .map(|(k, v)| {
                    let name = if key.is_empty() {
                        k.get_ref().to_string()
                    } else {
                        format!("{key}.{}", k.get_ref())
                    };
                    Ok((k.get_ref().to_string(), json_of(v.get_ref(), &name)?))
                })
                .collect::<Result<_, String>>()?,
        ),
    })
}

/// The exact decimal text of a TOML number; NaN and infinities are errors.
fn number_text(value: &DeValue<'_>) -> Result<String, String> {
    match value {
        DeValue::Integer(i) if i.radix() == 10 => Ok(i.as_str().trim_start_matches('+').to_owned()),
        DeValue::Integer(i) => i128::from_str_radix(i.as_str(), i.radix())
            .map(|v| v.to_string())
            .map_err(|_| format!("{} is out of range", i.as_str())),
        DeValue::Float(f) => {
            let text = f.as_str().trim_start_matches('+');
            if text.contains("inf") || text.contains("nan") {
                Err(format!("{text} is not a finite number"))
            } else {
                Ok(text.to_owned())
            }
        }
        other => Err(format!("expected a number, found {}", other.type_str())),
    }
}

/// `[server] max_speed` as exact decimal text; only a number is accepted.
fn speed_text(v: &DeValue<'_>) -> Result<String, String> {
    number_text(v)
}

fn options(args: ServeArgs) -> Result<(ServeOptions, Option<SocketAddr>), Failure> {
    let mut opts = ServeOptions::default();
    let file = match &args.config {
        Some(path) => ConfigFile::read(path)?,
        None => ConfigFile {
            server: ServerDe::default(),
            world: None,
            max_speed: None,
        },
    };
    if let Some(world) = file.world {
        opts.world = world;
    }
    let speed = match (&args.max_speed, &file.max_speed) {
        (Some(s), _) => Some(("--max-speed", s.as_str())),
        (None, Some(s)) => Some(("[server] max_speed", s.as_str())),
        (None, None) => None,
    };
    if let Some((name, s)) = speed {
        opts.max_speed = parse_fix(s).map_err(|e| Failure::new(format_args!("{name} {s}: {e}")))?;
        if opts.max_speed <= Fix::ZERO {
            return Err(Failure::new(format_args!("{name} {s}: must be positive")));
        }
    }
    let file = file.server;
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
    if let Some(v) = args.spawn_area.or(file.spawn_area) {
        if v == 0 {
            return Err(Failure::new("[server] spawn_area 0: at least 1 cell"));
        }
        opts.spawn_area = v;
    }
    if let Some(v) = args.snapshot_every.or(file.snapshot_every) {
        opts.snapshot_every = v;
    }
    if let Some(v) = args.threads.or(file.threads) {
        if !(1..=8).contains(&v) {
            return Err(Failure::new(format_args!(
                "[server] threads {v}: from 1 to 8"
            )));
        }
        opts.threads = v as usize;
    }
    if let Some(s) = args.client_timeout.or(file.client_timeout) {
        opts.client_timeout = Duration::try_from_secs_f64(s)
            .map_err(|_| Failure::new("--client-timeout must be a non-negative number"))?;
    }
    opts.discard_snapshots = args.discard_snapshots;
    if let Some(path) = &args.key {
        opts.key = Some(lockgrid_host::token::read_key_file(path).map_err(Failure::new)?);
    }
    let budget = match (args.budget, file.budget) {
        (Some(b), _) => Some(b),
        (None, Some(BudgetDe::Text(t))) => Some(
            parse_budget(&t).map_err(|e| Failure::new(format_args!("[server] budget {t}: {e}")))?,
        ),
        (None, Some(BudgetDe::Bytes(n))) => Some(
            parse_budget(&n.to_string())
                .map_err(|e| Failure::new(format_args!("[server] budget {n}: {e}")))?,
        ),
        (None, None) => None,
    };
    opts.budget = budget;
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
    let cluster = args.cluster.clone().zip(args.world.clone());
    let (opts, metrics_addr) = options(args)?;
    if let Some((urls, world)) = cluster {
        return super::cluster::serve(opts, &urls, &world, metrics_addr);
    }
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
