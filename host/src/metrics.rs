//! Prometheus metrics of `lockgrid serve`, served over HTTP with `--metrics ADDR`.
//!
//! [`ServeMetrics`] holds the registry (the `prometheus-client` crate's
//! atomics, so the HTTP thread reads them while the server thread writes);
//! the serve driver feeds it after every tick from the node's counters
//! ([`NodeStats`]) and its own tick timing, and [`TimedStorage`] times the
//! journal's appends and syncs. [`MetricsEndpoint`] answers
//! `GET /metrics` on its own thread with the OpenMetrics text format,
//! which Prometheus scrapes as it is.
//!
//! | metric | type | what |
//! | --- | --- | --- |
//! | `lockgrid_tick_duration_seconds` | histogram | a tick's work: step, journal, send |
//! | `lockgrid_ticks_total` | counter | ticks run by this process |
//! | `lockgrid_tick` | gauge | the world's tick |
//! | `lockgrid_tick_overruns_total` | counter | ticks whose work took longer than the interval |
//! | `lockgrid_late_ticks_total` | counter | ticks that started more than an interval late |
//! | `lockgrid_pool_grown_total` | counter | packet records, part blocks and pending ticks the server allocated because its pools were empty (new high-water marks of data in flight) |
//! | `lockgrid_clients` | gauge | clients connected now |
//! | `lockgrid_connections_total` | counter | connections accepted |
//! | `lockgrid_entities` | gauge | live entities |
//! | `lockgrid_events_total{kind}` | counter | kernel events: `rejected`, `leave`, `enter`, `update` |
//! | `lockgrid_tick_events{kind}` | histogram | events of one tick, per kind |
//! | `lockgrid_bytes_in_total`, `lockgrid_bytes_out_total` | counter | UDP payload bytes |
//! | `lockgrid_packets_in_total`, `lockgrid_packets_out_total` | counter | datagrams |
//! | `lockgrid_refusals_total{reason}` | counter | refused input, per [`Refusal`] reason |
//! | `lockgrid_journal_append_seconds` | histogram | one tick's journal append |
//! | `lockgrid_journal_sync_seconds` | histogram | one tick's journal sync (fsync under the default policy) |
//! | `lockgrid_snapshots_written_total` | counter | state snapshots written |
//! | `lockgrid_snapshot_failures_total` | counter | snapshots that could not be written |
//! | `lockgrid_socket_drops_total` | counter | datagrams the system dropped at the server's socket, its receive buffer full (`lockgrid serve` and cluster nodes, on Linux; read once a second) |
//!
//! A node of a cluster (`serve --cluster … --metrics ADDR`) serves the same
//! metrics — a tick being one it appended or applied from the stream, the
//! tick's work its step, its append to the stream when leading (timed as
//! `lockgrid_journal_append_seconds`; there is no separate sync) and its
//! release, snapshots those stored in the object store — and these:
//!
//! | metric | type | what |
//! | --- | --- | --- |
//! | `lockgrid_cluster_leading` | gauge | 1 while this node holds the lease and appends, else 0 |
//! | `lockgrid_cluster_appended_tick` | gauge | the last tick this node appended (0: none yet) |
//! | `lockgrid_cluster_applied_tick` | gauge | the last tick applied, appended here or read from the stream |
//! | `lockgrid_cluster_ticks_appended_total` | counter | ticks this node appended as leader |
//! | `lockgrid_cluster_ticks_followed_total` | counter | ticks applied from the stream, appended by another node |
//! | `lockgrid_cluster_leads_total` | counter | times this node took the lease |
//! | `lockgrid_cluster_lost_appends_total` | counter | appends refused or failed (the world was rebuilt each time) |
//! | `lockgrid_cluster_batches_forwarded_total` | counter | batches of this node's client commands sent to the leader over NATS, resends included |
//! | `lockgrid_cluster_commands_forwarded_total` | counter | client commands in those batches, each counted once |
//! | `lockgrid_cluster_batches_taken_total` | counter | other nodes' batches this node took into its ticks as leader |
//!
//! Every label value exists from the start, at zero, so a dashboard sees a
//! refusal reason before the first refusal.

mod endpoint;
mod timed_storage;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use crate::node::{NodeStats, Refusal};
pub use endpoint::MetricsEndpoint;
pub use timed_storage::TimedStorage;

/// The event kinds, in the order of [`NodeStats::events_by_kind`].
const EVENT_KINDS: [&str; 4] = ["rejected", "leave", "enter", "update"];

type Labeled<M> = Family<[(&'static str, &'static str); 1], M>;
type LabeledHistograms = Family<[(&'static str, &'static str); 1], Histogram, fn() -> Histogram>;

/// Durations from 10 µs to about 10 s, doubling.
fn seconds() -> Histogram {
    Histogram::new(exponential_buckets(10e-6, 2.0, 21))
}

/// Counts from 1 to about a million, quadrupling.
fn counts() -> Histogram {
    Histogram::new(exponential_buckets(1.0, 4.0, 11))
}

/// The metrics of one server; clones share them.
#[derive(Clone)]
pub struct ServeMetrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    tick_duration: Histogram,
    ticks: Counter,
    tick: Gauge,
    overruns: Counter,
    late_ticks: Counter,
    pool_grown: Counter,
    clients: Gauge,
    connections: Counter,
    entities: Gauge,
    events: Labeled<Counter>,
    tick_events: LabeledHistograms,
    bytes_in: Counter,
    bytes_out: Counter,
    packets_in: Counter,
    packets_out: Counter,
    refusals: Labeled<Counter>,
    journal_append: Histogram,
    journal_sync: Histogram,
    snapshots_written: Counter,
    snapshot_failures: Counter,
    socket_drops: Counter,
    cluster: Option<ClusterGauges>,
}

/// The metrics only a cluster node has.
struct ClusterGauges {
    leading: Gauge,
    appended_tick: Gauge,
    applied_tick: Gauge,
    appended: Counter,
    followed: Counter,
    leads: Counter,
    lost_appends: Counter,
    batches_forwarded: Counter,
    commands_forwarded: Counter,
    batches_taken: Counter,
}

/// What a cluster node tells its metrics after a tick (see
/// [`ServeMetrics::record_cluster`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct ClusterFigures {
    /// Whether it holds the lease and appends.
    pub leading: bool,
    /// The last tick it appended.
    pub appended_tick: u64,
    /// The last tick it applied.
    pub applied_tick: u64,
    /// Ticks appended, in all.
    pub appended: u64,
    /// Ticks followed, in all.
    pub followed: u64,
    /// Times it took the lease.
    pub leads: u64,
    /// Appends lost.
    pub lost_appends: u64,
    /// Batches sent to the leader, resends included.
    pub batches_forwarded: u64,
    /// Commands in the batches sent, each once.
    pub commands_forwarded: u64,
    /// Other nodes' batches taken into its ticks.
    pub batches_taken: u64,
}

impl fmt::Debug for ServeMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeMetrics")
            .field("ticks", &self.inner.ticks.get())
            .finish_non_exhaustive()
    }
}

impl Default for ServeMetrics {
    fn default() -> Self {
        ServeMetrics::new()
    }
}

impl ServeMetrics {
    /// A registry with every metric at zero.
    pub fn new() -> ServeMetrics {
        ServeMetrics::build(false)
    }

    /// A registry with every metric at zero, a cluster node's included.
    pub fn for_cluster() -> ServeMetrics {
        ServeMetrics::build(true)
    }

    fn build(cluster: bool) -> ServeMetrics {
        let mut inner = Inner {
            registry: Registry::with_prefix("lockgrid"),
            tick_duration: seconds(),
            ticks: Counter::default(),
            tick: Gauge::default(),
            overruns: Counter::default(),
            late_ticks: Counter::default(),
            pool_grown: Counter::default(),
            clients: Gauge::default(),
            connections: Counter::default(),
            entities: Gauge::default(),
            events: Labeled::default(),
            tick_events: LabeledHistograms::new_with_constructor(counts),
            bytes_in: Counter::default(),
            bytes_out: Counter::default(),
            packets_in: Counter::default(),
            packets_out: Counter::default(),
            refusals: Labeled::default(),
            journal_append: seconds(),
            journal_sync: seconds(),
            snapshots_written: Counter::default(),
            snapshot_failures: Counter::default(),
            socket_drops: Counter::default(),
            cluster: cluster.then(|| ClusterGauges {
                leading: Gauge::default(),
                appended_tick: Gauge::default(),
                applied_tick: Gauge::default(),
                appended: Counter::default(),
                followed: Counter::default(),
                leads: Counter::default(),
                lost_appends: Counter::default(),
                batches_forwarded: Counter::default(),
                commands_forwarded: Counter::default(),
                batches_taken: Counter::default(),
            }),
        };
        // Create every label value now, at zero.
        for kind in EVENT_KINDS {
            let _ = inner.events.get_or_create(&[("kind", kind)]);
            let _ = inner.tick_events.get_or_create(&[("kind", kind)]);
        }
        for reason in Refusal::ALL {
            let _ = inner.refusals.get_or_create(&[("reason", reason.as_str())]);
        }
        let r = &mut inner.registry;
        let help = "A tick's work: step, journal and send.";
        r.register("tick_duration_seconds", help, inner.tick_duration.clone());
        r.register("ticks", "Ticks run by this process.", inner.ticks.clone());
        r.register("tick", "The world's tick.", inner.tick.clone());
        let help = "Ticks whose work took longer than the tick interval.";
        r.register("tick_overruns", help, inner.overruns.clone());
        let help = "Ticks that started more than one interval after their slot.";
        r.register("late_ticks", help, inner.late_ticks.clone());
        let help = "Packet records, part blocks and pending ticks allocated because the server's pools were empty.";
        r.register("pool_grown", help, inner.pool_grown.clone());
        r.register("clients", "Clients connected now.", inner.clients.clone());
        let help = "Connections accepted.";
        r.register("connections", help, inner.connections.clone());
        r.register("entities", "Live entities.", inner.entities.clone());
        r.register("events", "Kernel events, per kind.", inner.events.clone());
        let help = "Kernel events of one tick, per kind.";
        r.register("tick_events", help, inner.tick_events.clone());
        let help = "UDP payload bytes received.";
        r.register("bytes_in", help, inner.bytes_in.clone());
        r.register(
            "bytes_out",
            "UDP payload bytes sent.",
            inner.bytes_out.clone(),
        );
        r.register(
            "packets_in",
            "Datagrams received.",
            inner.packets_in.clone(),
        );
        r.register("packets_out", "Datagrams sent.", inner.packets_out.clone());
        let help = "Refused client input and datagrams, per reason.";
        r.register("refusals", help, inner.refusals.clone());
        let help = "One tick's journal append.";
        r.register("journal_append_seconds", help, inner.journal_append.clone());
        let help = "One tick's journal sync.";
        r.register("journal_sync_seconds", help, inner.journal_sync.clone());
        let help = "State snapshots written.";
        r.register("snapshots_written", help, inner.snapshots_written.clone());
        let help = "State snapshots that could not be written.";
        r.register("snapshot_failures", help, inner.snapshot_failures.clone());
        let help =
            "Datagrams the system dropped at the server's socket (its receive buffer was full).";
        r.register("socket_drops", help, inner.socket_drops.clone());
        if let Some(c) = &inner.cluster {
            let help = "1 while this node holds the lease and appends, else 0.";
            r.register("cluster_leading", help, c.leading.clone());
            let help = "The last tick this node appended to the stream.";
            r.register("cluster_appended_tick", help, c.appended_tick.clone());
            let help = "The last tick this node applied.";
            r.register("cluster_applied_tick", help, c.applied_tick.clone());
            let help = "Ticks this node appended as leader.";
            r.register("cluster_ticks_appended", help, c.appended.clone());
            let help = "Ticks applied from the stream, appended by another node.";
            r.register("cluster_ticks_followed", help, c.followed.clone());
            let help = "Times this node took the lease.";
            r.register("cluster_leads", help, c.leads.clone());
            let help = "Appends refused or failed.";
            r.register("cluster_lost_appends", help, c.lost_appends.clone());
            let help = "Batches of client commands sent to the leader, resends included.";
            r.register(
                "cluster_batches_forwarded",
                help,
                c.batches_forwarded.clone(),
            );
            let help = "Client commands in the batches sent to the leader.";
            r.register(
                "cluster_commands_forwarded",
                help,
                c.commands_forwarded.clone(),
            );
            let help = "Other nodes' batches taken into this node's ticks.";
            r.register("cluster_batches_taken", help, c.batches_taken.clone());
        }
        ServeMetrics {
            inner: Arc::new(inner),
        }
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut text, &self.inner.registry);
        text
    }

    /// Records a tick: its work time, whether it overran, and the node's
    /// counters after it (`before`: the counters after the previous tick,
    /// so that counters move by the difference).
    pub fn record_tick(
        &self,
        took: Duration,
        overran: bool,
        before: &NodeStats,
        now: &NodeStats,
        entities: u32,
    ) {
        let m = &*self.inner;
        m.tick_duration.observe(took.as_secs_f64());
        if overran {
            m.overruns.inc();
        }
        for (i, kind) in EVENT_KINDS.iter().enumerate() {
            let n = now.events_by_kind[i].saturating_sub(before.events_by_kind[i]);
            m.events.get_or_create(&[("kind", kind)]).inc_by(n);
            m.tick_events
                .get_or_create(&[("kind", kind)])
                .observe(n as f64);
        }
        self.record_node(before, now, entities);
    }

    /// Moves the counters by what the node counted since `before`, and sets
    /// the gauges.
    pub fn record_node(&self, before: &NodeStats, now: &NodeStats, entities: u32) {
        let m = &*self.inner;
        let grow = |c: &Counter, was: u64, is: u64| {
            c.inc_by(is.saturating_sub(was));
        };
        grow(&m.ticks, before.ticks_run, now.ticks_run);
        grow(&m.late_ticks, before.late_ticks, now.late_ticks);
        grow(&m.pool_grown, before.pool_grown, now.pool_grown);
        grow(&m.connections, before.connections, now.connections);
        grow(&m.bytes_in, before.bytes_in, now.bytes_in);
        grow(&m.bytes_out, before.bytes_out, now.bytes_out);
        grow(&m.packets_in, before.packets_in, now.packets_in);
        grow(&m.packets_out, before.packets_out, now.packets_out);
        grow(
            &m.snapshots_written,
            before.snapshots_written,
            now.snapshots_written,
        );
        grow(
            &m.snapshot_failures,
            before.snapshot_failures,
            now.snapshot_failures,
        );
        for (reason, &n) in &now.refused {
            let was = before.refused.get(reason).copied().unwrap_or(0);
            let counter = m.refusals.get_or_create(&[("reason", reason.as_str())]);
            grow(&counter, was, n);
        }
        m.tick.set(i64::try_from(now.tick).unwrap_or(i64::MAX));
        m.clients
            .set(i64::try_from(now.clients).unwrap_or(i64::MAX));
        m.entities.set(i64::from(entities));
    }

    /// Sets a cluster node's figures (counters move to the totals given);
    /// does nothing on a registry made without them.
    pub fn record_cluster(&self, now: &ClusterFigures) {
        let Some(c) = &self.inner.cluster else {
            return;
        };
        let gauge = |g: &Gauge, v: u64| {
            g.set(i64::try_from(v).unwrap_or(i64::MAX));
        };
        let total = |counter: &Counter, v: u64| {
            counter.inc_by(v.saturating_sub(counter.get()));
        };
        gauge(&c.leading, u64::from(now.leading));
        gauge(&c.appended_tick, now.appended_tick);
        gauge(&c.applied_tick, now.applied_tick);
        total(&c.appended, now.appended);
        total(&c.followed, now.followed);
        total(&c.leads, now.leads);
        total(&c.lost_appends, now.lost_appends);
        total(&c.batches_forwarded, now.batches_forwarded);
        total(&c.commands_forwarded, now.commands_forwarded);
        total(&c.batches_taken, now.batches_taken);
    }

    /// One append of a tick to the cluster's stream, timed.
    pub fn record_append(&self, took: Duration) {
        self.inner.journal_append.observe(took.as_secs_f64());
    }

    /// A snapshot stored (`true`) or not.
    pub fn record_snapshot(&self, stored: bool) {
        if stored {
            self.inner.snapshots_written.inc();
        } else {
            self.inner.snapshot_failures.inc();
        }
    }

    /// The system's count of datagrams dropped at the server's socket
    /// since it was made (a total: the counter rises to it).
    pub fn record_socket_drops(&self, total: u64) {
        let c = &self.inner.socket_drops;
        c.inc_by(total.saturating_sub(c.get()));
    }

    fn journal_append(&self) -> &Histogram {
        &self.inner.journal_append
    }

    fn journal_sync(&self) -> &Histogram {
        &self.inner.journal_sync
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_move_by_differences_and_every_label_is_there() {
        let metrics = ServeMetrics::new();
        let mut before = NodeStats::default();
        let mut now = NodeStats {
            ticks_run: 1,
            bytes_out: 1200,
            clients: 3,
            tick: 41,
            events_by_kind: [1, 0, 5, 7],
            ..NodeStats::default()
        };
        now.refused.insert(Refusal::Flood, 2);
        metrics.record_tick(Duration::from_millis(3), true, &before, &now, 12);
        before = now.clone();
        now.ticks_run = 2;
        now.bytes_out = 1500;
        now.events_by_kind[3] = 10;
        metrics.record_tick(Duration::from_micros(50), false, &before, &now, 12);

        let text = metrics.encode();
        for line in [
            "lockgrid_ticks_total 2",
            "lockgrid_tick 41",
            "lockgrid_clients 3",
            "lockgrid_entities 12",
            "lockgrid_bytes_out_total 1500",
            "lockgrid_tick_overruns_total 1",
            "lockgrid_events_total{kind=\"update\"} 10",
            "lockgrid_events_total{kind=\"leave\"} 0",
            "lockgrid_refusals_total{reason=\"flood\"} 2",
            "lockgrid_tick_duration_seconds_count 2",
            "lockgrid_tick_events_count{kind=\"enter\"} 2",
            "lockgrid_journal_sync_seconds_count 0",
            "lockgrid_snapshot_failures_total 0",
            "lockgrid_socket_drops_total 0",
        ] {
            assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
        }
        for reason in Refusal::ALL {
            let line = format!("lockgrid_refusals_total{{reason=\"{}\"}}", reason.as_str());
            assert!(text.contains(&line), "no {line} in\n{text}");
        }
        assert!(text.ends_with("# EOF\n"));
    }
}
