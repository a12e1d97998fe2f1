//! Crash recovery of a real server: `lockgrid serve` is killed with SIGKILL
//! while bots load it, at several moments, and restarted on the same data
//! folder each time. Every tick a bot received must be in the journal with
//! the same digest and events (the bots check that), each restart must
//! recover, and the final journal must replay.

mod serve_common;

use std::time::Duration;

use serve_common::{bots, interrupt, replay_verify, run_bounded, start_serve, wait_bounded};

#[test]
fn killed_server_recovers_and_loses_no_acknowledged_tick() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let common = [
        "--npcs",
        "30",
        "--seed",
        "3",
        "--snapshot-every",
        "15",
        "--seconds",
        "60",
    ];
    let mut addr = "127.0.0.1:0".to_owned();
    // Kill moments after the bots start, in milliseconds: early, mid-walk, late.
    for (round, kill_after_ms) in [350u64, 1100, 1900].into_iter().enumerate() {
        let mut served = start_serve(&data, &addr, &common);
        addr.clone_from(&served.addr);
        let mut bot_cmd = bots(&addr, &data, 8, "1.5", round as u64);
        let bots_thread =
            std::thread::spawn(move || run_bounded(&mut bot_cmd, Duration::from_secs(60)));
        std::thread::sleep(Duration::from_millis(kill_after_ms));
        served.child.kill().expect("SIGKILL");
        let _ = served.child.wait();
        let out = bots_thread.join().expect("bots thread");
        let stdout = String::from_utf8_lossy(&out.stdout);
        // Clients of a killed server are dropped, but whatever they applied
        // must match the journal.
        let line = stdout
            .lines()
            .find(|l| l.starts_with("view mismatches"))
            .unwrap_or_else(|| {
                panic!(
                    "round {round}: no mismatch line:\n{stdout}\n{}",
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        assert!(line.ends_with(" 0"), "round {round}:\n{stdout}");
        if kill_after_ms >= 1000 {
            // Killed mid-walk: the bots had applied ticks, and checked them.
            let checked = stdout
                .lines()
                .find_map(|l| l.strip_prefix("checked"))
                .and_then(|l| l.split_whitespace().next())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
            assert!(checked > 0, "round {round}: nothing checked:\n{stdout}");
            // And the moves the server had acknowledged were all journaled
            // (a missing one would be a mismatch above); some were.
            let acked = stdout
                .split(" acknowledged moves against the journal")
                .next()
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
            assert!(acked > 0, "round {round}: no acknowledged move:\n{stdout}");
        }
        // The folder replays after every crash.
        replay_verify(&data);
    }
    // A last start recovers, runs a few ticks and stops cleanly.
    let mut served = start_serve(
        &data,
        &addr,
        &["--npcs", "30", "--seed", "3", "--ticks", "10"],
    );
    let status = wait_bounded(&mut served.child, Duration::from_secs(30));
    if !status.success() {
        interrupt(&served.child);
    }
    assert!(status.success(), "final serve exited with {status}");
    let verified = replay_verify(&data);
    assert!(verified.contains("all digests match"), "{verified}");
}
