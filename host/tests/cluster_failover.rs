//! Three NATS servers in a JetStream cluster, three `lockgrid serve
//! --cluster` nodes (one stepping with 2 threads), walking clients spread
//! over them; the leading node is
//! killed with SIGKILL once, and one NATS server once: the one leading the
//! stream's Raft group, the hard case (the leader's append fails, the
//! stream re-elects for 4-9 s, the consumers that server held are gone).
//! At the end: another node took over and appended; every surviving node
//! is still running, applied the stream to (nearly) its end and computed
//! the same digest as the stream for every tick; `replay nats://… --verify`
//! passes; no move a client saw acknowledged is missing from the stream;
//! every client's final view is the kernel's view of its entity re-derived
//! from the stream. The clients have names and no key: a client of the
//! killed node gets its entity back on the node it moves to.

mod cluster_common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant as StdInstant};

use cluster_common::*;
use lockgrid_host::journal::JournalReader;
use lockgrid_host::node::name_entity;
use lockgrid_kernel::{Command, World};

#[test]
fn leader_and_nats_server_killed_nothing_acknowledged_is_lost() {
    let Some(nats) = nats_server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mut servers = start_nats(&nats, &tmp.path().join("nats"), 3);
    let urls: Vec<String> = servers.iter().map(NatsServer::url).collect();
    let world = "failover";
    let mut nodes = Vec::new();
    for i in 0..3 {
        // Each node lists the servers from another one first.
        let mut mine = urls.clone();
        mine.rotate_left(i);
        // One node steps with 2 threads, its loop on their pool: its
        // digests must be the serial nodes' and the stream's.
        let threads = if i == 1 { "2" } else { "1" };
        let node = start_node(
            &mine.join(","),
            world,
            &tmp.path().join(format!("node{i}")),
            &[
                "--npcs",
                "5",
                "--snapshot-every",
                "100",
                "--threads",
                threads,
            ],
        );
        nodes.push(node);
    }
    let addrs: Vec<_> = nodes.iter().map(|n| n.addr).collect();
    let epoch = StdInstant::now();
    let mut walkers: Vec<Walker> = (0..12)
        .map(|i| {
            Walker::named(
                addrs.clone(),
                i % 3,
                epoch,
                format!("walker-{i}").as_bytes(),
            )
        })
        .collect();

    let mut killed_node: Option<(usize, StdInstant)> = None;
    let mut killed_nats: Option<usize> = None;
    // Walking stops 7 s after the NATS server's kill; the clients then
    // have 7 s more to find a node that answers again after the stream's
    // re-election (up to 9 s with nats-server's Raft) and settle.
    run_walkers(
        &mut walkers,
        Duration::from_secs(14),
        Duration::from_secs(7),
        |elapsed| {
            if killed_node.is_none() && elapsed >= Duration::from_secs(4) {
                if let Some(i) = nodes.iter().position(LgNode::leading) {
                    nodes[i].kill();
                    killed_node = Some((i, StdInstant::now()));
                }
            }
            if killed_nats.is_none() && elapsed >= Duration::from_secs(7) {
                // The server leading the stream (the last one if no server
                // says which).
                let leader = servers[0].stream_leader(&format!("LOCKGRID_{world}"));
                let k = servers
                    .iter()
                    .position(|s| Some(&s.name) == leader.as_ref())
                    .unwrap_or(2);
                eprintln!(
                    "killing NATS server {} (stream leader: {leader:?})",
                    servers[k].name
                );
                servers[k].kill();
                killed_nats = Some(k);
            }
        },
    );
    let (dead, killed_at) = killed_node.expect("a node led before the kill");
    let gap = nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != dead)
        .filter_map(|(_, n)| n.led_since(killed_at))
        .min()
        .map(|t| t - killed_at)
        .expect("another node took over and appended after the leader's kill");
    eprintln!(
        "failover: a new leader appended {:.0} ms after the kill",
        gap.as_secs_f64() * 1e3
    );
    // A name has one entity on every node: each walker's connections all
    // acted for it, those of the killed node's walkers included.
    let mut sessions: Vec<Session> = Vec::new();
    let mut came_back = 0;
    for w in walkers {
        let want = name_entity(&w.name);
        let name = String::from_utf8_lossy(&w.name).into_owned();
        let mine = w.finish();
        for s in &mine {
            assert_eq!(
                Some(s.entity),
                want,
                "{name} acted for another entity on node {}",
                s.node
            );
        }
        let nodes: Vec<usize> = mine.iter().map(|s| s.node).collect();
        if nodes.contains(&dead) && nodes.last() != Some(&dead) {
            came_back += 1;
        }
        eprintln!("{name}: connections on nodes {nodes:?}");
        sessions.extend(mine);
    }
    assert!(
        came_back >= 1,
        "no client of the killed node ended on another node"
    );

    // The survivors never gave up; stop them (by pid) so that their
    // digest files and the stream end together.
    for (i, node) in nodes.iter_mut().enumerate() {
        assert!(
            i == dead || node.running(),
            "survivor {i} exited during the run (its log is above)"
        );
        node.kill();
    }

    // The stream, exported through the surviving NATS servers.
    let killed_nats = killed_nats.expect("a NATS server was killed");
    let live_urls = urls
        .iter()
        .enumerate()
        .filter(|(k, _)| *k != killed_nats)
        .map(|(_, u)| u.as_str())
        .collect::<Vec<_>>()
        .join(",");
    let address = format!("{live_urls}/{world}");
    let address = format!("nats://{}", address.trim_start_matches("nats://"));
    let (ok, out, err) = lockgrid(&["replay", &address, "--verify"]);
    assert!(ok, "replay --verify of the stream fails: {out}{err}");
    let export = tmp.path().join("export");
    let (ok, out, err) = lockgrid(&["replay", &address, "--export", export.to_str().unwrap()]);
    assert!(ok, "export fails: {out}{err}");
    let mut reader = JournalReader::open(&export.join("journal.lgj")).expect("exported journal");
    let config = *reader.config();
    let mut records = Vec::new();
    while let Some(r) = reader.next_record().expect("exported journal reads") {
        records.push(r);
    }
    let last = records.len() as u64;
    // Liveness, loosely: JetStream may take several seconds to elect a
    // new leader for the stream when the killed NATS server held it, and
    // the nodes wait for it (a stall, never a lost tick).
    assert!(last > 100, "only {last} ticks in ~20 s");

    // Every node computed the stream's digest for every tick it applied,
    // and the survivors applied (nearly) all of it.
    let stream: Vec<String> = records
        .iter()
        .map(|r| format!("{:016x}", r.digest))
        .collect();
    for (i, node) in nodes.iter().enumerate() {
        let digests = node.digests();
        for (tick, d) in &digests {
            let want = &stream[(*tick - 1) as usize];
            assert_eq!(d, want, "node {i} tick {tick}: digest {d}, stream {want}");
        }
        if i != dead {
            let top = digests.keys().max().copied().unwrap_or(0);
            assert!(
                top + 40 >= last,
                "survivor {i} stopped following at tick {top} of {last}"
            );
        }
    }

    // No acknowledged move is missing from the stream.
    let moves: BTreeSet<(u64, i64, i64)> = records
        .iter()
        .flat_map(|r| r.commands.iter())
        .filter_map(|c| match c {
            Command::Move(m) => Some((m.id, m.pos.x.to_bits(), m.pos.y.to_bits())),
            _ => None,
        })
        .collect();
    let mut acked = 0;
    let mut missing = Vec::new();
    for s in &sessions {
        for (k, m) in s.acked.iter().enumerate() {
            if !moves.contains(&(m.id, m.pos.x.to_bits(), m.pos.y.to_bits())) {
                missing.push((s.entity, s.node, k, s.acked.len()));
            }
            acked += 1;
        }
    }
    assert!(
        missing.is_empty(),
        "{} of {acked} acknowledged moves are not in the stream (entity, node, index, of; the first 10): {:?}; the killed node was {dead}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
    assert!(acked > 300, "only {acked} acknowledged moves");
    let moved = sessions
        .iter()
        .filter(|s| s.node != dead && s.final_view.is_some())
        .count();
    assert_eq!(moved, 12, "every client ends connected to a surviving node");

    // Each client's final view is its entity's view in the kernel at the
    // tick it last applied, re-derived from the stream.
    let mut world = World::new(config).unwrap();
    let mut events = Vec::new();
    let mut checked = 0;
    for r in &records {
        events.clear();
        world.step(&r.commands, &mut events);
        for s in &sessions {
            if let Some((tick, view)) = &s.final_view {
                if *tick == r.tick {
                    let mut want: Vec<u64> = world.view(s.entity).into_iter().flatten().collect();
                    let mut got = view.clone();
                    want.sort_unstable();
                    got.sort_unstable();
                    assert_eq!(got, want, "entity {} view at tick {tick}", s.entity);
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 12, "every final view was compared");
}
