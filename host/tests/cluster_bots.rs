//! `lockgrid bots --server A,B` spreads its clients over the nodes of a
//! cluster and moves a client to the other node when its own is killed;
//! the moved clients get their entities back.

mod cluster_common;

use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::time::Duration;

use cluster_common::*;
use lockgrid_host::journal::JournalReader;
use lockgrid_host::node::CLIENT_ID_BASE;
use lockgrid_kernel::Command as KernelCommand;

#[test]
fn bots_spread_over_nodes_and_move_when_one_dies() {
    let Some(nats) = nats_server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let servers = start_nats(&nats, &tmp.path().join("nats"), 1);
    let url = servers[0].url();
    let mut a = start_node(&url, "bots", &tmp.path().join("a"), &[]);
    let mut b = start_node(&url, "bots", &tmp.path().join("b"), &[]);
    let list = format!("{},{}", a.addr, b.addr);
    let bots = Command::new(BIN)
        .args([
            "bots",
            "--clients",
            "6",
            "--seconds",
            "9",
            "--no-verify",
            "--server",
            &list,
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    b.kill();
    let out = bots.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("6 started, 6 connected"), "{text}");
    let moved: u64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("moved")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    assert!(
        moved >= 3,
        "the three clients of the killed node moved: {text}"
    );
    // The survivor still agrees with the stream.
    let world = format!("{url}/bots");
    let (ok, out, err) = lockgrid(&["replay", &world, "--verify"]);
    assert!(ok, "{out}{err}");

    // The stream replays as the data folder it exports to: the same
    // events (clients' views included) and the same scenario. The
    // survivor stops first, so that the stream no longer grows.
    a.kill();
    let export = tmp.path().join("export");
    let folder = export.to_str().unwrap();
    let (ok, out, err) = lockgrid(&["replay", &world, "--export", folder]);
    assert!(ok, "{out}{err}");
    // Without a key each bot has a name, so a bot that moved got its
    // entity back: six client entities in all, and those of the killed
    // node's bots spawned a second time (after their despawn) by the survivor.
    let mut reader = JournalReader::open(&export.join("journal.lgj")).expect("exported journal");
    let mut spawns: BTreeMap<u64, u32> = BTreeMap::new();
    while let Some(r) = reader.next_record().expect("exported journal reads") {
        for c in &r.commands {
            if let KernelCommand::Spawn(s) = c {
                if s.id >= CLIENT_ID_BASE {
                    *spawns.entry(s.id).or_default() += 1;
                }
            }
        }
    }
    assert_eq!(spawns.len(), 6, "client entities spawned: {spawns:?}");
    let again = spawns.values().filter(|&&n| n >= 2).count();
    assert!(again >= 3, "entities taken back: {spawns:?}");
    let (ok, from_stream, err) = lockgrid(&["replay", &world, "--events"]);
    assert!(ok, "replay --events of the stream fails: {err}");
    let (ok, from_folder, err) = lockgrid(&["replay", folder, "--events"]);
    assert!(ok, "replay --events of the folder fails: {err}");
    let last = |text: &str| text.lines().last().unwrap_or_default().to_owned();
    assert!(
        from_stream == from_folder,
        "replay --events: {} lines from the stream, {} from the folder; last {} and {}",
        from_stream.lines().count(),
        from_folder.lines().count(),
        last(&from_stream),
        last(&from_folder)
    );
    assert!(from_stream.contains("\"type\":\"enter\""), "{from_stream}");
    let scenario = |from: &str, name: &str| {
        let file = tmp.path().join(name);
        let (ok, out, err) =
            lockgrid(&["replay", from, "--export-scenario", file.to_str().unwrap()]);
        assert!(ok, "replay {from} --export-scenario fails: {out}{err}");
        std::fs::read_to_string(file).unwrap()
    };
    let from_stream = scenario(&world, "stream.json");
    assert!(
        from_stream == scenario(folder, "folder.json"),
        "replay --export-scenario differs"
    );
    assert!(from_stream.contains("\"ticks\""), "{from_stream}");
}
