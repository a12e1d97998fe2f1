//! `lockgrid bots`: real protocol clients over UDP that load a server and
//! check what they received against the server's journal.
//!
//! Each bot is a [`Client`] with its own socket (so the server sees one
//! address per client). Bots connect, walk randomly (seeded) within the max
//! speed for the given time, stop, let the traffic settle, record their
//! final view and leave.
//!
//! **What is compared.** The server journals every tick's commands and
//! digest before it sends anything about that tick. After the run, the bots
//! re-run that journal through a fresh kernel (from the newest usable
//! snapshot before their first tick) and compare, for every tick each bot
//! applied: the digest the server sent with the tick, and the exact list of
//! events the bot received (its rejections, then Leave, Enter and Update of
//! its view) against the kernel's events for the bot's entity; and at the
//! end, each bot's final view: its ids against the kernel's view of its
//! entity at the bot's last applied tick, its states against the states the
//! kernel's own events for the entity imply (under the update throttle a
//! moving subject's current state may be ahead of its last sent one, so the
//! current state is not the reference). Every move a bot saw acknowledged
//! must be in the journal, in order, for its entity: the server
//! acknowledges only inputs of durable ticks, even across a crash. Each bot also rebuilds its view
//! from the events it received and checks it equals the protocol's
//! [`View`](lockgrid_protocol::View). Any difference is one mismatch. This
//! needs read access to the server's data folder; the bots never talk to
//! the server about it.

use core::fmt;
use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::time::Duration;

use lockgrid_kernel::{Command, EntityId, Event, Fix, Move, Pos, World};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientState, DisconnectReason, Instant, Seen, WorldParams,
    MAX_MTU,
};

use crate::journal::JournalReader;
use crate::serve::rules::{mix, spawn_point};
use crate::serve::stats::ServeStats;
use crate::store::{journal_path, list_snapshots, read_snapshot, snapshot_dir};

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
    /// The server's key: each client gets a connect token minted with it.
    pub key: Option<lockgrid_protocol::PrivateKey>,
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
            key: None,
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
}

impl fmt::Display for BotsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BotsError::Socket(e) => write!(f, "socket: {e}"),
            BotsError::Options(m) => f.write_str(m),
            BotsError::Verify(m) => write!(f, "verify: {m}"),
        }
    }
}

impl std::error::Error for BotsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BotsError::Socket(e) => Some(e),
            BotsError::Options(_) | BotsError::Verify(_) => None,
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
}

impl BotsReport {
    fn note(&mut self, text: String) {
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
            "{:<22} {} total, {:.0}/s ({:.1}/s per client), {} moves sent",
            "events received",
            self.events,
            self.events as f64 / secs,
            per(self.events),
            self.moves
        )?;
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
        Ok(())
    }
}

/// What a bot kept of one applied tick.
struct TickSeen {
    tick: u64,
    digest: u64,
    events: usize,
    fingerprint: u64,
}

/// A 64-bit fingerprint of a list of events: FNV-1a over their postcard
/// encoding (a stable, complete encoding of every field).
fn fingerprint(events: &[Event]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut buf = [0u8; 128];
    for e in events {
        // An event encodes to well under 128 bytes; were it ever not to,
        // its kind still enters the fingerprint and the counts are compared.
        let bytes: &[u8] = match postcard::to_slice(e, &mut buf) {
            Ok(b) => b,
            Err(_) => &[0xff],
        };
        for &byte in bytes.iter().chain([0xa5u8].iter()) {
            h ^= u64::from(byte);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// Applies one observer's events of a tick to a view model.
fn apply_events(model: &mut BTreeMap<EntityId, Seen>, events: &[Event]) {
    for e in events {
        match *e {
            Event::Enter {
                subject,
                pos,
                dir,
                speed,
                layers,
                ..
            } => {
                model.insert(
                    subject,
                    Seen {
                        pos,
                        dir,
                        speed,
                        layers,
                    },
                );
            }
            Event::Leave { subject, .. } => {
                model.remove(&subject);
            }
            Event::Update {
                subject,
                pos,
                dir,
                speed,
                ..
            } => {
                if let Some(s) = model.get_mut(&subject) {
                    s.pos = pos;
                    s.dir = dir;
                    s.speed = speed;
                }
            }
            Event::Rejected { .. } => {}
        }
    }
}

/// One simulated player.
struct Bot {
    socket: UdpSocket,
    client: Client<SocketAddr>,
    rng: u64,
    pos: Pos,
    vel: (i64, i64),
    params: Option<WorldParams>,
    step: i64,
    interval: Duration,
    next_move: Instant,
    model: BTreeMap<EntityId, Seen>,
    /// Per applied tick: the tick, its digest, and the count and
    /// fingerprint of the events received (not the events: memory stays
    /// small over long runs).
    ticks: Vec<TickSeen>,
    final_view: Option<(u64, BTreeMap<EntityId, Seen>)>,
    packets_in: u64,
    bytes_in: u64,
    events: u64,
    moves: u64,
    /// Every move queued, in order.
    sent: Vec<Move>,
    /// How many of `sent` the server acknowledged (a prefix).
    acked: usize,
    /// The first tick of its entity (the tick after the Welcome's).
    joined: Option<u64>,
    last_input: u64,
    ended: Option<DisconnectReason>,
    closing: bool,
}

impl Bot {
    /// Counts the inputs the server has acknowledged. Inputs leave the
    /// client's queue front first when acknowledged; a closed client drops
    /// its queue, so this counts only while it is open.
    fn note_acked(&mut self) {
        if matches!(
            self.client.state(),
            ClientState::Connected | ClientState::Closing
        ) {
            let acked = self.sent.len().saturating_sub(self.client.unacked_inputs());
            self.acked = self.acked.max(acked);
        }
    }

    fn rand(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.rng)
    }

    /// One step of the walk: keep the velocity, change it one step in 20.
    fn walk(&mut self, now: Instant) {
        let Some(params) = self.params else { return };
        let Some(me) = self.client.entity() else {
            return;
        };
        let s = self.step.max(0);
        if self.vel == (0, 0) || self.rand().is_multiple_of(20) {
            // |(vx, vy)| ≤ s: each axis within s·0.7.
            let lim = s / 10 * 7;
            let span = u64::try_from(2 * lim + 1).unwrap_or(1).max(1);
            let vx = i64::try_from(self.rand() % span).unwrap_or(0) - lim;
            let vy = i64::try_from(self.rand() % span).unwrap_or(0) - lim;
            self.vel = (vx, vy);
        }
        let lo_x = i128::from(params.origin.x.to_bits());
        let lo_y = i128::from(params.origin.y.to_bits());
        let cell = i128::from(params.cell_size.to_bits());
        let hi_x = lo_x + cell * i128::from(params.width_cells) - 1;
        let hi_y = lo_y + cell * i128::from(params.height_cells) - 1;
        let mut x = i128::from(self.pos.x.to_bits()) + i128::from(self.vel.0);
        let mut y = i128::from(self.pos.y.to_bits()) + i128::from(self.vel.1);
        if x < lo_x || x > hi_x {
            self.vel.0 = -self.vel.0;
            x = x.clamp(lo_x, hi_x.max(lo_x));
        }
        if y < lo_y || y > hi_y {
            self.vel.1 = -self.vel.1;
            y = y.clamp(lo_y, hi_y.max(lo_y));
        }
        let (Ok(x), Ok(y)) = (i64::try_from(x), i64::try_from(y)) else {
            return;
        };
        let m = Move {
            id: me,
            pos: Pos::new(Fix::from_bits(x), Fix::from_bits(y)),
            dir: (self.rand() & 0xffff) as u16,
            speed: Fix::from_bits(s),
        };
        let tick = (self.client.applied_tick() + 1).max(self.last_input + 1);
        // One input per step, for strictly increasing ticks; a full queue
        // (the server is behind) skips this step and keeps the position.
        if self
            .client
            .send_input(tick, &[lockgrid_kernel::Command::Move(m)])
            .is_ok()
        {
            self.pos = m.pos;
            self.moves += 1;
            self.sent.push(m);
            self.last_input = tick;
        }
        self.next_move = now + self.interval;
    }
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
    if let Some(dir) = &opts.data_dir {
        if !journal_path(dir).exists() {
            return Err(BotsError::Options(format!(
                "{} holds no journal: point --data-dir at the server's data folder (or pass --no-verify)",
                dir.display()
            )));
        }
    }
    let epoch = std::time::Instant::now();
    let clock =
        || Instant::from_micros(u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX));
    let bind: SocketAddr = if opts.server.is_ipv4() {
        SocketAddr::from(([127, 0, 0, 1], 0))
    } else {
        SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, 0))
    };
    let mut bots = Vec::with_capacity(opts.clients);
    let now = clock();
    for i in 0..opts.clients {
        let socket = UdpSocket::bind(bind).map_err(BotsError::Socket)?;
        socket.set_nonblocking(true).map_err(BotsError::Socket)?;
        let client = match &opts.key {
            Some(key) => {
                let token = crate::token::mint_for(
                    key,
                    opts.server,
                    crate::token::bot_client_id(opts.seed, i),
                )
                .map_err(BotsError::Options)?;
                Client::with_token(ClientConfig::default(), opts.server, &token, now)
            }
            None => Client::new(ClientConfig::default(), opts.server, b"lockgrid-bots", now),
        }
        .map_err(|e| BotsError::Options(e.to_string()))?;
        bots.push(Bot {
            socket,
            client,
            rng: mix(opts.seed ^ mix(i as u64)),
            pos: Pos::default(),
            vel: (0, 0),
            params: None,
            step: 0,
            interval: Duration::from_millis(50),
            next_move: now,
            model: BTreeMap::new(),
            ticks: Vec::new(),
            final_view: None,
            packets_in: 0,
            bytes_in: 0,
            events: 0,
            moves: 0,
            sent: Vec::new(),
            acked: 0,
            joined: None,
            last_input: 0,
            ended: None,
            closing: false,
        });
    }
    let mut buf = vec![0u8; MAX_MTU + 1];
    let mut out = vec![0u8; ClientConfig::default().mtu];
    let connect_by = now + opts.connect_timeout;
    let mut walk_from: Option<Instant> = None;
    let mut settle_from: Option<Instant> = None;
    let mut close_from: Option<Instant> = None;
    let mut next_progress = now;
    let mut report = BotsReport {
        clients: opts.clients,
        ..BotsReport::default()
    };
    loop {
        let now = clock();
        let mut busy = false;
        for b in bots.iter_mut() {
            for _ in 0..256 {
                match b.socket.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        busy = true;
                        b.packets_in += 1;
                        b.bytes_in += n as u64;
                        b.client.handle_datagram(now, from, &buf[..n]);
                        // Before a Bye can close it and drop its queue.
                        b.note_acked();
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::ConnectionReset
                                | io::ErrorKind::ConnectionRefused
                                | io::ErrorKind::Interrupted
                        ) => {}
                    Err(e) => return Err(BotsError::Socket(e)),
                }
            }
            if b.client.poll_timeout().is_some_and(|t| t <= now) {
                b.client.handle_timeout(now);
            }
            b.note_acked();
            while let Some(ev) = b.client.poll_event() {
                match ev {
                    ClientEvent::Connected(w) => {
                        b.params = Some(w.world);
                        b.joined = Some(w.tick + 1);
                        b.pos = spawn_point(&w.world, w.entity);
                        b.interval = Duration::from_micros(w.tick_interval_us.max(1));
                        // 80 % of the distance allowed per tick.
                        let per_tick = i128::from(opts.max_speed.to_bits())
                            * i128::from(w.tick_interval_us)
                            / 1_000_000;
                        b.step = i64::try_from(per_tick * 8 / 10).unwrap_or(0);
                        b.next_move = now;
                    }
                    ClientEvent::Tick {
                        tick,
                        digest,
                        events,
                    } => {
                        b.events += events.len() as u64;
                        apply_events(&mut b.model, &events);
                        b.ticks.push(TickSeen {
                            tick,
                            digest,
                            events: events.len(),
                            fingerprint: fingerprint(&events),
                        });
                    }
                    ClientEvent::Disconnected { reason } => b.ended = Some(reason),
                }
            }
        }
        let connected = bots
            .iter()
            .filter(|b| b.client.state() == ClientState::Connected)
            .count();
        // Phases: connect, walk, settle, close.
        match (walk_from, settle_from, close_from) {
            (None, _, _) => {
                if connected == opts.clients || now >= connect_by {
                    walk_from = Some(now);
                }
            }
            (Some(w), None, _) => {
                if now - w >= opts.duration {
                    settle_from = Some(now);
                    report.walk_secs = (now - w).as_secs_f64();
                } else {
                    for b in bots.iter_mut() {
                        if b.client.state() == ClientState::Connected && now >= b.next_move {
                            b.walk(now);
                        }
                    }
                }
            }
            (Some(_), Some(s), None) => {
                let quiet = bots.iter().all(|b| b.client.unacked_inputs() == 0);
                if (quiet && now - s >= opts.settle) || now - s >= opts.settle * 5 {
                    for b in bots.iter_mut() {
                        if b.client.state() == ClientState::Connected {
                            b.final_view = Some((b.client.applied_tick(), b.model.clone()));
                            b.closing = true;
                            b.client.close(now);
                        }
                    }
                    close_from = Some(now);
                }
            }
            (Some(_), Some(_), Some(c)) => {
                let closed = bots
                    .iter()
                    .all(|b| matches!(b.client.state(), ClientState::Closed(_)));
                if closed || now - c >= Duration::from_secs(2) {
                    break;
                }
            }
        }
        for b in bots.iter_mut() {
            // The client's buffer is its MTU, so poll_transmit cannot refuse it.
            while let Ok(Some(t)) = b.client.poll_transmit(now, &mut out) {
                busy = true;
                let _ = b.socket.send_to(&out[..t.len], t.destination);
            }
        }
        if now >= next_progress {
            next_progress = now + Duration::from_millis(250);
            on_progress(&Progress {
                phase: match (walk_from, settle_from, close_from) {
                    (None, _, _) => "connecting",
                    (Some(_), None, _) => "walking",
                    (Some(_), Some(_), None) => "settling",
                    _ => "closing",
                },
                elapsed: now - Instant::ZERO,
                connected,
                tick: bots
                    .iter()
                    .map(|b| b.client.applied_tick())
                    .max()
                    .unwrap_or(0),
                events: bots.iter().map(|b| b.events).sum(),
            });
        }
        if !busy {
            std::thread::sleep(Duration::from_micros(500));
        }
    }

    report.run_secs = (clock() - Instant::ZERO).as_secs_f64();
    for (i, b) in bots.iter().enumerate() {
        let s = b.client.stats();
        if b.client.entity().is_some() {
            report.connected += 1;
        }
        if let Some(r) = b.ended {
            if !b.closing {
                report.dropped.push((i, r));
            }
        }
        report.packets_out += s.packets_sent;
        report.bytes_out += s.bytes_sent;
        report.packets_in += b.packets_in;
        report.bytes_in += b.bytes_in;
        report.events += b.events;
        report.moves += b.moves;
        report.ticks_applied += b.ticks.len() as u64;
        // The view rebuilt from the events equals the protocol's view.
        if let Some((tick, view)) = &b.final_view {
            let proto: Vec<(EntityId, Seen)> =
                b.client.view().iter().map(|(id, s)| (id, *s)).collect();
            let mine: Vec<(EntityId, Seen)> = view.iter().map(|(id, s)| (*id, *s)).collect();
            if proto != mine && b.client.applied_tick() == *tick {
                report.note(format!("bot {i}: view rebuilt from events differs from the protocol view at tick {tick}"));
            }
        }
    }
    if let Some(dir) = &opts.data_dir {
        report.server = ServeStats::read(dir).ok();
        // Moves the server may have refused (and acknowledged) without journaling.
        let refused_moves = report.server.as_ref().map(|s| {
            [
                "too_fast",
                "too_many_moves",
                "bad_speed",
                "out_of_bounds",
                "not_a_move",
            ]
            .iter()
            .filter_map(|k| s.refused.get(*k))
            .sum::<u64>()
        });
        verify(dir, &bots, refused_moves, &mut report)?;
        report.verified = true;
    }
    Ok(report)
}

/// Re-runs the journal and compares every bot's ticks and final view.
fn verify(
    dir: &Path,
    bots: &[Bot],
    refused_moves: Option<u64>,
    report: &mut BotsReport,
) -> Result<(), BotsError> {
    let first = bots
        .iter()
        .filter_map(|b| b.ticks.first().map(|t| t.tick))
        .min();
    let Some(first) = first else {
        return Ok(());
    };
    let last = bots
        .iter()
        .flat_map(|b| {
            b.ticks
                .last()
                .map(|t| t.tick)
                .into_iter()
                .chain(b.final_view.as_ref().map(|v| v.0))
        })
        .max()
        .unwrap_or(first);
    let mut reader =
        JournalReader::open(&journal_path(dir)).map_err(|e| BotsError::Verify(e.to_string()))?;
    let config = *reader.config();
    let mut world = None;
    let snaps = list_snapshots(&snapshot_dir(dir)).unwrap_or_default();
    for (tick, path) in snaps.into_iter().rev() {
        if tick >= first {
            continue;
        }
        if let Ok(s) = read_snapshot(&path) {
            if s.config == config {
                if let Ok(w) = World::restore(&s) {
                    world = Some(w);
                    break;
                }
            }
        }
    }
    let mut world = match world {
        Some(w) => w,
        None => World::new(config).map_err(|e| BotsError::Verify(e.to_string()))?,
    };
    // Per bot: index of its next tick to compare, and the view the kernel's
    // own events for its entity build from the bot's first tick on.
    let mut next: Vec<usize> = vec![0; bots.len()];
    let mut kernel_models: Vec<BTreeMap<EntityId, Seen>> = vec![BTreeMap::new(); bots.len()];
    let spans: Vec<Option<(u64, u64)>> = bots
        .iter()
        .map(|b| {
            let first = b.ticks.first()?.tick;
            let last = b.ticks.last().map_or(first, |t| t.tick);
            Some((first, last.max(b.final_view.as_ref().map_or(0, |v| v.0))))
        })
        .collect();
    let mut events = Vec::new();
    let mut mine = Vec::new();
    // Per bot: the moves of its entity the journal holds, from its first
    // tick until the journal despawns it.
    let mut journaled: Vec<Vec<Move>> = vec![Vec::new(); bots.len()];
    let mut alive: Vec<bool> = vec![true; bots.len()];
    loop {
        let record = match reader.next_record() {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => return Err(BotsError::Verify(e.to_string())),
        };
        for (i, b) in bots.iter().enumerate() {
            let (Some(me), Some(joined)) = (b.client.entity(), b.joined) else {
                continue;
            };
            if record.tick < joined || !alive[i] {
                continue;
            }
            for c in &record.commands {
                match c {
                    Command::Move(m) if m.id == me => journaled[i].push(*m),
                    Command::Despawn { id } if *id == me => alive[i] = false,
                    _ => {}
                }
            }
        }
        if record.tick <= world.tick() || world.tick() >= last {
            continue;
        }
        events.clear();
        let rep = world.step(&record.commands, &mut events);
        let tick = rep.tick;
        for (i, b) in bots.iter().enumerate() {
            let Some(me) = b.client.entity() else {
                continue;
            };
            let Some((from, to)) = spans[i] else {
                continue;
            };
            if tick < from || tick > to {
                continue;
            }
            mine.clear();
            mine.extend(events.iter().copied().filter(|e| match e {
                Event::Rejected { entity, .. } => *entity == me,
                _ => e.order_key().is_some_and(|k| k.0 == me),
            }));
            apply_events(&mut kernel_models[i], &mine);
            if let Some(seen) = b.ticks.get(next[i]) {
                if seen.tick == tick {
                    next[i] += 1;
                    report.ticks_checked += 1;
                    if seen.digest != rep.digest || record.digest != rep.digest {
                        report.note(format!(
                            "bot {i} tick {tick}: digest sent {:016x}, journal {:016x}, re-run {:016x}",
                            seen.digest, record.digest, rep.digest
                        ));
                    } else if seen.events != mine.len() || seen.fingerprint != fingerprint(&mine) {
                        report.note(format!(
                            "bot {i} tick {tick}: received {} events, the kernel has {} for entity {me}{}",
                            seen.events,
                            mine.len(),
                            if seen.events == mine.len() { " (contents differ)" } else { "" }
                        ));
                    }
                }
            }
            if let Some((t, view)) = &b.final_view {
                if *t == tick {
                    // Ids against the kernel's view itself; states against
                    // what the kernel's events for the entity say (a moving
                    // subject's current state may be ahead of its last sent
                    // one: that is the update throttle, not a mismatch).
                    report.views_checked += 1;
                    let kernel: Vec<EntityId> =
                        world.view(me).map(|v| v.collect()).unwrap_or_default();
                    let ids: Vec<EntityId> = view.keys().copied().collect();
                    let model_ids: Vec<EntityId> = kernel_models[i].keys().copied().collect();
                    if kernel != ids || model_ids != kernel {
                        report.note(format!(
                            "bot {i} final view at tick {tick}: {} subjects, the kernel's view of {me} has {} (its events build {})",
                            ids.len(),
                            kernel.len(),
                            model_ids.len()
                        ));
                    } else if *view != kernel_models[i] {
                        report.note(format!(
                            "bot {i} final view at tick {tick}: subject states differ from the kernel's events"
                        ));
                    }
                }
            }
        }
    }
    // Every acknowledged move is in the journal, in order, unless the
    // server refused it (it counts refusals but does not say which).
    let mut missing_total = 0u64;
    for (i, b) in bots.iter().enumerate() {
        let acked = &b.sent[..b.acked.min(b.sent.len())];
        let mut j = 0;
        let mut found = 0u64;
        for m in acked {
            if let Some(at) = journaled[i][j..].iter().position(|x| x == m) {
                j += at + 1;
                found += 1;
            }
        }
        report.inputs_checked += found;
        let missing = acked.len() as u64 - found;
        report.inputs_refused += missing;
        missing_total += missing;
        if missing > 0 && refused_moves.is_none() {
            report.note(format!(
                "bot {i}: {missing} of {} acknowledged moves are not in the journal",
                acked.len()
            ));
        }
    }
    if let Some(refused) = refused_moves {
        if missing_total > refused {
            report.note(format!(
                "{missing_total} acknowledged moves are not in the journal, but the server refused only {refused}"
            ));
        }
    }
    // Ticks a bot applied that the journal does not hold.
    for (i, b) in bots.iter().enumerate() {
        let missing = b.ticks.len().saturating_sub(next[i]);
        if missing > 0 && b.client.entity().is_some() {
            report.note(format!(
                "bot {i}: {missing} applied ticks from tick {} were not compared (not in the journal, or out of order)",
                b.ticks[next[i]].tick
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockgrid_kernel::{CommandKind, RejectReason};

    #[test]
    fn fingerprints_see_every_field_and_the_order() {
        let enter = Event::Enter {
            observer: 1,
            subject: 2,
            pos: Pos::from_ints(3, 4),
            dir: 5,
            speed: Fix::from_num(6),
            layers: 7,
        };
        let leave = Event::Leave {
            observer: 1,
            subject: 9,
        };
        let rejected = Event::Rejected {
            entity: 1,
            command: CommandKind::Move,
            reason: RejectReason::OutOfBounds,
        };
        let base = fingerprint(&[rejected, leave, enter]);
        assert_eq!(base, fingerprint(&[rejected, leave, enter]));
        assert_ne!(base, fingerprint(&[rejected, enter, leave]));
        assert_ne!(base, fingerprint(&[leave, enter]));
        let mut moved = enter;
        if let Event::Enter { ref mut pos, .. } = moved {
            pos.x += Fix::from_bits(1);
        }
        assert_ne!(base, fingerprint(&[rejected, leave, moved]));
        let mut turned = enter;
        if let Event::Enter { ref mut layers, .. } = turned {
            *layers = 8;
        }
        assert_ne!(base, fingerprint(&[rejected, leave, turned]));
    }
}
