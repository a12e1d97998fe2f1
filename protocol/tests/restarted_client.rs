//! A client that restarts on the address of a connection the server still
//! holds (a crashed game on the same port, a NAT that reuses a mapping)
//! gets a connection of its own: its Hello with another token is not taken
//! for a retransmission of the old one, the old connection ends, and the
//! new client's inputs reach the host.

mod common;

use std::time::Duration;

use common::lan::Lan;
use lockgrid_protocol::{ClientState, DisconnectReason, ServerEvent};

/// The inputs the host received for `entity`.
fn inputs_for(lan: &Lan, entity: u64) -> usize {
    lan.server_events
        .iter()
        .filter(|e| matches!(e, ServerEvent::Input { entity: id, .. } if *id == entity))
        .count()
}

/// The connections the host heard end, with their entities and reasons.
fn ended(lan: &Lan) -> Vec<(Option<u64>, DisconnectReason)> {
    lan.server_events
        .iter()
        .filter_map(|e| match e {
            ServerEvent::Disconnected { entity, reason, .. } => Some((*entity, *reason)),
            _ => None,
        })
        .collect()
}

/// Runs the client at address 1, then replaces it by a new client at the
/// same address (built by `restart`), and checks the new one connects and
/// is heard while the old connection ends exactly once.
fn restart_on_the_same_address(mut lan: Lan, restart: impl FnOnce(&mut Lan)) {
    lan.run(Duration::from_secs(1));
    let old = lan.clients[&1].entity().expect("first client connected");
    assert!(inputs_for(&lan, old) > 0, "the first client is heard");
    assert!(ended(&lan).is_empty());

    restart(&mut lan);
    lan.run(Duration::from_secs(2));

    let client = &lan.clients[&1];
    assert_eq!(client.state(), ClientState::Connected);
    let new = client.entity().expect("the restarted client connected");
    assert_ne!(new, old);
    assert!(lan.applied(1) > 0, "the restarted client applies ticks");
    assert!(
        inputs_for(&lan, new) > 5,
        "the restarted client's inputs reach the host"
    );
    assert_eq!(ended(&lan), vec![(Some(old), DisconnectReason::Closed)]);
    assert_eq!(lan.server.connections().count(), 1);
    assert_eq!(
        lan.server
            .conn_entity(lan.server.connections().next().unwrap()),
        Some(new)
    );
}

#[test]
fn a_restarted_client_in_clear_gets_a_new_connection() {
    let mut lan = Lan::new(false);
    lan.add_raw_client(1, b"first run");
    restart_on_the_same_address(lan, |lan| lan.add_raw_client(1, b"second run"));
}

#[test]
fn a_restarted_client_with_a_new_token_gets_a_new_connection() {
    let mut lan = Lan::new(true);
    let first = lan.token(4_294_970_001);
    lan.add_client(1, &first);
    restart_on_the_same_address(lan, |lan| {
        let second = lan.token(4_294_970_002);
        lan.add_client(1, &second);
    });
}

#[test]
fn a_repeated_hello_with_the_same_token_keeps_the_connection() {
    let mut lan = Lan::new(false);
    lan.add_raw_client(1, b"same");
    lan.run(Duration::from_secs(1));
    let conn = lan.server.connections().next().expect("connected");
    // The very Hello again (a late duplicate on the network).
    let hello = lan
        .tap
        .iter()
        .find(|d| d.from == 1)
        .expect("the client's Hello")
        .bytes
        .clone();
    lan.inject(1, hello);
    lan.run(Duration::from_secs(1));
    assert_eq!(lan.server.connections().collect::<Vec<_>>(), vec![conn]);
    assert!(ended(&lan).is_empty());
    assert_eq!(lan.clients[&1].state(), ClientState::Connected);
}

#[test]
fn a_bad_token_from_a_held_address_leaves_the_connection_alone() {
    let mut lan = Lan::new(true);
    let token = lan.token(4_294_970_001);
    lan.add_client(1, &token);
    lan.run(Duration::from_secs(1));
    let conn = lan.server.connections().next().expect("connected");
    // A forged token from the same address (a spoofed source) ends nothing.
    lan.add_raw_client(2, &[0xab; 300]);
    lan.run(Duration::from_millis(10));
    let forged = lan
        .tap
        .iter()
        .rev()
        .find(|d| d.from == 2)
        .expect("the forged Hello")
        .bytes
        .clone();
    lan.clients.remove(&2);
    lan.inject(1, forged);
    lan.run(Duration::from_secs(1));
    assert_eq!(lan.server.connections().collect::<Vec<_>>(), vec![conn]);
    assert!(ended(&lan).is_empty());
    assert!(lan.server.stats().tokens_refused >= 1);
    assert_eq!(lan.clients[&1].state(), ClientState::Connected);
}
