//! What a node counts.

use std::collections::BTreeMap;

use lockgrid_kernel::{Event, EventKind};

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
}

impl NodeStats {
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
