//! What a node counts.

use std::collections::BTreeMap;

use lockgrid_kernel::{Event, EventKind};
use serde::{Deserialize, Serialize};

use super::rules::Refusal;

/// A node's counters since it opened.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeStats {
    /// The world's tick.
    pub tick: u64,
    /// Ticks this node ran.
    pub ticks_run: u64,
    /// Ticks that started more than one interval after their slot.
    pub late_ticks: u64,
    /// Packet records, part blocks and pending ticks the protocol server
    /// allocated because its pools were empty
    /// ([`ServerStats::pool_grown`](lockgrid_protocol::ServerStats::pool_grown)):
    /// each a new high-water mark of data in flight.
    pub pool_grown: u64,
    /// Clients connected now.
    pub clients: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Kernel events produced.
    pub events: u64,
    /// Of those, per kind, indexed by [`EventKind`] order: rejected,
    /// leave, enter, update.
    pub events_by_kind: [u64; 4],
    /// Datagrams received.
    pub packets_in: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Datagrams sent.
    pub packets_out: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Snapshots written.
    pub snapshots_written: u64,
    /// Snapshots that could not be written (the node served on).
    pub snapshot_failures: u64,
    /// Why the last snapshot failed, when the last attempt did.
    pub snapshot_error: Option<String>,
    /// Refused client input and datagrams, per reason.
    pub refused: BTreeMap<Refusal, u64>,
    /// The bandwidth budget, when the server has one.
    pub budget: Option<BudgetSummary>,
}

/// The per-client bandwidth budget (see `lockgrid_protocol::budget`):
/// counters since the node opened, over every connection; the rest over
/// the clients connected now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetSummary {
    /// Each client's budget, bytes per second.
    pub bytes_per_sec: u32,
    /// Bytes sent per connection accepted, on average.
    pub bytes_per_client: u64,
    /// The largest deficit of a client connected now, bytes.
    pub max_deficit: u64,
    /// Ticks whose Enters, Leaves and rejections alone overran a client's
    /// allowance, summed over clients.
    pub overrun_ticks: u64,
    /// Updates sent, summed over clients.
    pub updates_sent: u64,
    /// Stale subjects left for a later tick, summed over ticks and clients.
    pub updates_deferred: u64,
    /// Updates sent as resets (the whole state), summed over clients.
    #[serde(default)]
    pub resets_sent: u64,
    /// Updates dropped from lost parts before they went again, because a
    /// newer state superseded them, summed over clients.
    #[serde(default)]
    pub updates_superseded: u64,
    /// Visible subjects whose newest state is not yet sent, summed over
    /// the clients connected now.
    pub stale_subjects: u64,
    /// The longest a connected client's copy of a subject has been stale, ticks.
    pub max_staleness: u64,
}

impl NodeStats {
    /// Makes `self` equal to `other`, keeping the room of its map and
    /// error text: a copy taken every tick allocates only when a kind of
    /// refusal is counted for the first time (or an error text grows).
    pub fn copy_from(&mut self, other: &NodeStats) {
        // Every field by name: a new one does not compile until copied here.
        let NodeStats {
            tick,
            ticks_run,
            late_ticks,
            pool_grown,
            clients,
            connections,
            events,
            events_by_kind,
            packets_in,
            bytes_in,
            packets_out,
            bytes_out,
            snapshots_written,
            snapshot_failures,
            snapshot_error,
            refused,
            budget,
        } = other;
        self.tick = *tick;
        self.ticks_run = *ticks_run;
        self.late_ticks = *late_ticks;
        self.pool_grown = *pool_grown;
        self.clients = *clients;
        self.connections = *connections;
        self.events = *events;
        self.events_by_kind = *events_by_kind;
        self.packets_in = *packets_in;
        self.bytes_in = *bytes_in;
        self.packets_out = *packets_out;
        self.bytes_out = *bytes_out;
        self.snapshots_written = *snapshots_written;
        self.snapshot_failures = *snapshot_failures;
        self.snapshot_error.clone_from(snapshot_error);
        self.refused.retain(|why, _| refused.contains_key(why));
        for (&why, &n) in refused {
            *self.refused.entry(why).or_insert(0) = n;
        }
        self.budget = *budget;
    }

    /// Everything refused, all reasons together.
    pub fn refused_total(&self) -> u64 {
        self.refused.values().sum()
    }

    /// Counts a tick's events by kind.
    pub(crate) fn count_kinds(&mut self, events: &[Event]) {
        for e in events {
            let i = match e.kind() {
                EventKind::Rejected => 0,
                EventKind::Leave => 1,
                EventKind::Enter => 2,
                EventKind::Update => 3,
            };
            self.events_by_kind[i] += 1;
        }
    }
}

/// A driver's last two readings of a node's counters, in buffers kept
/// between ticks: the metrics are handed both and count the difference.
#[derive(Debug, Default)]
pub struct StatsReadings {
    before: NodeStats,
    now: NodeStats,
}

impl StatsReadings {
    /// Readings whose first difference is counted from `now`.
    pub fn starting_at(now: NodeStats) -> StatsReadings {
        StatsReadings {
            before: NodeStats::default(),
            now,
        }
    }

    /// Takes a new reading with `read` (a node's
    /// [`stats_into`](crate::node::Node::stats_into)); returns the
    /// counters as they were at the last reading and as they are now.
    pub fn read(&mut self, read: impl FnOnce(&mut NodeStats)) -> (&NodeStats, &NodeStats) {
        core::mem::swap(&mut self.before, &mut self.now);
        read(&mut self.now);
        (&self.before, &self.now)
    }
}
