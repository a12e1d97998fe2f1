//! Figures for BENCHMARKS.md, not assertions (ignored by default; run with
//! `cargo test --release -p lockgrid-host --test cluster_bench -- --ignored --nocapture --test-threads 1`):
//!
//! - input → acknowledgement latency, p50/p99, of walking clients sending
//!   one input at a time: one node journaling with fdatasync per tick, vs a
//!   cluster of 3 nodes on 3 NATS servers (stream with 3 replicas);
//! - the failover gap: SIGKILL of the leading node → the next node's first
//!   append, over 10 kills (the killed node is restarted each time).

mod cluster_common;

use std::time::{Duration, Instant as StdInstant};

use cluster_common::*;

fn quantile(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn latencies(addrs: &[std::net::SocketAddr], clients: usize, secs: u64) -> Vec<Duration> {
    let epoch = StdInstant::now();
    let mut walkers: Vec<Walker> = (0..clients)
        .map(|i| Walker::new(addrs.to_vec(), i % addrs.len(), epoch))
        .collect();
    run_walkers(
        &mut walkers,
        Duration::from_secs(secs),
        Duration::from_secs(1),
        |_| {},
    );
    let mut all: Vec<Duration> = walkers.iter().flat_map(|w| w.latencies.clone()).collect();
    all.sort_unstable();
    all
}

fn print(what: &str, l: &[Duration]) {
    println!(
        "{what:<44} n {:>5}  p50 {:>6.1} ms  p99 {:>6.1} ms  max {:>6.1} ms",
        l.len(),
        quantile(l, 0.5),
        quantile(l, 0.99),
        quantile(l, 1.0)
    );
}

#[test]
#[ignore = "a benchmark: prints figures"]
fn ack_latency_single_node_vs_cluster() {
    let Some(nats) = nats_server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let clients = 30;
    let secs = 15;
    {
        let node = start_serve(&tmp.path().join("single"), &[]);
        let l = latencies(&[node.addr], clients, secs);
        print("1 node, journal fdatasync per tick", &l);
    }
    let servers = start_nats(&nats, &tmp.path().join("nats"), 3);
    let urls: Vec<String> = servers.iter().map(NatsServer::url).collect();
    let nodes: Vec<LgNode> = (0..3)
        .map(|i| {
            let mut mine = urls.clone();
            mine.rotate_left(i);
            start_node(
                &mine.join(","),
                "bench",
                &tmp.path().join(format!("c{i}")),
                &[],
            )
        })
        .collect();
    let leader: Vec<_> = nodes
        .iter()
        .filter(|n| n.leading())
        .map(|n| n.addr)
        .collect();
    let followers: Vec<_> = nodes
        .iter()
        .filter(|n| !n.leading())
        .map(|n| n.addr)
        .collect();
    let all: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    print(
        "3 nodes, 3 NATS (R3), clients on all",
        &latencies(&all, clients, secs),
    );
    if !leader.is_empty() {
        print(
            "  clients on the leader only",
            &latencies(&leader, clients, secs),
        );
    }
    print(
        "  clients on followers only",
        &latencies(&followers, clients, secs),
    );
}

#[test]
#[ignore = "a benchmark: prints figures"]
fn failover_gap_over_ten_kills() {
    let Some(nats) = nats_server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let servers = start_nats(&nats, &tmp.path().join("nats"), 3);
    let urls: Vec<String> = servers.iter().map(NatsServer::url).collect();
    let start = |k: usize| {
        let mut mine = urls.clone();
        mine.rotate_left(k % 3);
        start_node(
            &mine.join(","),
            "gap",
            &tmp.path().join(format!("g{k}")),
            &[],
        )
    };
    let mut nodes: Vec<LgNode> = (0..3).map(start).collect();
    let mut gaps = Vec::new();
    for k in 3..13 {
        let deadline = StdInstant::now() + Duration::from_secs(10);
        let leader = loop {
            if let Some(i) = nodes.iter().position(LgNode::leading) {
                break i;
            }
            assert!(StdInstant::now() < deadline, "no leader");
            std::thread::sleep(Duration::from_millis(20));
        };
        std::thread::sleep(Duration::from_millis(1500));
        nodes[leader].kill();
        let killed = StdInstant::now();
        let deadline = killed + Duration::from_secs(10);
        let gap = loop {
            if let Some(t) = nodes
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != leader)
                .filter_map(|(_, n)| n.led_since(killed))
                .min()
            {
                break t - killed;
            }
            assert!(StdInstant::now() < deadline, "nobody took over");
            std::thread::sleep(Duration::from_millis(5));
        };
        println!(
            "kill {}: next append after {:.0} ms",
            gaps.len() + 1,
            gap.as_secs_f64() * 1e3
        );
        gaps.push(gap);
        nodes[leader] = start(k);
    }
    gaps.sort_unstable();
    print("failover gap (leader SIGKILL → next append)", &gaps);
}
