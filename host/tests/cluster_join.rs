//! A node joining a running world starts from the newest snapshot in the
//! object store and the stream after it, checks every digest, then serves.

mod cluster_common;

use std::time::Duration;

use cluster_common::*;

#[test]
fn a_joining_node_starts_from_the_newest_snapshot() {
    let Some(nats) = nats_server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let servers = start_nats(&nats, &tmp.path().join("nats"), 1);
    let url = servers[0].url();
    let first = start_node(
        &url,
        "join",
        &tmp.path().join("a"),
        &["--npcs", "6", "--snapshot-every", "20"],
    );
    std::thread::sleep(Duration::from_secs(3));
    let second = start_node(
        &url,
        "join",
        &tmp.path().join("b"),
        &["--npcs", "6", "--snapshot-every", "20"],
    );
    std::thread::sleep(Duration::from_secs(1));
    drop(first);
    drop(second);
    let a = read_digests(&tmp.path().join("a"));
    let b = read_digests(&tmp.path().join("b"));
    let first_of_b = *b.keys().next().expect("the joiner applied ticks");
    assert!(
        first_of_b > 20 && (first_of_b - 1).is_multiple_of(20),
        "the joiner started after a snapshot tick, not at tick {first_of_b}"
    );
    let mut compared = 0;
    for (tick, d) in &b {
        if let Some(other) = a.get(tick) {
            assert_eq!(d, other, "tick {tick}");
            compared += 1;
        }
    }
    assert!(compared > 10, "only {compared} ticks in common");
}
