//! Load generation: real protocol clients over UDP, one socket each, that
//! connect, walk randomly (seeded) within the max speed, let the traffic
//! settle, record their final view and leave. What each one received is
//! kept as a [`BotRecord`] for the verification.
//!
//! The server is watched while they run: when no datagram arrives from it
//! for [`BotsOptions::server_silence`] (it died, or the network is gone),
//! the run stops and says so, rather than walking on and reporting a
//! clean result; a server that never answered at all is
//! [`BotsError::NoServer`].

use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use lockgrid_kernel::{EntityId, Fix, Move, Pos};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientState, DisconnectReason, Instant, Seen, WorldParams,
    MAX_MTU,
};

use super::seen::{apply_events, fingerprint, membership, BotRecord, TickSeen};
use super::{BotsError, BotsOptions, BotsReport, Pace, Progress, ServerLost};
use crate::serve::rules::mix;
use tracing::debug;

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
    /// A tick arrived in this pass of the loop: with [`Pace::Ticks`], its
    /// acknowledgement leaves in this pass, and the move rides with it
    /// or waits for the next tick.
    tick_arrived: bool,
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
    /// Refused commands the server told of.
    refusals_heard: u64,
    /// Every move queued, in order.
    sent: Vec<Move>,
    /// How many of `sent` the server acknowledged (a prefix).
    acked: usize,
    /// The first tick of its entity (the tick after the Welcome's).
    joined: Option<u64>,
    last_input: u64,
    ended: Option<DisconnectReason>,
    closing: bool,
    /// Which of the servers it talks to, and when it last heard from it.
    server: usize,
    heard: Instant,
}

impl Bot {
    /// What the verification needs of this bot.
    fn into_record(self) -> BotRecord {
        BotRecord {
            entity: self.client.entity(),
            joined: self.joined,
            ticks: self.ticks,
            final_view: self.final_view,
            sent: self.sent,
            acked: self.acked,
        }
    }

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

    /// Whether its next move is due (see [`Pace`]).
    fn due(&self, now: Instant, pace: Pace) -> bool {
        now >= self.next_move && (pace == Pace::Clock || self.tick_arrived)
    }

    /// One step of the walk: keep the velocity, change it one step in 20.
    fn walk(&mut self, now: Instant, pace: Pace) {
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
        self.next_move = match pace {
            // One move an interval on average, with at most one interval
            // of credit and never two moves within half an interval: over
            // any span a bot covers at most two steps more than its clock
            // allows, however its ticks arrive.
            Pace::Ticks => {
                let scheduled = if now - self.next_move > self.interval {
                    now
                } else {
                    self.next_move + self.interval
                };
                scheduled.max(now + self.interval / 2)
            }
            Pace::Clock => now + self.interval,
        };
    }
}

/// Runs the clients against the server: connect, walk, settle, close.
/// Fills the traffic figures of `report` and returns what each client
/// recorded, in client order.
pub(super) fn generate_load(
    opts: &BotsOptions,
    on_progress: &mut impl FnMut(&Progress),
    report: &mut BotsReport,
) -> Result<Vec<BotRecord>, BotsError> {
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
    let servers: Vec<SocketAddr> = std::iter::once(opts.server)
        .chain(opts.more_servers.iter().copied())
        .collect();
    // Without a key, each bot says Hello with a name of its own, drawn
    // once per bot per run: a bot that moves to another node names itself
    // again and gets its entity back there.
    let names: Vec<Vec<u8>> = (0..opts.clients)
        .map(|i| {
            let r = getrandom::u64()
                .unwrap_or_else(|_| mix(opts.seed ^ mix(i as u64) ^ now.as_micros()));
            format!("bot-{r:016x}").into_bytes()
        })
        .collect();
    let open = |i: usize, server: SocketAddr, now: Instant| {
        let socket = UdpSocket::bind(bind).map_err(BotsError::Socket)?;
        socket.set_nonblocking(true).map_err(BotsError::Socket)?;
        // With the server's key, each client carries a token naming its own
        // entity; without one, its name does.
        let client = match &opts.key {
            Some(key) => {
                let token =
                    crate::token::mint_for(key, server, crate::token::bot_client_id(opts.seed, i))
                        .map_err(BotsError::Options)?;
                Client::with_token(ClientConfig::default(), server, &token, now)
            }
            None => {
                // A fresh nonce per run: a bot restarted on a reused port
                // must not take a late Welcome of the earlier run.
                let nonce = getrandom::u64()
                    .unwrap_or_else(|_| mix(opts.seed ^ i as u64 ^ now.as_micros()));
                Client::new(ClientConfig::default(), server, &names[i], nonce, now)
            }
        }
        .map_err(|e| BotsError::Options(e.to_string()))?;
        Ok::<_, BotsError>((socket, client))
    };
    for i in 0..opts.clients {
        let (socket, client) = open(i, servers[i % servers.len()], now)?;
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
            tick_arrived: false,
            model: BTreeMap::new(),
            ticks: Vec::new(),
            final_view: None,
            packets_in: 0,
            bytes_in: 0,
            events: 0,
            moves: 0,
            refusals_heard: 0,
            sent: Vec::new(),
            acked: 0,
            joined: None,
            last_input: 0,
            ended: None,
            closing: false,
            server: i % servers.len(),
            heard: now,
        });
    }
    let mut buf = vec![0u8; MAX_MTU + 1];
    let mut out = vec![0u8; ClientConfig::default().mtu];
    let connect_by = now + opts.connect_timeout;
    let mut walk_from: Option<Instant> = None;
    let mut settle_from: Option<Instant> = None;
    let mut close_from: Option<Instant> = None;
    let mut next_progress = now;
    // When a datagram last came from the server, and the first refusal.
    let mut last_heard: Option<Instant> = None;
    let mut refused: Option<DisconnectReason> = None;
    loop {
        let now = clock();
        let mut busy = false;
        for b in bots.iter_mut() {
            for _ in 0..256 {
                match b.socket.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        busy = true;
                        last_heard = Some(now);
                        b.heard = now;
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
                        // The Welcome says where the entity starts and
                        // how fast it may go.
                        b.pos = w.spawn.pos;
                        b.interval = Duration::from_micros(w.tick_interval_us.max(1));
                        let max_speed = w.limits.max_speed.unwrap_or(opts.max_speed);
                        // 80 % of the distance allowed per tick.
                        let per_tick = i128::from(max_speed.to_bits())
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
                        b.tick_arrived = true;
                        b.events += events.len() as u64;
                        apply_events(&mut b.model, &events);
                        b.ticks.push(TickSeen {
                            tick,
                            digest,
                            events: events.len(),
                            fingerprint: fingerprint(&events),
                            membership: membership(&events),
                        });
                    }
                    ClientEvent::Refused(r) => {
                        b.refusals_heard += 1;
                        debug!(seq = r.seq, index = r.index, reason = ?r.reason, "a move was refused");
                    }
                    ClientEvent::Disconnected { reason } => {
                        if b.client.entity().is_none() {
                            refused.get_or_insert(reason);
                        }
                        b.ended = Some(reason);
                    }
                }
            }
        }
        if servers.len() > 1 && close_from.is_none() {
            // A client whose server went silent or closed it starts again on
            // the next one, with its name or token: its entity back.
            for (i, b) in bots.iter_mut().enumerate() {
                if !b.closing && (b.ended.is_some() || now - b.heard >= opts.server_silence) {
                    b.server = (b.server + 1) % servers.len();
                    (b.socket, b.client) = open(i, servers[b.server], now)?;
                    b.params = None;
                    b.vel = (0, 0);
                    b.model.clear();
                    b.final_view = None;
                    b.sent.clear();
                    b.acked = 0;
                    b.joined = None;
                    b.last_input = 0;
                    b.ended = None;
                    b.heard = now;
                    b.next_move = now;
                    report.moved += 1;
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
                    if connected == 0 {
                        return Err(BotsError::NoServer {
                            server: opts.server,
                            waited: opts.connect_timeout,
                            answered: last_heard.is_some(),
                            refused,
                        });
                    }
                    walk_from = Some(now);
                }
            }
            (Some(w), None, _) => {
                if now - w >= opts.duration {
                    settle_from = Some(now);
                    report.walk_secs = (now - w).as_secs_f64();
                } else {
                    for b in bots.iter_mut() {
                        if b.client.state() == ClientState::Connected && b.due(now, opts.pace) {
                            b.walk(now, opts.pace);
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
        if let Some(heard) = last_heard.filter(|_| close_from.is_none()) {
            if now - heard >= opts.server_silence {
                report.server_lost = Some(ServerLost {
                    last_heard_secs: (heard - Instant::ZERO).as_secs_f64(),
                    silent_secs: (now - heard).as_secs_f64(),
                    last_tick: bots
                        .iter()
                        .map(|b| b.client.applied_tick())
                        .max()
                        .unwrap_or(0),
                });
                if report.walk_secs == 0.0 {
                    report.walk_secs = walk_from.map_or(0.0, |w| (now - w).as_secs_f64());
                }
                break;
            }
        }
        for b in bots.iter_mut() {
            // The client's buffer is its MTU, so poll_transmit cannot refuse it.
            b.tick_arrived = false;
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
        report.refusals_heard += b.refusals_heard;
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
    Ok(bots.into_iter().map(Bot::into_record).collect())
}
