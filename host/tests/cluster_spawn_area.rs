//! A cluster node gives its clients what a single node would for the same
//! flags: with `--spawn-area 2`, a client spawns in the square two cells
//! across around the world's centre, where `spawn_point_in` says, not in
//! the default square of eight.

mod cluster_common;

use std::net::UdpSocket;
use std::time::{Duration, Instant as StdInstant};

use cluster_common::*;
use lockgrid_host::serve::rules::spawn_point_in;
use lockgrid_kernel::{Fix, Pos};
use lockgrid_protocol::{Client, ClientConfig, ClientEvent, Instant, Welcome};

/// Connects a client to `node` and returns its Welcome.
fn welcome_from(node: std::net::SocketAddr, name: &[u8]) -> Welcome {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_nonblocking(true).unwrap();
    let epoch = StdInstant::now();
    let now = || Instant::from_micros(epoch.elapsed().as_micros() as u64);
    let mut client = Client::new(ClientConfig::default(), node, name, 7, now()).unwrap();
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
                ClientEvent::Connected(w) => return w,
                ClientEvent::Disconnected { reason } => panic!("disconnected: {reason}"),
                _ => {}
            }
        }
        let mut out = [0u8; 1500];
        while let Ok(Some(t)) = client.poll_transmit(now(), &mut out) {
            let _ = socket.send_to(&out[..t.len], t.destination);
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    panic!("the client never connected to {node}");
}

#[test]
fn a_cluster_nodes_clients_spawn_in_its_spawn_area() {
    let Some(nats) = nats_server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let servers = start_nats(&nats, &tmp.path().join("nats"), 1);
    let url = servers[0].url();
    let node = start_node(
        &url,
        "spawns",
        &tmp.path().join("a"),
        &["--spawn-area", "2"],
    );
    let deadline = StdInstant::now() + Duration::from_secs(20);
    while !node.leading() {
        assert!(StdInstant::now() < deadline, "the node never led");
        std::thread::sleep(Duration::from_millis(50));
    }
    for name in ["ada", "bob", "cy"] {
        let w = welcome_from(node.addr, name.as_bytes());
        let narrow = spawn_point_in(&w.world, w.entity, 2);
        let wide = spawn_point_in(&w.world, w.entity, 8);
        assert_eq!(
            w.spawn.pos, narrow,
            "{name} spawns where --spawn-area 2 says"
        );
        // The default square would (nearly always) have put it elsewhere.
        if narrow != wide {
            assert_ne!(w.spawn.pos, wide);
        }
        let (centre, cell) = (Pos::from_ints(3_200, 3_200), Fix::from_num(100));
        assert!(
            (w.spawn.pos.x - centre.x).abs() <= cell && (w.spawn.pos.y - centre.y).abs() <= cell,
            "{name} at {:?}, within a cell of the centre",
            w.spawn.pos
        );
    }
}
