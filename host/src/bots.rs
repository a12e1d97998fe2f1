//! `lockgrid bots`: real protocol clients over UDP that load a server and
//! check what they received against the server's journal.
//!
//! Each bot is a [`Client`](lockgrid_protocol::Client) with its own socket (so the server sees one
//! address per client). Bots connect, walk randomly (seeded) within the max
//! speed for the given time, stop, let the traffic settle, record their
//! final view and leave.
//!
//! Two parts, each readable alone: `bots/load.rs` generates the traffic
//! (the clients, their walks, and watching that the server still answers:
//! a silent server for [`BotsOptions::server_silence`] is reported in
//! [`BotsReport::server_lost`], none at all is [`BotsError::NoServer`]);
//! `bots/verify.rs` checks what the clients recorded (`bots/seen.rs`)
//! against a re-run of the server's journal. This needs read access to the server's data folder;
//! the bots never talk to the server about it.

mod load;
mod report;
mod seen;
mod verify;

use core::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use lockgrid_kernel::Fix;
use lockgrid_protocol::DisconnectReason;

pub use report::{BotsReport, ServerLost};

use crate::serve::stats::ServeStats;
use crate::store::journal_path;

/// Longer than the server's once-a-second stats interval.
const STATS_SETTLE: Duration = Duration::from_millis(1300);

/// What `lockgrid bots` is told.
#[derive(Clone, Debug)]
pub struct BotsOptions {
    /// The server.
    pub server: SocketAddr,
    /// How many clients.
    pub clients: usize,
    /// How long they walk.
    pub duration: Duration,
    /// Seed of the walks.
    pub seed: u64,
    /// The server's max speed, units per second; bots walk at 80 % of it.
    pub max_speed: Fix,
    /// The server's data folder, to verify against; `None` skips the check.
    pub data_dir: Option<PathBuf>,
    /// How long all clients may take to connect.
    pub connect_timeout: Duration,
    /// How long to wait after the walk for the traffic to settle.
    pub settle: Duration,
    /// Silence from the server (no datagram at all) after which the bots
    /// stop and report it lost; a server sends every client a packet per
    /// tick, so a few seconds of silence is not a slow tick.
    pub server_silence: Duration,
    /// The server's key: each client gets a connect token minted with it.
    pub key: Option<lockgrid_protocol::PrivateKey>,
    /// More servers (nodes of one cluster): clients are spread over
    /// `server` and these, and a client whose server is silent for
    /// `server_silence` or closes it connects to the next one, with its
    /// name (or token) and so its entity. Verification against a data folder needs one server.
    pub more_servers: Vec<SocketAddr>,
    /// When each bot sends its next move.
    pub pace: Pace,
}

/// When a bot moves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pace {
    /// Once for each tick it applies, as a lockstep client answers the
    /// server's tick with its input for the next one: the move leaves in
    /// the same datagram as the acknowledgement of the tick's packet.
    /// Its moves keep to one a tick interval on average by its own clock
    /// (never two within half an interval), so ticks that arrive bunched
    /// do not speed it up.
    #[default]
    Ticks,
    /// Every tick interval by the bot's own clock, whatever it has
    /// received: its moves and its acknowledgements leave in separate
    /// datagrams.
    Clock,
}

impl Default for BotsOptions {
    fn default() -> Self {
        BotsOptions {
            server: SocketAddr::from(([127, 0, 0, 1], 7777)),
            clients: 10,
            duration: Duration::from_secs(10),
            seed: 0,
            max_speed: Fix::from_num(200),
            data_dir: Some(PathBuf::from("lockgrid-data")),
            connect_timeout: Duration::from_secs(5),
            settle: Duration::from_secs(1),
            server_silence: Duration::from_secs(5),
            key: None,
            more_servers: Vec::new(),
            pace: Pace::default(),
        }
    }
}

/// Why the bots could not run or check.
#[derive(Debug)]
#[non_exhaustive]
pub enum BotsError {
    /// A socket failed.
    Socket(io::Error),
    /// The options are unusable.
    Options(String),
    /// The data folder could not be read.
    Verify(String),
    /// No client connected within the connect timeout.
    NoServer {
        /// The address tried.
        server: SocketAddr,
        /// How long the clients tried.
        waited: Duration,
        /// Whether anything answered at all.
        answered: bool,
        /// Why the server refused a client, if it did.
        refused: Option<DisconnectReason>,
    },
}

impl fmt::Display for BotsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BotsError::Socket(e) => write!(f, "socket: {e}"),
            BotsError::Options(m) => f.write_str(m),
            BotsError::Verify(m) => write!(f, "verify: {m}"),
            BotsError::NoServer {
                server,
                waited,
                answered,
                refused,
            } => {
                write!(
                    f,
                    "no client connected to {server} within {:.1} s: ",
                    waited.as_secs_f64()
                )?;
                match (answered, refused) {
                    (_, Some(reason)) => {
                        write!(f, "the server refused them: {reason}")?;
                        if matches!(
                            reason,
                            DisconnectReason::TokenMissing | DisconnectReason::TokenInvalid
                        ) {
                            // The usual cause: a server with --key, bots without
                            // it or with another key file.
                            f.write_str(
                                " (a server with --key admits only tokens minted with its key: \
                                 give bots --key with the server's key file)",
                            )?;
                        }
                        Ok(())
                    }
                    (true, None) => f.write_str("something answered, but no connection was accepted"),
                    (false, None) => f.write_str(
                        "nothing answered there (is a server running, and is --server its address?)",
                    ),
                }
            }
        }
    }
}

impl std::error::Error for BotsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BotsError::Socket(e) => Some(e),
            BotsError::Options(_) | BotsError::Verify(_) | BotsError::NoServer { .. } => None,
        }
    }
}

/// A snapshot of progress, handed to the caller about four times a second.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    /// What the bots are doing.
    pub phase: &'static str,
    /// Time since start.
    pub elapsed: Duration,
    /// Connected clients.
    pub connected: usize,
    /// Highest tick a client applied.
    pub tick: u64,
    /// Events received so far.
    pub events: u64,
}

/// Runs the bots against a server, then (with a data folder) checks what
/// they received against its journal.
pub fn run_bots(
    opts: &BotsOptions,
    mut on_progress: impl FnMut(&Progress),
) -> Result<BotsReport, BotsError> {
    if opts.clients == 0 {
        return Err(BotsError::Options("--clients must be positive".into()));
    }
    if opts.data_dir.is_some() && !opts.more_servers.is_empty() {
        return Err(BotsError::Options(
            "several servers cannot be checked against one data folder: pass --no-verify (and check a cluster with `lockgrid replay nats://HOST:PORT/NAME --verify`)".into(),
        ));
    }
    if let Some(dir) = &opts.data_dir {
        if !journal_path(dir).exists() {
            return Err(BotsError::Options(format!(
                "{} holds no journal: point --data-dir at the server's data folder (or pass --no-verify)",
                dir.display()
            )));
        }
    }
    let mut report = BotsReport {
        clients: opts.clients,
        ..BotsReport::default()
    };
    let bots = load::generate_load(opts, &mut on_progress, &mut report)?;
    if let Some(dir) = &opts.data_dir {
        let mut settled = false;
        report.server = ServeStats::read(dir).ok();
        if report.server.as_ref().is_some_and(|s| s.running) {
            // A running server writes its stats once a second: wait for a
            // file written after the bots' last move, so its refusals are
            // all counted. A file that does not move is a killed server's.
            std::thread::sleep(STATS_SETTLE);
            if let Ok(newer) = ServeStats::read(dir) {
                let moved = report.server.as_ref().is_some_and(|s| newer.tick != s.tick);
                report.server = Some(newer);
                settled = moved;
            }
        }
        // Moves the server may have refused (and acknowledged) without journaling.
        let refused_moves = match &report.server {
            None => verify::RefusedMoves::Unknown,
            Some(s) => {
                let count = [
                    "too_fast",
                    "too_many_moves",
                    "bad_speed",
                    "out_of_bounds",
                    "not_a_move",
                ]
                .iter()
                .filter_map(|k| s.refused.get(*k))
                .sum::<u64>();
                // A server still "running" in a file that did not move was
                // killed: the file is from up to a second before its end.
                if s.running && !settled {
                    verify::RefusedMoves::AtLeast(count)
                } else {
                    verify::RefusedMoves::Exactly(count)
                }
            }
        };
        let budgeted = report.server.as_ref().is_some_and(|s| s.budget.is_some());
        verify::verify(dir, &bots, refused_moves, budgeted, &mut report)?;
        report.verified = true;
    }
    Ok(report)
}
