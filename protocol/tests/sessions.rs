//! Session behaviours: handshake, version check, token hook, keepalive,
//! idle timeout, graceful Bye, own-entity inputs, the unacked bound.

use std::time::Duration;

use lockgrid_kernel::{Command, Config, Fix, Move, Pos, Spawn};
use lockgrid_protocol::packet::{encode_packet, MIN_INITIAL_LEN};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientLimits, ClientState, ConnError, ConnId,
    DisconnectReason, Frame, Header, InputEntry, InputFrame, InputRefusal, Instant, Packet,
    PushTickError, Server, ServerConfig, ServerEvent, WorldParams,
};

const SERVER: u32 = 0;
const CLIENT: u32 = 1;

/// One server, one client, a perfect network with 10 ms latency, a virtual clock.
struct Pair {
    now: Instant,
    server: Server<u32>,
    client: Client<u32>,
    /// (deliver at, to, bytes)
    wire: Vec<(Instant, u32, Vec<u8>)>,
    cut_uplink: bool,
    server_events: Vec<ServerEvent<u32>>,
    client_events: Vec<ClientEvent>,
}

impl Pair {
    fn new(server_config: ServerConfig, token: &[u8]) -> Pair {
        let now = Instant::from_micros(1_000);
        Pair {
            now,
            server: Server::new(server_config, WorldParams::from(&Config::default())).unwrap(),
            client: Client::new(
                ClientConfig::default(),
                SERVER,
                token,
                token.len() as u64,
                now,
            )
            .unwrap(),
            wire: Vec::new(),
            cut_uplink: false,
            server_events: Vec::new(),
            client_events: Vec::new(),
        }
    }

    /// Runs the pair for `d` of virtual time; the host accepts every Hello as entity 7.
    fn run(&mut self, d: Duration, accept: bool) {
        let end = self.now + d;
        let mut buf = vec![0u8; 1200];
        loop {
            let mut i = 0;
            while i < self.wire.len() {
                if self.wire[i].0 <= self.now {
                    let (_, to, bytes) = self.wire.remove(i);
                    if to == SERVER {
                        self.server.handle_datagram(self.now, CLIENT, &bytes);
                    } else {
                        self.client.handle_datagram(self.now, SERVER, &bytes);
                    }
                } else {
                    i += 1;
                }
            }
            if self.server.poll_timeout().is_some_and(|t| t <= self.now) {
                self.server.handle_timeout(self.now);
            }
            if self.client.poll_timeout().is_some_and(|t| t <= self.now) {
                self.client.handle_timeout(self.now);
            }
            while let Some(e) = self.server.poll_event() {
                if let (true, ServerEvent::Connecting { conn, .. }) = (accept, &e) {
                    self.server
                        .accept(
                            *conn,
                            &Spawn::npc(7, Pos::from_ints(0, 0)),
                            ClientLimits::NONE,
                        )
                        .unwrap();
                }
                self.server_events.push(e);
            }
            while let Some(e) = self.client.poll_event() {
                self.client_events.push(e);
            }
            while let Some(t) = self.server.poll_transmit(self.now, &mut buf).unwrap() {
                self.wire.push((
                    self.now + Duration::from_millis(10),
                    t.destination,
                    buf[..t.len].to_vec(),
                ));
            }
            while let Some(t) = self.client.poll_transmit(self.now, &mut buf).unwrap() {
                if !self.cut_uplink {
                    self.wire.push((
                        self.now + Duration::from_millis(10),
                        SERVER,
                        buf[..t.len].to_vec(),
                    ));
                }
            }
            if self.now >= end {
                break;
            }
            let mut next = end;
            for w in &self.wire {
                next = next.min(w.0);
            }
            for t in [self.server.poll_timeout(), self.client.poll_timeout()]
                .into_iter()
                .flatten()
            {
                next = next.min(t);
            }
            self.now = next.max(self.now + Duration::from_micros(10));
        }
    }

    fn conn(&self) -> ConnId {
        self.server.connections().next().expect("a connection")
    }

    fn client_disconnect(&self) -> Option<DisconnectReason> {
        self.client_events.iter().find_map(|e| match e {
            ClientEvent::Disconnected { reason } => Some(*reason),
            _ => None,
        })
    }

    fn server_disconnect(&self) -> Option<DisconnectReason> {
        self.server_events.iter().find_map(|e| match e {
            ServerEvent::Disconnected { reason, .. } => Some(*reason),
            _ => None,
        })
    }
}

fn hello_bytes(header_version: u8, hello_version: u8) -> Vec<u8> {
    let mut buf = vec![0u8; 128];
    let mut n = encode_packet(
        &Header {
            seq: 1,
            ..Header::default()
        },
        &[Frame::Hello {
            version: hello_version,
            nonce: 1,
            token: b"x",
        }],
        &mut buf,
    )
    .unwrap();
    n = n.max(MIN_INITIAL_LEN);
    buf[2] = header_version;
    buf.truncate(n);
    buf
}

fn server() -> Server<u32> {
    Server::new(
        ServerConfig::default(),
        WorldParams::from(&Config::default()),
    )
    .unwrap()
}

fn only_reply(server: &mut Server<u32>) -> Option<DisconnectReason> {
    let mut buf = vec![0u8; 1200];
    let t = server.poll_transmit(Instant::ZERO, &mut buf).unwrap()?;
    assert!(server
        .poll_transmit(Instant::ZERO, &mut buf)
        .unwrap()
        .is_none());
    let p = Packet::decode(&buf[..t.len]).unwrap();
    match p.frames.as_slice() {
        [Frame::Disconnect { reason }] => Some(*reason),
        other => panic!("expected a lone Disconnect, got {other:?}"),
    }
}

#[test]
fn wrong_version_gets_a_disconnect_never_silence() {
    let mut s = server();
    s.handle_datagram(Instant::ZERO, 5, &hello_bytes(3, 3));
    assert_eq!(only_reply(&mut s), Some(DisconnectReason::VersionMismatch));
    // A version 1 client hears it too.
    s.handle_datagram(Instant::ZERO, 5, &hello_bytes(1, 1));
    assert_eq!(only_reply(&mut s), Some(DisconnectReason::VersionMismatch));
    s.handle_datagram(Instant::ZERO, 5, &hello_bytes(2, 9));
    assert_eq!(only_reply(&mut s), Some(DisconnectReason::VersionMismatch));
    assert!(s.poll_event().is_none(), "no connection was opened");
    // Too short to answer without amplifying: dropped and counted.
    s.handle_datagram(Instant::ZERO, 5, b"LG\x02");
    assert_eq!(only_reply(&mut s), None);
    assert_eq!(s.stats().unknown_dropped, 1);
}

#[test]
fn a_client_facing_another_version_reports_it() {
    let now = Instant::from_micros(1);
    let mut c = Client::new(ClientConfig::default(), SERVER, b"t", 1, now).unwrap();
    let mut reply = vec![0u8; 32];
    let n = encode_packet(
        &Header::default(),
        &[Frame::Disconnect {
            reason: DisconnectReason::VersionMismatch,
        }],
        &mut reply,
    )
    .unwrap();
    reply[2] = 9;
    c.handle_datagram(now, SERVER, &reply[..n]);
    assert_eq!(
        c.state(),
        ClientState::Closed(DisconnectReason::VersionMismatch)
    );
    assert_eq!(
        c.poll_event(),
        Some(ClientEvent::Disconnected {
            reason: DisconnectReason::VersionMismatch
        })
    );
}

#[test]
fn handshake_welcome_and_token_hook() {
    let mut p = Pair::new(ServerConfig::default(), b"good");
    p.run(Duration::from_millis(100), true);
    assert!(
        matches!(&p.server_events[0], ServerEvent::Connecting { token, from: CLIENT, .. } if token == b"good")
    );
    assert_eq!(p.client.state(), ClientState::Connected);
    assert_eq!(p.client.entity(), Some(7));
    let Some(ClientEvent::Connected(w)) = p.client_events.first() else {
        panic!("expected Connected");
    };
    assert_eq!(
        (w.conn_id, w.tick, w.tick_interval_us),
        (p.conn().0, 0, 50_000)
    );
    assert_eq!(
        p.server.accept(
            p.conn(),
            &Spawn::npc(8, Pos::from_ints(0, 0)),
            ClientLimits::NONE
        ),
        Err(ConnError::AlreadyAccepted)
    );

    let mut q = Pair::new(ServerConfig::default(), b"bad");
    q.run(Duration::from_millis(50), false);
    let conn = q.conn();
    q.server
        .reject(conn, DisconnectReason::TokenRejected)
        .unwrap();
    q.run(Duration::from_millis(100), false);
    assert_eq!(q.client_disconnect(), Some(DisconnectReason::TokenRejected));
    assert_eq!(q.server_disconnect(), Some(DisconnectReason::TokenRejected));
}

#[test]
fn keepalive_holds_a_quiet_connection_and_idle_timeout_ends_a_dead_one() {
    let mut p = Pair::new(ServerConfig::default(), b"t");
    p.run(Duration::from_secs(60), true);
    assert_eq!(
        p.client.state(),
        ClientState::Connected,
        "pings keep a tickless connection up"
    );
    assert_eq!(p.server.connections().count(), 1);
    p.cut_uplink = true;
    p.run(Duration::from_secs(11), true);
    assert_eq!(p.server_disconnect(), Some(DisconnectReason::IdleTimeout));
    assert!(matches!(
        p.server_events.last(),
        Some(ServerEvent::Disconnected {
            entity: Some(7),
            ..
        })
    ));
}

#[test]
fn bye_closes_both_ends_gracefully() {
    let mut p = Pair::new(ServerConfig::default(), b"t");
    p.run(Duration::from_millis(100), true);
    p.client.close(p.now);
    p.run(Duration::from_millis(100), true);
    assert_eq!(p.server_disconnect(), Some(DisconnectReason::Closed));
    assert_eq!(p.client_disconnect(), Some(DisconnectReason::Closed));
    assert_eq!(p.server.connections().count(), 0);
}

#[test]
fn a_client_can_only_act_for_its_own_entity() {
    let mut p = Pair::new(ServerConfig::default(), b"t");
    p.run(Duration::from_millis(100), true);
    let mv = |id| {
        Command::Move(Move {
            id,
            pos: Pos::from_ints(1, 1),
            dir: 0,
            speed: Fix::ZERO,
        })
    };
    assert!(
        p.client.send_input(1, &[mv(8)]).is_err(),
        "the client refuses foreign commands itself"
    );
    // A hand-made Input naming another entity: the server drops and counts it.
    let conn = p.conn();
    let input = Frame::Input(InputFrame {
        first_seq: 0,
        entries: vec![InputEntry {
            tick: 1,
            commands: vec![mv(7), mv(8), mv(9)],
        }],
    });
    let mut buf = vec![0u8; 256];
    let n = encode_packet(
        &Header {
            conn_id: conn.0,
            seq: 1000,
            ..Header::default()
        },
        &[input],
        &mut buf,
    )
    .unwrap();
    p.server.handle_datagram(p.now, CLIENT, &buf[..n]);
    // Acting for another entity taints the whole input: nothing of it
    // reaches the host, and the client hears each command refused.
    assert!(
        p.server.poll_event().is_none(),
        "a tainted input was delivered"
    );
    assert_eq!(p.server.conn_stats(conn).unwrap().foreign_commands, 2);
    // The server's total counts them too.
    assert_eq!(p.server.stats().foreign_commands, 2);
    p.run(Duration::from_millis(100), true);
    let told: Vec<_> = p
        .client_events
        .iter()
        .filter_map(|ev| match ev {
            ClientEvent::Refused(r) => Some((r.seq, r.index, r.reason)),
            _ => None,
        })
        .collect();
    let not_yours = InputRefusal::NotYours;
    assert_eq!(
        told,
        vec![(0, 0, not_yours), (0, 1, not_yours), (0, 2, not_yours)]
    );
}

#[test]
fn inputs_arrive_once_in_tick_order() {
    let mut p = Pair::new(ServerConfig::default(), b"t");
    p.run(Duration::from_millis(100), true);
    let mv = |x| {
        Command::Move(Move {
            id: 7,
            pos: Pos::from_ints(x, 1),
            dir: 0,
            speed: Fix::ZERO,
        })
    };
    for t in [3, 4, 9] {
        p.client.send_input(t, &[mv(t as i32)]).unwrap();
    }
    assert!(p.client.send_input(9, &[]).is_err(), "ticks must increase");
    p.run(Duration::from_millis(300), true);
    let got: Vec<u64> = p
        .server_events
        .iter()
        .filter_map(|e| match e {
            ServerEvent::Input { tick, .. } => Some(*tick),
            _ => None,
        })
        .collect();
    assert_eq!(got, [3, 4, 9]);
    assert_eq!(p.client.unacked_inputs(), 0);
}

#[test]
fn a_client_that_stops_acking_is_disconnected_not_buffered_forever() {
    let config = ServerConfig {
        max_unacked_ticks: 20,
        idle_timeout: Duration::from_secs(600),
        ..ServerConfig::default()
    };
    let mut p = Pair::new(config, b"t");
    p.run(Duration::from_millis(100), true);
    assert_eq!(
        p.server.stats().pool_grown,
        0,
        "the connection brought its share"
    );
    p.cut_uplink = true;
    for tick in 1..=25 {
        p.server.push_tick(p.now, tick, 0, &[]).unwrap();
        p.run(Duration::from_millis(50), true);
        if let Some(n) = p
            .server
            .connections()
            .next()
            .and_then(|c| p.server.unacked_ticks(c))
        {
            assert!(n <= 20, "pending ticks stay bounded, got {n}");
        }
    }
    assert_eq!(p.server_disconnect(), Some(DisconnectReason::TooFarBehind));
    // 20 pending ticks against the 8 the connection brought: the pools
    // grew, and say so.
    let grown = p.server.stats().pool_grown;
    assert!(grown >= 12, "pool growth is counted: {grown}");
}

#[test]
fn ticks_must_be_pushed_in_order_and_in_contract_order() {
    let mut s = server();
    s.push_tick(Instant::ZERO, 5, 0, &[]).unwrap();
    assert_eq!(
        s.push_tick(Instant::ZERO, 7, 0, &[]),
        Err(PushTickError::TickOutOfOrder { expected: 6 })
    );
    let leave = |o, s| lockgrid_kernel::Event::Leave {
        observer: o,
        subject: s,
    };
    assert_eq!(
        s.push_tick(Instant::ZERO, 6, 0, &[leave(2, 1), leave(1, 1)]),
        Err(PushTickError::EventsOutOfOrder)
    );
    assert_eq!(s.push_tick(Instant::ZERO, 6, 0, &[leave(1, 1)]), Ok(()));
}
