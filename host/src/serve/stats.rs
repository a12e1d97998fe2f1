//! Tick timing and the stats file a server keeps in its data folder.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The stats file's name inside a data folder, rewritten about once a second.
pub const STATS_FILE: &str = "serve-stats.json";

/// The stats file of data folder `dir`.
pub fn stats_path(dir: &Path) -> PathBuf {
    dir.join(STATS_FILE)
}

/// Tick durations at 1 µs resolution up to 100 ms, and the largest seen.
#[derive(Clone, Debug)]
pub struct TickTimes {
    buckets: Vec<u64>,
    count: u64,
    max_us: u64,
}

const BUCKETS: usize = 100_000;

impl Default for TickTimes {
    fn default() -> Self {
        TickTimes {
            buckets: vec![0; BUCKETS + 1],
            count: 0,
            max_us: 0,
        }
    }
}

impl TickTimes {
    /// Records one tick's duration.
    pub fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let i = usize::try_from(us).unwrap_or(BUCKETS).min(BUCKETS);
        if let Some(b) = self.buckets.get_mut(i) {
            *b += 1;
        }
        self.count += 1;
        self.max_us = self.max_us.max(us);
    }

    /// Ticks recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The `q`-th quantile in µs (`q` in per mille, e.g. 500, 990), 0 when empty.
    /// Durations of 100 ms or more all count as 100 ms here; see [`max_us`](Self::max_us).
    pub fn quantile_us(&self, per_mille: u64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = (self.count * per_mille).div_ceil(1000).max(1);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                if i == BUCKETS {
                    return self.max_us;
                }
                return (i as u64).min(self.max_us);
            }
        }
        self.max_us
    }

    /// The longest tick, µs.
    pub fn max_us(&self) -> u64 {
        self.max_us
    }
}

/// What `lockgrid serve` writes to [`STATS_FILE`] (JSON), and prints at the end.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServeStats {
    /// The process is still running (false in the file written at exit).
    pub running: bool,
    /// The world's tick.
    pub tick: u64,
    /// Ticks this process ran.
    pub ticks_run: u64,
    /// Median tick duration (step, journal, sync, hand-off and send), µs.
    pub tick_p50_us: u64,
    /// 99th percentile tick duration, µs.
    pub tick_p99_us: u64,
    /// Longest tick, µs.
    pub tick_max_us: u64,
    /// Ticks that took longer than the tick interval.
    pub overruns: u64,
    /// Ticks that started more than one interval after their slot.
    pub late_ticks: u64,
    /// Packet records, part blocks and pending ticks allocated because
    /// the server's pools were empty: rises only with new high-water marks
    /// of data in flight (a burst, or clients far behind).
    #[serde(default)]
    pub pool_grown: u64,
    /// Clients currently connected.
    pub clients: u64,
    /// Connections accepted since start.
    pub connections: u64,
    /// Kernel events produced since start.
    pub events: u64,
    /// Datagrams received / sent, bytes received / sent.
    pub packets_in: u64,
    /// Datagrams sent.
    pub packets_out: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Refused client input, per reason.
    pub refused: BTreeMap<String, u64>,
    /// Snapshots written.
    #[serde(default)]
    pub snapshots_written: u64,
    /// Snapshots that could not be written (serving went on).
    #[serde(default)]
    pub snapshot_failures: u64,
    /// Why the last snapshot attempt failed, if it did.
    #[serde(default)]
    pub snapshot_error: Option<String>,
    /// Datagrams the system dropped at the server's socket before the
    /// server read them (its receive buffer was full; see the README's
    /// "Socket buffers"), since the socket was made; absent where the
    /// system does not tell.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket_drops: Option<u64>,
    /// The per-client bandwidth budget over the clients connected now
    /// (`--budget`); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::node::BudgetSummary>,
}

impl ServeStats {
    /// Writes the stats file atomically (temp file, rename); not fsynced: it is advisory.
    pub fn write(&self, dir: &Path) -> io::Result<()> {
        StatsFile::new(dir).write(self)
    }

    /// Reads a data folder's stats file.
    pub fn read(dir: &Path) -> io::Result<ServeStats> {
        let text = std::fs::read(stats_path(dir))?;
        serde_json::from_slice(&text).map_err(io::Error::other)
    }
}

/// A data folder's stats file, rewritten in place with reused buffers: a
/// write after the first allocates nothing (unless a text in the stats
/// grew), so the serve loop can rewrite it every second without
/// allocating.
#[derive(Debug)]
pub struct StatsFile {
    path: PathBuf,
    tmp: PathBuf,
    text: Vec<u8>,
}

impl StatsFile {
    /// The stats file of data folder `dir`.
    pub fn new(dir: &Path) -> StatsFile {
        StatsFile {
            path: stats_path(dir),
            tmp: dir.join(format!("{STATS_FILE}.tmp")),
            text: Vec::new(),
        }
    }

    /// Writes `stats` atomically (temp file, rename); not fsynced: it is advisory.
    pub fn write(&mut self, stats: &ServeStats) -> io::Result<()> {
        self.text.clear();
        serde_json::to_writer_pretty(&mut self.text, stats).map_err(io::Error::other)?;
        std::fs::write(&self.tmp, &self.text)?;
        std::fs::rename(&self.tmp, &self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        let mut t = TickTimes::default();
        assert_eq!(t.quantile_us(500), 0);
        for us in 1..=100 {
            t.record(Duration::from_micros(us));
        }
        t.record(Duration::from_secs(2));
        assert_eq!(t.quantile_us(500), 51);
        assert_eq!(t.quantile_us(990), 100);
        assert_eq!(t.quantile_us(1000), 2_000_000);
        assert_eq!(t.max_us(), 2_000_000);
    }
}
