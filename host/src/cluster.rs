//! Many `lockgrid serve` nodes in lockstep over NATS JetStream: a second
//! driver of the [`Node`](crate::node::Node), next to the UDP driver of
//! [`serve`](crate::serve).
//!
//! One JetStream stream per world holds one message per tick — the journal
//! record of `docs/journal.md` (tick, commands, digest) — at stream
//! sequence = tick. One node at a time appends, each append conditioned on
//! the stream's last sequence being the previous tick; a key-value lease
//! says who should try (liveness), the condition makes sure only one can
//! succeed (safety). Every node consumes the stream in order, steps its own
//! kernel and checks each digest. Clients connect to any node; a node
//! forwards its clients' commands to the leader and acknowledges them only
//! once a tick holding them is in the stream. See `docs/cluster.md`.
//!
//! Tokio and `async-nats` live in this module only; the node, the kernel
//! and the protocol know nothing of them.

mod driver;
pub mod export;
pub mod log;
pub mod record;
pub mod storage;

use core::fmt;
use std::io;
use std::path::PathBuf;

pub use driver::{serve_cluster, ClusterOptions, ClusterSummary};

use crate::node::NodeError;

/// Why a cluster node could not start or had to stop.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClusterError {
    /// The options are unusable.
    Options(String),
    /// NATS refused or failed.
    Nats {
        /// What was being done.
        what: &'static str,
        /// The client's error.
        detail: String,
    },
    /// A record in the stream is not a valid tick record.
    BadRecord {
        /// Its stream sequence.
        seq: u64,
        /// What is wrong with it.
        fault: String,
    },
    /// The stream delivered a record out of sequence.
    OutOfSequence {
        /// The sequence delivered.
        seq: u64,
        /// The sequence expected (the next tick).
        expected: u64,
    },
    /// Something stored for the world contradicts the stream.
    Corrupt {
        /// The stream sequence (or tick) concerned; 0 when none.
        seq: u64,
        /// What.
        what: String,
    },
    /// This node's kernel computed another digest than the record's.
    Desync {
        /// The stream sequence (= tick).
        seq: u64,
        /// The record's digest.
        stream: u64,
        /// This node's digest.
        local: u64,
        /// The desync report written, if it could be.
        report: Option<PathBuf>,
    },
    /// The node refused to open.
    Node(NodeError),
    /// A local file (socket, data folder, report) failed.
    Io(io::Error),
}

impl ClusterError {
    pub(crate) fn nats(what: &'static str, e: impl fmt::Display) -> ClusterError {
        ClusterError::Nats {
            what,
            detail: e.to_string(),
        }
    }
}

impl fmt::Display for ClusterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClusterError::Options(m) => f.write_str(m),
            ClusterError::Nats { what, detail } => write!(f, "NATS: cannot {what}: {detail}"),
            ClusterError::BadRecord { seq, fault } => {
                write!(f, "stream sequence {seq}: not a tick record: {fault}")
            }
            ClusterError::OutOfSequence { seq, expected } => write!(
                f,
                "stream sequence {seq} delivered where {expected} was expected"
            ),
            ClusterError::Corrupt { seq, what } => write!(f, "stream sequence {seq}: {what}"),
            ClusterError::Desync {
                seq,
                stream,
                local,
                report,
            } => {
                write!(
                    f,
                    "desync at stream sequence {seq} (tick {seq}): the record's digest is {stream:016x}, this node computed {local:016x}"
                )?;
                if let Some(p) = report {
                    write!(f, "; report in {}", p.display())?;
                }
                Ok(())
            }
            ClusterError::Node(e) => write!(f, "node: {e}"),
            ClusterError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ClusterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ClusterError::Node(e) => Some(e),
            ClusterError::Io(e) => Some(e),
            _ => None,
        }
    }
}
