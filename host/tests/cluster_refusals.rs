//! A refusal reaches a client of a follower as it does on one node: a
//! Refused frame naming the input and the reason, and the input counts as
//! acknowledged (it was decided, not lost). Here a client of the
//! following node sends a move far beyond the max speed and hears
//! `too_fast`; the move is in no tick of the stream.

mod cluster_common;

use std::net::UdpSocket;
use std::time::{Duration, Instant as StdInstant};

use cluster_common::*;
use lockgrid_host::journal::JournalReader;
use lockgrid_kernel::{Command, Fix, Move, Pos};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, ClientState, InputRefusal, Instant, RefusedInput,
};

#[test]
fn a_followers_client_hears_its_move_refused_as_too_fast() {
    let Some(nats) = nats_server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let servers = start_nats(&nats, &tmp.path().join("nats"), 1);
    let url = servers[0].url();
    let world = "refusals";
    let mut leader = start_node(&url, world, &tmp.path().join("a"), &["--npcs", "3"]);
    let deadline = StdInstant::now() + Duration::from_secs(20);
    while !leader.leading() {
        assert!(StdInstant::now() < deadline, "the first node never led");
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut follower = start_node(&url, world, &tmp.path().join("b"), &["--npcs", "3"]);

    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_nonblocking(true).unwrap();
    let epoch = StdInstant::now();
    let now = || Instant::from_micros(epoch.elapsed().as_micros() as u64);
    let mut client =
        Client::new(ClientConfig::default(), follower.addr, b"speedy", 7, now()).unwrap();
    let mut spawn: Option<Pos> = None;
    let mut refused: Vec<RefusedInput> = Vec::new();
    let mut sent: Option<Move> = None;
    let mut buf = [0u8; 2048];
    let deadline = StdInstant::now() + Duration::from_secs(20);
    while StdInstant::now() < deadline {
        while let Ok((n, from)) = socket.recv_from(&mut buf) {
            client.handle_datagram(now(), from, &buf[..n]);
        }
        if client.poll_timeout().is_some_and(|t| t <= now()) {
            client.handle_timeout(now());
        }
        while let Some(ev) = client.poll_event() {
            match ev {
                ClientEvent::Connected(w) => spawn = Some(w.spawn.pos),
                ClientEvent::Refused(r) => refused.push(r),
                ClientEvent::Disconnected { reason } => panic!("disconnected: {reason}"),
                ClientEvent::Tick { .. } => {}
            }
        }
        if let (Some(pos), None) = (spawn, sent) {
            if client.applied_tick() > 0 {
                // 500 units at once, with 200 a second allowed and a
                // second's burst: too fast.
                let m = Move {
                    id: client.entity().expect("entity"),
                    pos: Pos::new(pos.x + Fix::from_num(500), pos.y),
                    dir: 0,
                    speed: Fix::from_num(4),
                };
                client
                    .send_input(client.applied_tick() + 1, &[Command::Move(m)])
                    .expect("input");
                sent = Some(m);
            }
        }
        let mut out = [0u8; 1500];
        while let Ok(Some(t)) = client.poll_transmit(now(), &mut out) {
            let _ = socket.send_to(&out[..t.len], t.destination);
        }
        if !refused.is_empty() && client.unacked_inputs() == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    assert_eq!(client.state(), ClientState::Connected);
    assert!(sent.is_some(), "the client never connected to the follower");
    assert!(
        !follower.leading(),
        "the second node must follow for this test"
    );
    assert_eq!(
        refused,
        vec![RefusedInput {
            seq: 0,
            index: 0,
            reason: InputRefusal::TooFast
        }],
        "the follower's client hears its move refused"
    );
    assert_eq!(
        client.unacked_inputs(),
        0,
        "a refused input is acknowledged"
    );

    // The refused move is in no tick of the stream.
    leader.kill();
    follower.kill();
    let export = tmp.path().join("export");
    let (ok, out, err) = lockgrid(&[
        "replay",
        &format!("{url}/{world}"),
        "--export",
        export.to_str().unwrap(),
    ]);
    assert!(ok, "export fails: {out}{err}");
    let mut reader = JournalReader::open(&export.join("journal.lgj")).expect("exported journal");
    let sent = sent.unwrap();
    while let Some(r) = reader.next_record().expect("exported journal reads") {
        assert!(
            !r.commands.contains(&Command::Move(sent)),
            "the refused move is in tick {}",
            r.tick
        );
    }
}
