//! What a node counts.

use std::collections::BTreeMap;

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
}
