use std::path::Path;

use lockgrid_kernel::{Command, Fix, Pos, Spawn};

use super::*;
use crate::journal::{Journal, SyncPolicy};
use crate::node::{restore, FileStorage, Storage};
use crate::run::run_with;
use crate::store::{Recorder, StoreOptions};

fn town_square() -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/town_square.json");
    Scenario::from_json_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Runs `scenario` into data folder `dir`; returns each tick's digest.
fn record(dir: &Path, scenario: &Scenario, snapshot_every: u64) -> Vec<u64> {
    let options = StoreOptions {
        sync: SyncPolicy::Never,
        snapshot_every,
        keep_snapshots: 0,
        ..StoreOptions::default()
    };
    let mut recorder = Recorder::create(dir, &scenario.config, options).unwrap();
    let mut digests = Vec::new();
    run_with(scenario, |t| {
        digests.push(t.report.digest);
        recorder
            .record(t.world, t.commands, t.report)
            .map_err(std::io::Error::other)
    })
    .unwrap();
    recorder.close().unwrap();
    digests
}

#[path = "../../tests/rewrite_journal/mod.rs"]
mod rewrite_journal;
use rewrite_journal::rewrite_journal;

fn verify_all(dir: &Path) -> Verified {
    verify(dir, TickRange::default(), |_, _| {}).unwrap()
}

#[test]
fn a_faithful_journal_verifies() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &town_square(), 10);
    let v = verify_all(dir.path());
    assert_eq!(v.desync, None);
    assert_eq!(
        (v.ticks, v.snapshots_checked, v.started_from),
        (40, 4, None)
    );
    // From tick 25 on, the replay starts at the snapshot of tick 20.
    let v = verify(
        dir.path(),
        TickRange {
            from: 25,
            to: Some(33),
        },
        |_, _| {},
    )
    .unwrap();
    assert_eq!(v.desync, None);
    assert_eq!(v.started_from.map(|s| s.0), Some(20));
    assert_eq!((v.ticks, v.snapshots_checked), (13, 1));
}

#[test]
fn a_changed_command_is_found_and_diffed_against_the_next_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &town_square(), 10);
    // Tick 5 spawned NPC 201 at [320, 300]; pretend it was logged as [330, 300].
    rewrite_journal(&journal_path(dir.path()), |r| {
        for c in &mut r.commands {
            if let Command::Spawn(s) = c {
                if s.id == 201 {
                    s.pos = Pos::from_ints(330, 300);
                }
            }
        }
    });
    let v = verify_all(dir.path());
    let desync = v.desync.expect("no desync found");
    assert_eq!(desync.tick, 5);
    assert!(matches!(desync.kind, DesyncKind::Digest { .. }));
    let Comparison::Snapshot { tick, diffs, .. } = &desync.comparison else {
        panic!("no snapshot comparison: {desync}")
    };
    assert_eq!(*tick, 10);
    let npc = diffs
        .iter()
        .find_map(|d| match d {
            EntityDiff::Changed { id: 201, fields } => Some(fields),
            _ => None,
        })
        .expect("entity 201 not in the diff");
    assert!(
        npc.contains(&("pos", "[320, 300]".to_owned(), "[330, 300]".to_owned())),
        "{npc:?}"
    );
    let text = desync.to_string();
    assert!(text.starts_with("DESYNC at tick 5\n"), "{text}");
    assert!(
        text.contains("{\"spawn\": {\"id\": 201, \"pos\": [330, 300]"),
        "{text}"
    );
    assert!(
        text.contains("    pos        recorded [320, 300]\n               replayed [330, 300]"),
        "{text}"
    );
}

#[test]
fn a_wrong_digest_with_matching_states_blames_the_digest() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &town_square(), 10);
    rewrite_journal(&journal_path(dir.path()), |r| {
        if r.tick == 7 {
            r.digest ^= 1;
        }
    });
    let desync = verify_all(dir.path()).desync.expect("no desync");
    assert_eq!(desync.tick, 7);
    assert!(
        matches!(desync.comparison, Comparison::Snapshot { tick: 10, ref diffs, .. } if diffs.is_empty())
    );
    assert!(desync
        .to_string()
        .contains("the journaled digest itself is suspect"));
}

#[test]
fn without_snapshots_the_touched_entities_are_shown() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &town_square(), 0);
    rewrite_journal(&journal_path(dir.path()), |r| {
        if r.tick == 12 {
            r.commands
                .push(Command::Spawn(Spawn::npc(4242, Pos::from_ints(1, 1))));
        }
    });
    let desync = verify_all(dir.path()).desync.expect("no desync");
    assert_eq!(desync.tick, 12);
    let Comparison::Touched(diffs) = &desync.comparison else {
        panic!("{desync}")
    };
    assert!(diffs
        .iter()
        .any(|d| matches!(d, EntityDiff::OnlyReplayed(s) if s.id == 4242)));
    assert!(desync
        .to_string()
        .contains("no snapshot at or after tick 12"));
}

#[test]
fn a_tampered_snapshot_is_named_and_the_journal_still_verifies() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &town_square(), 10);
    let path = snapshot_dir(dir.path()).join(crate::store::snapshot_file_name(20));
    let mut s = read_snapshot(&path).unwrap();
    s.entities[0].state.speed = Fix::from_num(99);
    crate::store::write_snapshot(&snapshot_dir(dir.path()), &s).unwrap();
    let v = verify_all(dir.path());
    assert!(v.desync.is_none(), "{:?}", v.desync);
    assert_eq!((v.ticks, v.snapshots_checked), (40, 3));
    let [passed] = v.passed_over.as_slice() else {
        panic!("{:?}", v.passed_over)
    };
    assert_eq!(
        (passed.tick, passed.place.as_str()),
        (20, path.display().to_string().as_str())
    );
    assert!(
        matches!(passed.reason, PassedOverReason::Restore(_)),
        "{passed}"
    );
    assert!(!passed.reason.is_foreign());
}

/// Another data folder of `town_square` in which tick 5 also spawns an NPC:
/// same config, another history from tick 5 on.
fn other_history(dir: &Path) {
    let mut scenario = town_square();
    scenario.ticks[4].push(Command::Spawn(Spawn::npc(4242, Pos::from_ints(1, 1))));
    record(dir, &scenario, 10);
}

#[test]
fn snapshots_of_another_history_or_world_are_foreign_not_a_desync() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &town_square(), 10);
    let other = tempfile::tempdir().unwrap();
    other_history(other.path());
    let snaps = snapshot_dir(dir.path());
    let name20 = crate::store::snapshot_file_name(20);
    std::fs::copy(
        snapshot_dir(other.path()).join(&name20),
        snaps.join(&name20),
    )
    .unwrap();
    // A snapshot of another world (other config) at tick 30.
    let mut s = read_snapshot(&snaps.join(crate::store::snapshot_file_name(30))).unwrap();
    s.config.width_cells += 1;
    crate::store::write_snapshot(&snaps, &s).unwrap();
    // And one past the journal's end.
    let mut s = read_snapshot(&snaps.join(crate::store::snapshot_file_name(40))).unwrap();
    s.tick = 50;
    crate::store::write_snapshot(&snaps, &s).unwrap();

    let v = verify_all(dir.path());
    assert!(v.desync.is_none(), "{:?}", v.desync);
    assert_eq!((v.ticks, v.snapshots_checked), (40, 2));
    let reasons: Vec<(u64, bool, String)> = v
        .passed_over
        .iter()
        .map(|p| (p.tick, p.reason.is_foreign(), p.reason.to_string()))
        .collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons.iter().all(|r| r.1), "{reasons:?}");
    assert_eq!(
        reasons.iter().map(|r| r.0).collect::<Vec<_>>(),
        [20, 30, 50]
    );
    assert!(reasons[0].2.contains("another history"), "{reasons:?}");
    assert!(reasons[1].2.contains("world config differs"), "{reasons:?}");
    assert!(
        reasons[2].2.contains("past the journal's last tick 40"),
        "{reasons:?}"
    );

    // Starting after them: the foreign ones are passed over, newest first,
    // and the replay starts from the snapshot of tick 10.
    let v = verify(dir.path(), TickRange { from: 35, to: None }, |_, _| {}).unwrap();
    assert!(v.desync.is_none(), "{:?}", v.desync);
    assert_eq!(v.started_from.map(|s| s.0), Some(10));
    let ticks: Vec<u64> = v.passed_over.iter().map(|p| p.tick).collect();
    assert_eq!(ticks, [30, 20, 50]);
}

#[test]
fn restore_names_every_snapshot_it_passes_over() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &town_square(), 10);
    let snaps = snapshot_dir(dir.path());
    let snap30 = snaps.join(crate::store::snapshot_file_name(30));
    let mut bytes = std::fs::read(&snap30).unwrap();
    bytes[50] ^= 1;
    std::fs::write(&snap30, bytes).unwrap();
    let restored = crate::store::restore_newest(dir.path(), 35).unwrap();
    assert_eq!(restored.snapshot.as_ref().map(|s| s.0), Some(20));
    assert_eq!(restored.world.tick(), 20);
    let reasons: Vec<String> = restored.passed_over.iter().map(|p| p.to_string()).collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(reasons[0].contains("newer than tick 35"), "{reasons:?}");
    assert!(
        reasons[1].contains("unreadable: snapshot CRC mismatch"),
        "{reasons:?}"
    );
    // Nothing usable: an empty world of the journal's config.
    let restored = crate::store::restore_newest(dir.path(), 9).unwrap();
    assert_eq!((restored.snapshot, restored.world.tick()), (None, 0));
}

#[test]
fn every_snapshot_unusable_is_said() {
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &town_square(), 10);
    for (_, path) in list_snapshots(&snapshot_dir(dir.path())).unwrap() {
        std::fs::write(&path, b"LGSNAPSH").unwrap();
    }
    let v = verify_all(dir.path());
    assert!(v.desync.is_none());
    assert_eq!(
        (v.ticks, v.snapshots_checked, v.passed_over.len()),
        (40, 0, 4)
    );
    assert!(v.passed_over.iter().all(|p| p
        .to_string()
        .contains("unreadable: truncated snapshot file")));
}

#[test]
fn events_match_the_original_run() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = town_square();
    record(dir.path(), &scenario, 10);
    let mut original = Vec::new();
    crate::run::run_scenario(&scenario, &mut original).unwrap();
    let mut replayed = Vec::new();
    write_events(
        dir.path(),
        TickRange::default(),
        EventFilter::default(),
        &mut replayed,
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(replayed).unwrap(),
        String::from_utf8(original.clone()).unwrap()
    );
    // A range starting after a snapshot gives the same lines as the full run.
    let mut part = Vec::new();
    write_events(
        dir.path(),
        TickRange {
            from: 23,
            to: Some(31),
        },
        EventFilter::default(),
        &mut part,
    )
    .unwrap();
    let expected: String = String::from_utf8(original)
        .unwrap()
        .lines()
        .filter(|l| {
            let tick: u64 = l[8..l.find(',').unwrap()].parse().unwrap();
            (23..=31).contains(&tick)
        })
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(String::from_utf8(part).unwrap(), expected);
    // The observer filter keeps only that observer's lines.
    let mut mine = Vec::new();
    write_events(
        dir.path(),
        TickRange::default(),
        EventFilter { observer: Some(3) },
        &mut mine,
    )
    .unwrap();
    let mine = String::from_utf8(mine).unwrap();
    for line in mine.lines().filter(|l| !l.contains("\"type\":\"tick\"")) {
        assert!(
            line.contains("\"observer\":3,") || line.contains("\"entity\":3,"),
            "{line}"
        );
    }
    assert!(mine.contains("\"type\":\"leave\",\"observer\":3,\"subject\":201"));
}

#[test]
fn exported_scenarios_reproduce_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = town_square();
    let digests = record(dir.path(), &scenario, 10);
    // From the first tick, the export is the scenario itself.
    let whole = export_scenario(dir.path(), TickRange::default()).unwrap();
    assert_eq!(whole, scenario);
    // From tick 21, spawns rebuild the state after tick 20; every entity
    // then ends exactly where the journaled run left it.
    let part = export_scenario(dir.path(), TickRange { from: 21, to: None }).unwrap();
    assert_eq!(part.ticks.len(), 1 + 20);
    assert!(part.ticks[0].iter().all(|c| matches!(c, Command::Spawn(_))));
    let reparsed = Scenario::from_json_str(&part.to_json()).unwrap();
    assert_eq!(reparsed, part);
    let mut original = World::new(scenario.config).unwrap();
    let mut exported = World::new(part.config).unwrap();
    let mut events = Vec::new();
    for t in &scenario.ticks {
        original.step(t, &mut events);
    }
    for t in &part.ticks {
        exported.step(t, &mut events);
    }
    assert_eq!(original.digest(), digests[39]);
    let sorted = |w: &World| {
        let mut v: Vec<EntityState> = w.entities().collect();
        v.sort_by_key(|s| s.id);
        v
    };
    assert_eq!(sorted(&exported), sorted(&original));
    assert!(matches!(
        export_scenario(dir.path(), TickRange { from: 99, to: None }),
        Err(StoreError::Range(RangeError::FromPastEnd {
            from: 99,
            last: 40
        }))
    ));
}

#[test]
fn recovery_uses_the_newest_good_snapshot_and_checks_digests() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = town_square();
    let digests = record(dir.path(), &scenario, 10);
    // Crash mid-append of tick 40: the journal's last record is torn.
    let jpath = journal_path(dir.path());
    let len = std::fs::metadata(&jpath).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&jpath)
        .unwrap()
        .set_len(len - 3)
        .unwrap();
    // And the snapshot of tick 30 was damaged.
    let snap30 = snapshot_dir(dir.path()).join(crate::store::snapshot_file_name(30));
    let mut bytes = std::fs::read(&snap30).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&snap30, bytes).unwrap();

    let mut storage = FileStorage::new(dir.path(), SyncPolicy::EveryTick, 0);
    let (mut world, report) = restore(&mut storage, &scenario.config).unwrap();
    assert!(report.cut.is_some());
    assert_eq!(report.snapshot.as_ref().map(|s| s.0), Some(20));
    // Newest first: tick 40's snapshot is past the cut journal's end, 30's is damaged.
    let reasons: Vec<_> = report
        .passed_over
        .iter()
        .map(|p| (p.tick, &p.reason))
        .collect();
    assert!(
        matches!(
            reasons.as_slice(),
            [
                (
                    40,
                    crate::store::PassedOverReason::PastJournalEnd { last: 39 }
                ),
                (30, crate::store::PassedOverReason::Unreadable(_))
            ]
        ),
        "{reasons:?}"
    );
    assert_eq!((report.replayed, report.tick), (19, 39));
    assert_eq!(world.digest(), digests[38]);
    // The host re-runs tick 40 and carries on; the journal agrees again.
    let mut events = Vec::new();
    let r = world.step(&scenario.ticks[39], &mut events);
    assert_eq!(r.digest, digests[39]);
    storage
        .append(r.tick, &scenario.ticks[39], r.digest)
        .unwrap();
    storage.close().unwrap();
    let v = verify_all(dir.path());
    assert_eq!((v.ticks, v.desync), (40, None));
    let text = report.to_string();
    assert!(text.contains("restored tick 20"), "{text}");
}

#[test]
fn errors_chain_down_to_the_operating_system() {
    use crate::journal::JournalError;
    let disk = io::Error::other("disk on fire");
    let e = ReplayError::Store(StoreError::Journal(JournalError::Io(disk)));
    let mut chain = vec![e.to_string()];
    let mut at: &dyn std::error::Error = &e;
    while let Some(source) = at.source() {
        chain.push(source.to_string());
        at = source;
    }
    assert_eq!(chain.len(), 4, "{chain:?}");
    assert_eq!(chain.last().map(String::as_str), Some("disk on fire"));
}

#[test]
fn tick_ranges_are_checked_against_the_journal() {
    let range = |from, to| TickRange { from, to };
    assert_eq!(range(1, None).check(0), Ok(()));
    assert_eq!(range(0, None).check(40), Ok(()));
    assert_eq!(range(40, Some(40)).check(40), Ok(()));
    assert_eq!(
        range(2, None).check(0),
        Err(RangeError::FromPastEnd { from: 2, last: 0 })
    );
    assert_eq!(
        range(10, Some(5)).check(40),
        Err(RangeError::FromAfterTo { from: 10, to: 5 })
    );
    // Past the end and inverted: the start is named first.
    assert_eq!(
        range(50, Some(45)).check(40),
        Err(RangeError::FromAfterTo { from: 50, to: 45 })
    );
    assert_eq!(
        range(50, Some(60)).check(40),
        Err(RangeError::FromPastEnd { from: 50, last: 40 })
    );
    assert_eq!(
        range(1, Some(41)).check(40),
        Err(RangeError::ToPastEnd { to: 41, last: 40 })
    );
    // Tick 0 is no tick: the message names only what was asked.
    assert_eq!(range(1, Some(0)).check(40), Err(RangeError::ToZero));
    assert_eq!(range(0, Some(0)).check(40), Err(RangeError::ToZero));
    assert_eq!(range(0, Some(1)).check(40), Ok(()));
    assert_eq!(
        RangeError::ToZero.to_string(),
        "--to 0: ticks are numbered from 1, so the range holds no tick"
    );
    assert_eq!(
        RangeError::FromPastEnd { from: 2, last: 0 }.to_string(),
        "--from 2 is past the journal's last tick 0 (it holds no tick yet)"
    );

    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &town_square(), 10);
    let err = export_scenario(dir.path(), range(41, None)).err().unwrap();
    assert!(
        matches!(
            err,
            StoreError::Range(RangeError::FromPastEnd { from: 41, last: 40 })
        ),
        "{err:?}"
    );
}
