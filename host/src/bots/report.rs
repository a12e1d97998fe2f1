//! What a bots run measured and found, and how it reads.

use core::fmt;

use lockgrid_protocol::DisconnectReason;

use crate::serve::stats::ServeStats;

/// The outcome of a bots run.
#[derive(Clone, Debug, Default)]
pub struct BotsReport {
    /// Clients started.
    pub clients: usize,
    /// Clients that were accepted.
    pub connected: usize,
    /// Clients disconnected by the server before the end, with why.
    pub dropped: Vec<(usize, DisconnectReason)>,
    /// Seconds the walk lasted.
    pub walk_secs: f64,
    /// Seconds the whole run lasted (connect, walk, settle, close): the
    /// denominator of the rates.
    pub run_secs: f64,
    /// Datagrams and bytes sent and received, summed over clients.
    pub packets_out: u64,
    /// Datagrams received.
    pub packets_in: u64,
    /// Bytes sent.
    pub bytes_out: u64,
    /// Bytes received.
    pub bytes_in: u64,
    /// Moves sent.
    pub moves: u64,
    /// Refused commands the server told the bots of.
    pub refusals_heard: u64,
    /// Events received.
    pub events: u64,
    /// Ticks applied, summed over clients.
    pub ticks_applied: u64,
    /// Ticks compared with the journal (digest and events), summed over clients.
    pub ticks_checked: u64,
    /// Final views compared with the journal's kernel.
    pub views_checked: u64,
    /// Acknowledged moves looked up (and found) in the journal.
    pub inputs_checked: u64,
    /// Acknowledged moves not in the journal (the server refused them).
    pub inputs_refused: u64,
    /// Whether the journal check ran.
    pub verified: bool,
    /// Differences found.
    pub mismatches: u64,
    /// The first few differences, described.
    pub mismatch_notes: Vec<String>,
    /// The server's stats file, if it was readable.
    pub server: Option<ServeStats>,
    /// The server stopped answering during the run, and the bots stopped.
    pub server_lost: Option<ServerLost>,
    /// With several servers: times a client moved to another one because
    /// its own stopped answering or closed it.
    pub moved: u64,
}

/// The server went silent for longer than
/// [`BotsOptions::server_silence`](super::BotsOptions::server_silence).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ServerLost {
    /// Seconds into the run when the last datagram came from it.
    pub last_heard_secs: f64,
    /// Seconds of silence when the bots gave up.
    pub silent_secs: f64,
    /// The last tick any bot applied.
    pub last_tick: u64,
}

impl fmt::Display for ServerLost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the server stopped answering: nothing came from it for {:.1} s after {:.1} s of the run (last tick applied {}), so the bots stopped",
            self.silent_secs, self.last_heard_secs, self.last_tick
        )
    }
}

impl BotsReport {
    pub(super) fn note(&mut self, text: String) {
        self.mismatches += 1;
        if self.mismatch_notes.len() < 10 {
            self.mismatch_notes.push(text);
        }
    }
}

impl fmt::Display for BotsReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.run_secs.max(1e-9);
        let per = |x: u64| x as f64 / secs / self.connected.max(1) as f64;
        writeln!(
            f,
            "{:<22} {}",
            "clients",
            format_args!(
                "{} started, {} connected, {} dropped by the server",
                self.clients,
                self.connected,
                self.dropped.len()
            )
        )?;
        writeln!(
            f,
            "{:<22} {:.1} s walking, {:.1} s in all (rates below are over the whole run)",
            "time", self.walk_secs, self.run_secs
        )?;
        match &self.server {
            Some(s) => writeln!(
                f,
                "{:<22} p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms  ({} ticks, {} overruns, {} late)",
                "server tick",
                s.tick_p50_us as f64 / 1000.0,
                s.tick_p99_us as f64 / 1000.0,
                s.tick_max_us as f64 / 1000.0,
                s.ticks_run,
                s.overruns,
                s.late_ticks
            )?,
            None => writeln!(
                f,
                "{:<22} unknown (no readable serve-stats.json in the data folder)",
                "server tick"
            )?,
        }
        writeln!(
            f,
            "{:<22} out {:.1} pkt/s {:.0} B/s, in {:.1} pkt/s {:.0} B/s",
            "per client",
            per(self.packets_out),
            per(self.bytes_out),
            per(self.packets_in),
            per(self.bytes_in)
        )?;
        writeln!(
            f,
            "{:<22} {} total, {:.0}/s ({:.1}/s per client), {} moves sent, {} refusals heard",
            "events received",
            self.events,
            self.events as f64 / secs,
            per(self.events),
            self.moves,
            self.refusals_heard
        )?;
        if let Some(b) = self.server.as_ref().and_then(|s| s.budget) {
            writeln!(
                f,
                "{:<22} {} B/s per client: {} B sent per client, max deficit {} B, {} overrun ticks, {} updates sent, {} deferred, {} stale now (at most {} ticks)",
                "server budget",
                b.bytes_per_sec,
                b.bytes_per_client,
                b.max_deficit,
                b.overrun_ticks,
                b.updates_sent,
                b.updates_deferred,
                b.stale_subjects,
                b.max_staleness
            )?;
        }
        if self.moved > 0 {
            writeln!(
                f,
                "{:<22} {} times a client moved to another server",
                "moved", self.moved
            )?;
        }
        if let Some(s) = &self.server {
            let refused: Vec<String> = s
                .refused
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            writeln!(
                f,
                "{:<22} {}",
                "server refused",
                if refused.is_empty() {
                    "nothing".to_owned()
                } else {
                    refused.join(", ")
                }
            )?;
        }
        if self.verified {
            writeln!(
                f,
                "{:<22} {} client ticks (digest and events), {} final views and {} acknowledged moves against the journal",
                "checked", self.ticks_checked, self.views_checked, self.inputs_checked
            )?;
            if self.inputs_refused > 0 {
                writeln!(
                    f,
                    "{:<22} {} acknowledged moves were refused by the server, not journaled",
                    "", self.inputs_refused
                )?;
            }
            write!(f, "{:<22} {}", "view mismatches", self.mismatches)?;
        } else {
            write!(
                f,
                "{:<22} not checked (no data folder given)",
                "view mismatches"
            )?;
        }
        for n in &self.mismatch_notes {
            write!(f, "\n  {n}")?;
        }
        if let Some(lost) = &self.server_lost {
            write!(f, "\n{:<22} {lost}", "server")?;
        }
        Ok(())
    }
}
