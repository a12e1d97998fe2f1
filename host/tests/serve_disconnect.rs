//! A client that says Bye and a client that goes silent both lose their
//! entity: the journal despawns each after it spawned it.

mod serve_common;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant as StdInstant};

use lockgrid_host::journal::JournalReader;
use lockgrid_host::serve::rules::CLIENT_ID_BASE;
use lockgrid_host::store::journal_path;
use lockgrid_kernel::Command;
use lockgrid_protocol::{Client, ClientConfig, ClientState, Instant};
use serve_common::{interrupt, replay_verify, start_serve, wait_bounded, Driven};

/// A client without a name (an empty token): a new entity each connection.
fn connect(server: SocketAddr) -> Driven {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket.set_nonblocking(true).expect("nonblocking");
    let client =
        Client::new(ClientConfig::default(), server, b"", 1, Instant::ZERO).expect("client");
    let mut d = Driven {
        refused: Vec::new(),
        socket,
        client,
        epoch: StdInstant::now(),
    };
    assert!(
        d.pump(Duration::from_secs(10), |c| c.state()
            == ClientState::Connected
            && c.applied_tick() > 0),
        "connects"
    );
    d
}

#[test]
fn bye_and_silence_both_despawn() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let mut served = start_serve(
        &data,
        "127.0.0.1:0",
        &["--client-timeout", "1", "--npcs", "4", "--seconds", "60"],
    );
    let server: SocketAddr = served.addr.parse().expect("address");
    let mut polite = connect(server);
    let silent = connect(server);
    let (polite_id, silent_id) = (
        polite.client.entity().expect("entity"),
        silent.client.entity().expect("entity"),
    );
    assert!(polite_id >= CLIENT_ID_BASE && silent_id >= CLIENT_ID_BASE);
    let now = polite.now();
    polite.client.close(now);
    assert!(
        polite.pump(Duration::from_secs(5), |c| matches!(
            c.state(),
            ClientState::Closed(_)
        )),
        "Bye is confirmed"
    );
    // The silent client is never driven again; the server times it out.
    drop(silent);
    std::thread::sleep(Duration::from_millis(2500));
    interrupt(&served.child);
    let status = wait_bounded(&mut served.child, Duration::from_secs(20));
    assert!(status.success());

    let mut reader = JournalReader::open(&journal_path(&data)).expect("journal");
    let mut spawned = Vec::new();
    let mut despawned = Vec::new();
    while let Some(r) = reader.next_record().expect("readable") {
        for c in &r.commands {
            match c {
                Command::Spawn(s) if s.id >= CLIENT_ID_BASE => spawned.push((s.id, r.tick)),
                Command::Despawn { id } if *id >= CLIENT_ID_BASE => despawned.push((*id, r.tick)),
                _ => {}
            }
        }
    }
    for id in [polite_id, silent_id] {
        let s = spawned.iter().find(|x| x.0 == id).expect("spawned");
        let d = despawned
            .iter()
            .find(|x| x.0 == id)
            .unwrap_or_else(|| panic!("{id} never despawned: {despawned:?}"));
        assert!(d.1 > s.1);
    }
    replay_verify(&data);
}
