//! A node that loses NATS tells its clients promptly: with the only NATS
//! server killed, the leader and a follower each say goodbye
//! (`shutting_down`) to their clients, well before the clients' own idle
//! timeout, and exit with an error naming NATS.

mod cluster_common;

use std::time::{Duration, Instant as StdInstant};

use cluster_common::*;
use lockgrid_protocol::DisconnectReason;

#[test]
fn a_node_that_loses_nats_says_goodbye_to_its_clients() {
    let Some(nats) = nats_server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mut servers = start_nats(&nats, &tmp.path().join("nats"), 1);
    let url = servers[0].url();
    let mut nodes = [
        start_node(&url, "lost", &tmp.path().join("a"), &[]),
        start_node(&url, "lost", &tmp.path().join("b"), &[]),
    ];
    let epoch = StdInstant::now();
    let mut walkers: Vec<Walker> = nodes
        .iter()
        .map(|n| Walker::new(vec![n.addr], 0, epoch))
        .collect();
    run_walkers(&mut walkers, Duration::from_secs(3), Duration::ZERO, |_| {});
    for (i, w) in walkers.iter().enumerate() {
        assert!(w.connected(), "client {i} connected before the kill");
        assert!(
            w.goodbyes.is_empty(),
            "client {i} was not told anything yet"
        );
    }

    servers[0].kill();
    let killed = StdInstant::now();
    // The clients keep walking (their inputs are never acknowledged now)
    // and never give up on their own: only the node's word counts.
    let deadline = killed + Duration::from_secs(30);
    while walkers.iter().any(|w| w.goodbyes.is_empty()) && StdInstant::now() < deadline {
        for w in &mut walkers {
            w.turn(true, Duration::from_secs(3600));
        }
        std::thread::sleep(Duration::from_millis(3));
    }
    for (i, w) in walkers.iter().enumerate() {
        let (at, reason) = *w
            .goodbyes
            .first()
            .unwrap_or_else(|| panic!("client {i} was never told its node lost NATS"));
        let after = at - killed;
        eprintln!(
            "client {i}: {reason:?} {:.1} s after the NATS server's kill",
            after.as_secs_f64()
        );
        assert_eq!(
            reason,
            DisconnectReason::ShuttingDown,
            "client {i} was told by its node, not by its own idle timeout"
        );
        // The node's bound is 3 s without a connection; before it, a
        // follower said nothing at all and a leader ~12 s later.
        assert!(
            after < Duration::from_secs(8),
            "client {i} told only {after:?} after the kill"
        );
    }
    for (i, n) in nodes.iter_mut().enumerate() {
        let deadline = StdInstant::now() + Duration::from_secs(10);
        let status = loop {
            if let Ok(Some(s)) = n.child.try_wait() {
                break s;
            }
            assert!(StdInstant::now() < deadline, "node {i} did not exit");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(!status.success(), "node {i} exits with an error: {status}");
    }
}
