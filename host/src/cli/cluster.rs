//! `lockgrid serve --cluster URLS --world NAME`: the node as a member of a cluster.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lockgrid_host::cluster::{serve_cluster, ClusterOptions};
use lockgrid_host::serve::ServeOptions;

use super::Failure;

/// How long a leader's lease lasts unrenewed: the failover gap's main part.
const LEASE_TIME: Duration = Duration::from_millis(1000);

pub(crate) fn serve(opts: ServeOptions, urls: &str, world: &str) -> Result<(), Failure> {
    let urls: Vec<String> = urls
        .split(',')
        .map(|u| u.trim().to_owned())
        .filter(|u| !u.is_empty())
        .collect();
    if urls.is_empty() {
        return Err(Failure::new("--cluster needs at least one nats:// URL"));
    }
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
        let _ = std::io::Write::flush(&mut std::io::stdout());
    })
    .map_err(|e| Failure::new(format_args!("serve --cluster (world {world}): {e}")))?;
    println!("lockgrid serve: {summary}");
    Ok(())
}
