//! The server's timers against a scan of every connection: whatever the
//! clients, the network and the host do, `poll_timeout` answers what
//! computing every connection's deadlines from its state answers, and
//! `handle_timeout` leaves no idle, handshake or loss deadline passed.
//! Every `poll_transmit` here also checks, by the server's debug
//! assertions, its ready queue against the same kind of scan: a call that
//! finds nothing to send leaves no connection with something to send, and
//! each connection's count of unsent parts matches its parts.

use alloc::collections::BTreeMap;
use alloc::vec;
use alloc::vec::Vec;
use core::time::Duration;

use lockgrid_kernel::{Command, Config, Fix, Move, Pos, Spawn};
use proptest::prelude::*;

use super::{ConnId, Server, ServerEvent};
use crate::{Client, ClientConfig, ClientLimits, InputRefusal, Instant, ServerConfig, WorldParams};

/// Client addresses are `0..CLIENTS`.
const CLIENTS: usize = 5;

#[derive(Clone, Debug)]
enum Op {
    /// A new client at an address says Hello (replacing any client there).
    Hello(usize),
    /// A client sends what it has; datagrams whose bit is set are lost.
    ClientSend(usize, u8),
    /// A client queues a Move for its entity.
    Input(usize),
    /// A client leaves with a Bye.
    Bye(usize),
    /// A client's own timers.
    ClientTimeout(usize),
    /// The server sends what it has; datagrams whose bit is set are lost.
    ServerSend(u32),
    /// The host drains events: accepts (or rejects) Connecting, refuses
    /// the first command of some inputs.
    Host { accept: bool, refuse: bool },
    /// The host kicks the connection at an address.
    Kick(usize),
    /// A tick with no events.
    Tick,
    /// Time passes (microseconds).
    Wait(u64),
    /// The server's timers run.
    Timeout,
}

fn op() -> impl Strategy<Value = Op> {
    let k = 0..CLIENTS;
    prop_oneof![
        1 => k.clone().prop_map(Op::Hello),
        4 => (k.clone(), any::<u8>()).prop_map(|(k, d)| Op::ClientSend(k, d)),
        3 => k.clone().prop_map(Op::Input),
        1 => k.clone().prop_map(Op::Bye),
        1 => k.clone().prop_map(Op::ClientTimeout),
        4 => (any::<u32>()).prop_map(|d| Op::ServerSend(d & 0x5555_5555 & d.rotate_left(7))),
        3 => (any::<bool>(), any::<bool>()).prop_map(|(a, r)| Op::Host { accept: a || r, refuse: r }),
        1 => k.prop_map(Op::Kick),
        3 => Just(Op::Tick),
        4 => prop_oneof![0..30_000u64, 0..400_000u64, 0..3_000_000u64].prop_map(Op::Wait),
        3 => Just(Op::Timeout),
    ]
}

struct Net {
    server: Server<u32>,
    clients: Vec<Option<Client<u32>>>,
    /// The connection the host heard of at each address.
    conns: BTreeMap<u32, ConnId>,
    now: u64,
    tick: u64,
    input_tick: u64,
    nonce: u64,
    buf: Vec<u8>,
}

impl Net {
    fn new(config: ServerConfig) -> Self {
        let world = Config::default();
        Net {
            server: Server::new(config, WorldParams::from(&world)).expect("valid config"),
            clients: (0..CLIENTS).map(|_| None).collect(),
            conns: BTreeMap::new(),
            now: 1,
            tick: 0,
            input_tick: 0,
            nonce: 0,
            buf: vec![0u8; 2048],
        }
    }

    fn now(&self) -> Instant {
        Instant::from_micros(self.now)
    }

    fn client_send(&mut self, k: usize, lost: u8) {
        let now = self.now();
        let Some(c) = self.clients[k].as_mut() else {
            return;
        };
        let mut n = 0;
        while let Some(tx) = c.poll_transmit(now, &mut self.buf).expect("mtu buffer") {
            if n >= 8 || lost >> n & 1 == 0 {
                self.server
                    .handle_datagram(now, k as u32, &self.buf[..tx.len]);
            }
            n += 1;
        }
    }

    fn apply(&mut self, op: Op) {
        let now = self.now();
        match op {
            Op::Hello(k) => {
                self.nonce += 1;
                let c = Client::new(ClientConfig::default(), 0, b"", self.nonce, now)
                    .expect("valid config");
                self.clients[k] = Some(c);
                self.client_send(k, 0);
            }
            Op::ClientSend(k, lost) => self.client_send(k, lost),
            Op::Input(k) => {
                if let Some(c) = self.clients[k].as_mut() {
                    if let Some(id) = c.entity() {
                        let m = Move {
                            id,
                            pos: Pos::from_ints(10, 10),
                            dir: 0,
                            speed: Fix::ZERO,
                        };
                        self.input_tick += 1;
                        // A full queue (nothing acknowledged) only skips it.
                        let _ = c.send_input(self.input_tick, &[Command::Move(m)]);
                    }
                }
            }
            Op::Bye(k) => {
                if let Some(c) = self.clients[k].as_mut() {
                    c.close(now);
                }
                self.client_send(k, 0);
            }
            Op::ClientTimeout(k) => {
                if let Some(c) = self.clients[k].as_mut() {
                    c.handle_timeout(now);
                }
            }
            Op::ServerSend(lost) => {
                let mut n = 0;
                while let Some(tx) = self
                    .server
                    .poll_transmit(now, &mut self.buf)
                    .expect("mtu buffer")
                {
                    let to = tx.destination as usize;
                    if n >= 32 || lost >> n & 1 == 0 {
                        if let Some(c) = self.clients.get_mut(to).and_then(Option::as_mut) {
                            c.handle_datagram(now, 0, &self.buf[..tx.len]);
                            while c.poll_event().is_some() {}
                        }
                    }
                    n += 1;
                }
            }
            Op::Host { accept, refuse } => {
                while let Some(e) = self.server.poll_event() {
                    match e {
                        ServerEvent::Connecting { conn, from, .. } => {
                            self.conns.insert(from, conn);
                            if accept {
                                let spawn = Spawn::observer(
                                    100 + u64::from(from) + 1000 * self.nonce,
                                    Pos::from_ints(10, 10),
                                    Fix::from_num(50),
                                );
                                let _ = self.server.accept(conn, &spawn, ClientLimits::NONE);
                            } else {
                                let _ = self.server.reject(conn, crate::DisconnectReason::Kicked);
                            }
                        }
                        ServerEvent::Input { conn, seq, .. } => {
                            if refuse {
                                let _ =
                                    self.server
                                        .refuse_input(conn, seq, 0, InputRefusal::NotYours);
                            }
                        }
                        ServerEvent::Disconnected { conn, .. } => {
                            self.conns.retain(|_, c| *c != conn);
                        }
                    }
                }
            }
            Op::Kick(k) => {
                if let Some(&conn) = self.conns.get(&(k as u32)) {
                    let _ = self.server.disconnect(conn);
                }
            }
            Op::Tick => {
                self.tick += 1;
                self.server
                    .push_tick(now, self.tick, self.tick, &[])
                    .expect("ticks in order");
            }
            Op::Wait(us) => self.now += us,
            Op::Timeout => self.server.handle_timeout(now),
        }
    }

    /// After `handle_timeout(now)`: no connection has an idle, handshake
    /// or loss deadline at or before `now`.
    fn nothing_overdue(&self) -> bool {
        let now = self.server.now;
        let cfg = &self.server.config;
        self.server.conns.values().all(|c| {
            let rto = c.rtt.rto(cfg.max_ack_delay);
            c.last_recv + cfg.idle_timeout > now
                && (c.entity.is_some() || c.created + cfg.handshake_timeout > now)
                && c.sent.loss_deadline(rto).is_none_or(|t| t > now)
        })
    }
}

fn config() -> impl Strategy<Value = ServerConfig> {
    (200..3_000u64, 100..2_000u64, 1..60u64, 5..300u64).prop_map(|(idle, hs, ack, rtt)| {
        ServerConfig {
            idle_timeout: Duration::from_millis(idle),
            handshake_timeout: Duration::from_millis(hs),
            max_ack_delay: Duration::from_millis(ack),
            initial_rtt: Duration::from_millis(rtt),
            max_unacked_ticks: 16,
            ..ServerConfig::default()
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn poll_timeout_is_the_scan_of_every_connection(
        config in config(),
        ops in proptest::collection::vec(op(), 1..300),
    ) {
        let mut net = Net::new(config);
        for op in ops {
            let timeout = matches!(op, Op::Timeout);
            net.apply(op);
            prop_assert_eq!(net.server.timers.earliest(), net.server.scan_timeout());
            if timeout {
                prop_assert!(net.nothing_overdue());
            }
        }
    }
}
