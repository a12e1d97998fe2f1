//! A world's stream written out as an ordinary data folder (journal and
//! snapshots), which every data-folder tool then reads:
//! `lockgrid replay nats://HOST:PORT/NAME …` exports to a temporary folder
//! first, `--export DIR` keeps it.

use std::path::Path;
use std::time::Duration;

use super::log::{connect, ClusterLog};
use super::record::decode_record;
use super::ClusterError;
use crate::journal::{Journal, SyncPolicy};
use crate::store::{decode_snapshot, journal_path, snapshot_dir, write_snapshot};

/// A `nats://HOST:PORT[,nats://…]/NAME` address, split into server URLs and world name.
pub fn parse_address(address: &str) -> Result<(Vec<String>, String), ClusterError> {
    let rest = address
        .strip_prefix("nats://")
        .ok_or_else(|| ClusterError::Options(format!("{address}: not a nats:// address")))?;
    let (servers, world) = rest
        .rsplit_once('/')
        .ok_or_else(|| ClusterError::Options(format!("{address}: no /WORLD at the end")))?;
    super::log::check_world_name(world)?;
    let urls: Vec<String> = servers
        .split(',')
        .map(|s| {
            let s = s.strip_prefix("nats://").unwrap_or(s);
            format!("nats://{s}")
        })
        .collect();
    Ok((urls, world.to_owned()))
}

/// What an export wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Exported {
    /// Ticks written to the journal.
    pub ticks: u64,
    /// Snapshots written.
    pub snapshots: u64,
}

/// Writes world `world`'s stream (from tick 1) and its snapshots into the
/// data folder `dir`, which must not hold a journal yet. A record that
/// does not decode, or is out of sequence, stops the export with its
/// stream sequence.
pub fn export(urls: &[String], world: &str, dir: &Path) -> Result<Exported, ClusterError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(ClusterError::Io)?;
    runtime.block_on(async {
        let client = connect(urls).await?;
        let log = ClusterLog::open(client, urls.len(), world, Duration::from_secs(1)).await?;
        export_log(&log, dir).await
    })
}

async fn export_log(log: &ClusterLog, dir: &Path) -> Result<Exported, ClusterError> {
    let last = log.last_tick().await?;
    let (config, created) = log
        .world_config(&lockgrid_kernel::Config::default())
        .await?;
    if created && last == 0 {
        return Err(ClusterError::Options(format!(
            "world {} has no ticks and no config",
            log.names.stream
        )));
    }
    std::fs::create_dir_all(dir).map_err(ClusterError::Io)?;
    let path = journal_path(dir);
    if path.exists() {
        return Err(ClusterError::Options(format!(
            "{} already holds a journal",
            dir.display()
        )));
    }
    let mut journal = Journal::create(&path, &config, SyncPolicy::Never)
        .map_err(|e| ClusterError::Options(format!("{}: {e}", path.display())))?;
    let mut out = Exported::default();
    if last > 0 {
        // Read straight from the stream's replicas (direct gets): no
        // consumer to place, which right after a NATS server died can take
        // several attempts of 2 s each.
        let mut expected = 1;
        let mut batch = std::collections::VecDeque::new();
        while expected <= last {
            if batch.is_empty() {
                batch.extend(log.read_direct(expected, last).await);
                if batch.is_empty() {
                    // Not answered at once (the NATS cluster may be
                    // re-electing): one record, retried for a while.
                    let (_, payload, _) = log.get(expected).await?;
                    batch.push_back((expected, payload, None));
                }
            }
            let Some((seq, payload, _)) = batch.pop_front() else {
                continue;
            };
            if seq != expected {
                return Err(ClusterError::OutOfSequence { seq, expected });
            }
            let record = decode_record(seq, &payload).map_err(|f| ClusterError::BadRecord {
                seq,
                fault: f.to_string(),
            })?;
            journal
                .append(record.tick, &record.commands, record.digest)
                .map_err(|e| ClusterError::Options(format!("{}: {e}", path.display())))?;
            expected += 1;
            out.ticks += 1;
        }
    }
    journal
        .close()
        .map_err(|e| ClusterError::Options(format!("{}: {e}", path.display())))?;
    for tick in log.snapshot_ticks().await.unwrap_or_default() {
        let bytes = match log.get_snapshot(tick).await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(tick, "snapshot not exported: {e}");
                continue;
            }
        };
        // Written only when it reads back: a damaged object is not copied
        // into a folder whose tools would then report it as the folder's.
        match decode_snapshot(&bytes) {
            Ok(s) => {
                write_snapshot(&snapshot_dir(dir), &s)
                    .map_err(|e| ClusterError::Options(format!("snapshot {tick}: {e}")))?;
                out.snapshots += 1;
            }
            Err(e) => tracing::warn!(tick, "snapshot not exported: {e}"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::parse_address;

    #[test]
    fn addresses() {
        let (urls, world) = parse_address("nats://127.0.0.1:4222/town").unwrap();
        assert_eq!(
            (urls, world.as_str()),
            (vec!["nats://127.0.0.1:4222".to_owned()], "town")
        );
        let (urls, _) = parse_address("nats://a:1,nats://b:2/w").unwrap();
        assert_eq!(urls, vec!["nats://a:1".to_owned(), "nats://b:2".to_owned()]);
        assert!(parse_address("nats://a:1/bad.name").is_err());
        assert!(parse_address("data").is_err());
    }
}
