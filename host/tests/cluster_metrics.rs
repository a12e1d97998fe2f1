//! `lockgrid serve --cluster … --metrics ADDR`: two nodes on one NATS
//! server, a walking client on the follower; both nodes' metrics are
//! scraped while it walks. Each serves the single node's metrics and the
//! cluster's: the leader leads, appends and takes the follower's batches;
//! the follower follows, forwards its client's commands and serves it.

mod cluster_common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant as StdInstant};

use cluster_common::*;

/// The node's metrics address, from its stdout.
fn metrics_addr(node: &LgNode) -> SocketAddr {
    let deadline = StdInstant::now() + Duration::from_secs(10);
    loop {
        let found = node.lines.lock().unwrap().iter().find_map(|(_, l)| {
            l.strip_prefix("lockgrid serve: metrics on http://")?
                .strip_suffix("/metrics")?
                .parse()
                .ok()
        });
        if let Some(addr) = found {
            return addr;
        }
        assert!(StdInstant::now() < deadline, "no metrics line");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `GET /metrics`; every sample line as `name{labels}` → value.
fn scrape(addr: SocketAddr) -> BTreeMap<String, f64> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.contains(" 200 "), "{head}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (name, value) = l.rsplit_once(' ').expect("name value");
            (name.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

fn get(m: &BTreeMap<String, f64>, name: &str) -> f64 {
    *m.get(name).unwrap_or_else(|| panic!("no {name} in {m:#?}"))
}

#[test]
fn both_nodes_serve_their_metrics_and_the_clusters() {
    let Some(nats) = nats_server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let servers = start_nats(&nats, &tmp.path().join("nats"), 1);
    let url = servers[0].url();
    let world = "metrics";
    let extra = [
        "--npcs",
        "4",
        "--snapshot-every",
        "20",
        "--metrics",
        "127.0.0.1:0",
    ];
    let leader = start_node(&url, world, &tmp.path().join("a"), &extra);
    let deadline = StdInstant::now() + Duration::from_secs(20);
    while !leader.leading() {
        assert!(StdInstant::now() < deadline, "the first node never led");
        std::thread::sleep(Duration::from_millis(50));
    }
    let follower = start_node(&url, world, &tmp.path().join("b"), &extra);
    let (lm, fm) = (metrics_addr(&leader), metrics_addr(&follower));

    let epoch = StdInstant::now();
    let mut walkers = vec![Walker::named(vec![follower.addr], 0, epoch, b"metered")];
    run_walkers(&mut walkers, Duration::from_secs(3), Duration::ZERO, |_| {});
    // Scraped while the client is connected.
    let (l, f) = (scrape(lm), scrape(fm));
    assert!(walkers[0].connected() && walkers[0].moves > 10);
    assert!(!follower.leading());

    // The single node's metrics, on both.
    for m in [&l, &f] {
        for name in [
            "lockgrid_ticks_total",
            "lockgrid_tick",
            "lockgrid_entities",
            "lockgrid_tick_duration_seconds_count",
            "lockgrid_events_total{kind=\"enter\"}",
            "lockgrid_refusals_total{reason=\"too_fast\"}",
        ] {
            get(m, name);
        }
        assert!(get(m, "lockgrid_ticks_total") > 20.0);
        assert!(get(m, "lockgrid_tick") >= get(m, "lockgrid_cluster_applied_tick") - 5.0);
        assert!(get(m, "lockgrid_entities") >= 5.0, "4 NPCs and the client");
    }
    // The follower serves the client and forwards its commands.
    assert_eq!(get(&f, "lockgrid_clients"), 1.0);
    assert_eq!(get(&f, "lockgrid_connections_total"), 1.0);
    assert!(get(&f, "lockgrid_packets_in_total") > 10.0);
    assert!(get(&f, "lockgrid_bytes_out_total") > 1000.0);
    assert_eq!(get(&f, "lockgrid_cluster_leading"), 0.0);
    assert_eq!(get(&f, "lockgrid_cluster_ticks_appended_total"), 0.0);
    assert!(get(&f, "lockgrid_cluster_ticks_followed_total") > 20.0);
    assert!(get(&f, "lockgrid_cluster_applied_tick") > 20.0);
    assert!(get(&f, "lockgrid_cluster_batches_forwarded_total") >= 10.0);
    assert!(get(&f, "lockgrid_cluster_commands_forwarded_total") >= 10.0);
    // The leader appends, takes the follower's batches, stores snapshots.
    assert_eq!(get(&l, "lockgrid_clients"), 0.0);
    assert_eq!(get(&l, "lockgrid_cluster_leading"), 1.0);
    assert!(get(&l, "lockgrid_cluster_leads_total") >= 1.0);
    assert!(get(&l, "lockgrid_cluster_ticks_appended_total") > 20.0);
    assert!(get(&l, "lockgrid_cluster_appended_tick") > 20.0);
    assert!(get(&l, "lockgrid_cluster_batches_taken_total") >= 10.0);
    assert!(get(&l, "lockgrid_journal_append_seconds_count") > 20.0);
    assert!(get(&l, "lockgrid_snapshots_written_total") >= 1.0);
    assert_eq!(get(&l, "lockgrid_cluster_lost_appends_total"), 0.0);
}
