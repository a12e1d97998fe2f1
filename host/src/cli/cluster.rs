//! `lockgrid serve --cluster URLS --world NAME`: the node as a member of a cluster.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lockgrid_host::cluster::export::{export as export_world, parse_address};
use lockgrid_host::cluster::{serve_cluster, ClusterOptions};
use lockgrid_host::metrics::{MetricsEndpoint, ServeMetrics};
use lockgrid_host::serve::ServeOptions;

use super::Failure;

/// How long a leader's lease lasts unrenewed: the failover gap's main part.
const LEASE_TIME: Duration = Duration::from_millis(1000);

pub(crate) fn serve(
    mut opts: ServeOptions,
    urls: &str,
    world: &str,
    metrics: Option<SocketAddr>,
) -> Result<(), Failure> {
    let urls: Vec<String> = urls
        .split(',')
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty())
        .collect();
    if urls.is_empty() {
        return Err(Failure::new("--cluster needs at least one nats:// URL"));
    }
    // The single node's metrics and the cluster's own.
    opts.metrics = ServeMetrics::for_cluster();
    let endpoint = match metrics {
        Some(addr) => Some(
            MetricsEndpoint::start(addr, opts.metrics.clone())
                .map_err(|e| Failure::new(format_args!("--metrics {addr}: {e}")))?,
        ),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    ctrlc::set_handler(move || flag.store(true, Ordering::Relaxed))
        .map_err(|e| Failure::new(format_args!("cannot install the stop-signal handler: {e}")))?;
    let cluster = ClusterOptions {
        urls,
        world: world.to_owned(),
        lease_time: LEASE_TIME,
    };
    let data_dir = opts.data_dir.clone();
    let summary = serve_cluster(opts, cluster, &stop, |addr| {
        println!(
            "lockgrid serve: listening on {addr}, world {world} on NATS, reports in {}",
            data_dir.display()
        );
        if let Some(endpoint) = &endpoint {
            println!(
                "lockgrid serve: metrics on http://{}/metrics",
                endpoint.addr()
            );
        }
        let _ = std::io::Write::flush(&mut std::io::stdout());
    })
    .map_err(|e| Failure::new(format_args!("serve --cluster (world {world}): {e}")))?;
    println!("lockgrid serve: {summary}");
    Ok(())
}

/// A cluster world exported to a data folder for `replay`: a temporary
/// one (removed when dropped) or the `--export` folder (kept).
pub(crate) struct Exported {
    dir: PathBuf,
    temporary: bool,
}

impl Exported {
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Exported {
    fn drop(&mut self) {
        if self.temporary {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// For `replay SOURCE`: `None` when SOURCE is a data folder; a
/// `nats://…/NAME` world is exported first, to `export` or a temporary folder.
pub(crate) fn replay_source(
    source: &Path,
    export: Option<&Path>,
) -> Result<Option<Exported>, Failure> {
    let text = source.to_string_lossy();
    if !text.starts_with("nats://") {
        if export.is_some() {
            return Err(Failure::new("--export needs a nats://HOST:PORT/NAME world"));
        }
        return Ok(None);
    }
    let (urls, world) = parse_address(&text).map_err(Failure::new)?;
    let exported = match export {
        Some(dir) => Exported {
            dir: dir.to_owned(),
            temporary: false,
        },
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            Exported {
                dir: std::env::temp_dir().join(format!(
                    "lockgrid-replay-{world}-{}-{nanos}",
                    std::process::id()
                )),
                temporary: true,
            }
        }
    };
    let done = export_world(&urls, &world, &exported.dir)
        .map_err(|e| Failure::new(format_args!("{text}: {e}")))?;
    if !exported.temporary {
        println!(
            "exported {} ticks and {} snapshots of world {world} into {}",
            done.ticks,
            done.snapshots,
            exported.dir.display()
        );
    }
    Ok(Some(exported))
}
