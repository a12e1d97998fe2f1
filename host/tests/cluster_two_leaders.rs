//! Two appenders of one tick: while a node leads, another writer appends
//! the next tick first (a node that believes it leads, as after a lease
//! that expired under a paused leader). The stream's expected-last-sequence
//! condition refuses the leader's append; the leader rebuilds its world,
//! applies the other ticks, takes the lease again and goes on: one history.

mod cluster_common;

use std::time::Duration;

use cluster_common::*;
use lockgrid_host::cluster::log::{connect, Appended, ClusterLog};
use lockgrid_host::cluster::record::encode_tick;
use lockgrid_kernel::{Config, World};

#[test]
fn a_tick_appended_by_another_is_followed_not_forked() {
    let Some(nats) = nats_server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let servers = start_nats(&nats, &tmp.path().join("nats"), 1);
    let url = servers[0].url();
    let node = start_node(&url, "two", &tmp.path().join("a"), &["--npcs", "3"]);
    std::thread::sleep(Duration::from_secs(1));

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let taken = rt.block_on(async {
        let client = connect(std::slice::from_ref(&url)).await.unwrap();
        let log = ClusterLog::open(client, 1, "two", Duration::from_secs(1))
            .await
            .unwrap();
        let (config, _) = log.world_config(&Config::default()).await.unwrap();
        let mut world = World::new(config).unwrap();
        let mut events = Vec::new();
        // Race the leader: follow the stream, and append an empty tick a
        // little before the leader's next one is due, until the leader
        // says it lost an append and follows.
        let mut won = None;
        for attempt in 0..400u64 {
            let lost = node
                .lines
                .lock()
                .unwrap()
                .iter()
                .any(|(_, l)| l.contains("following at tick"));
            if lost {
                return won;
            }
            let seen = log.last_tick().await.unwrap();
            while log.last_tick().await.unwrap() == seen {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            tokio::time::sleep(Duration::from_millis(35 + attempt % 15)).await;
            let last = log.last_tick().await.unwrap();
            while world.tick() < last {
                let (record, _, _) = log.get(world.tick() + 1).await.unwrap();
                events.clear();
                world.step(&record.commands, &mut events);
            }
            let tick = last + 1;
            let mut probe = World::restore(&world.snapshot()).unwrap();
            events.clear();
            let digest = probe.step(&[], &mut events).digest;
            if let Appended::Taken = log
                .append(tick, encode_tick(tick, &[], digest), "")
                .await
                .unwrap()
            {
                won = Some(tick);
            }
        }
        None
    });
    let tick = taken.expect("the leader lost an append to the other writer and said it follows");
    std::thread::sleep(Duration::from_secs(3));
    drop(node);

    let digests = read_digests(&tmp.path().join("a"));
    let top = digests.keys().max().copied().unwrap_or(0);
    assert!(
        top > tick + 20,
        "the node went on after tick {tick}: it stopped at {top}"
    );
    let (ok, out, err) = lockgrid(&["replay", &format!("{url}/two"), "--verify"]);
    assert!(ok, "{out}{err}");
    let (ok, out, err) = lockgrid(&[
        "replay",
        &format!("{url}/two"),
        "--export",
        tmp.path().join("x").to_str().unwrap(),
    ]);
    assert!(ok, "{out}{err}");
    let mut reader =
        lockgrid_host::journal::JournalReader::open(&tmp.path().join("x/journal.lgj")).unwrap();
    while let Some(r) = reader.next_record().unwrap() {
        if let Some(d) = digests.get(&r.tick) {
            assert_eq!(*d, format!("{:016x}", r.digest), "tick {}", r.tick);
        }
        if r.tick == tick {
            assert!(r.commands.is_empty(), "tick {tick} is the other writer's");
        }
    }
}
