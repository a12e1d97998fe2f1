//! The node's restore and the in-memory disk's crash model.

use lockgrid_kernel::{Command, Config, Fix, Pos, Spawn, World};
use lockgrid_protocol::Instant;

use super::{restore, MemStorage, Node, NodeConfig, Storage};
use crate::serve::DefaultRules;
use crate::store::PassedOverReason;

fn run_node(storage: MemStorage, ticks: u64) -> (MemStorage, u64) {
    let config = NodeConfig {
        snapshot_every: 10,
        ..NodeConfig::default()
    };
    let rules = DefaultRules::new(Fix::from_num(200), 20, 6, 1);
    let (mut node, _) =
        Node::<u32, _, _>::open(Instant::ZERO, config, &Config::default(), rules, storage)
            .expect("opens");
    let mut buf = [0u8; 1200];
    while node.world().tick() < ticks {
        let now = node.tick_due();
        node.handle_timeout(now).expect("ticks");
        while node.poll_transmit(now, &mut buf).expect("buffer").is_some() {}
    }
    let digest = node.world().digest();
    node.close().expect("closes");
    (node.into_storage(), digest)
}

#[test]
fn restore_passes_over_unusable_snapshots_and_says_why() {
    let (mut disk, digest) = run_node(MemStorage::new(0), 30);
    assert_eq!(disk.snapshots().expect("list"), vec![10, 20, 30]);
    // Tick 30's snapshot rots; tick 20's is replaced by another world's.
    assert!(disk.rot_snapshot(30, 17));
    let mut other = World::new(Config {
        width_cells: 9,
        ..Config::default()
    })
    .expect("world");
    let mut events = Vec::new();
    for _ in 0..20 {
        other.step(&[], &mut events);
    }
    disk.write_snapshot(&other.snapshot()).expect("written");
    let (world, report) = restore(&mut disk, &Config::default()).expect("restores");
    assert_eq!((world.tick(), world.digest()), (30, digest));
    assert_eq!(report.snapshot.as_ref().map(|s| s.0), Some(10), "{report}");
    assert_eq!(report.replayed, 20);
    let skipped: Vec<u64> = report.passed_over.iter().map(|p| p.tick).collect();
    assert_eq!(skipped, vec![30, 20], "{report}");
    assert!(
        matches!(
            report.passed_over[0].reason,
            PassedOverReason::Unreadable(_)
        ),
        "{report}"
    );
    assert!(
        report.passed_over[0].to_string().contains("CRC"),
        "{report}"
    );
    assert!(
        matches!(report.passed_over[1].reason, PassedOverReason::OtherConfig),
        "{report}"
    );
}

#[test]
fn a_snapshot_of_another_history_is_passed_over() {
    let (mut disk, digest) = run_node(MemStorage::new(0), 12);
    // Same config, same tick, another history: its digest disagrees.
    let mut other = World::new(Config::default()).expect("world");
    let mut events = Vec::new();
    let spawn = Command::Spawn(Spawn::npc(99, Pos::from_ints(5, 5)));
    other.step(&[spawn], &mut events);
    for _ in 1..10 {
        other.step(&[], &mut events);
    }
    disk.write_snapshot(&other.snapshot()).expect("written");
    let (world, report) = restore(&mut disk, &Config::default()).expect("restores");
    assert_eq!(world.digest(), digest);
    assert_eq!(report.snapshot, None, "{report}");
    assert!(
        matches!(
            report.passed_over[0].reason,
            PassedOverReason::OtherHistory { .. }
        ),
        "{report}"
    );
    assert!(
        report.passed_over[0].to_string().contains("digest"),
        "{report}"
    );
}

#[test]
fn a_crash_keeps_every_synced_record_and_may_tear_the_rest() {
    let mut disk = MemStorage::new(0);
    disk.create(&Config::default()).expect("created");
    for tick in 1..=3 {
        disk.append(tick, &[], tick).expect("appended");
    }
    disk.sync().expect("synced");
    for tick in 4..=6 {
        disk.append(tick, &[], tick).expect("appended");
    }
    let mut kept = [false; 7];
    let mut torn = false;
    for seed in 0..200 {
        let mut after = disk.crash(seed);
        let opened = after.open().expect("opens").expect("a journal");
        assert!(
            (3..=6).contains(&opened.last_tick),
            "seed {seed}: {opened:?}"
        );
        kept[opened.last_tick as usize] = true;
        torn |= opened.cut.is_some();
        // What survived is durable now.
        assert_eq!(after.synced_tick(), opened.last_tick);
    }
    assert_eq!(kept[3..], [true; 4], "every outcome occurs");
    assert!(torn, "some crash tears a record");
}

#[test]
fn storage_without_a_journal_but_with_snapshots_is_refused() {
    let (disk, _) = run_node(MemStorage::new(0), 10);
    let mut orphans = MemStorage::new(0);
    let snapshot = {
        let mut d = disk;
        d.read_snapshot(10).expect("reads")
    };
    orphans.write_snapshot(&snapshot).expect("written");
    assert!(restore(&mut orphans, &Config::default()).is_err());
}
