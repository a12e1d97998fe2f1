//! End to end: a real `lockgrid serve` process, real `lockgrid bots` over
//! loopback UDP, then `lockgrid replay --verify` of the data folder.

mod serve_common;

use std::time::Duration;

use serve_common::{bots, interrupt, replay_verify, run_bounded, start_serve, wait_bounded};

/// The number just before `suffix` in `text`.
fn number_before(text: &str, suffix: &str) -> u64 {
    let at = text
        .find(suffix)
        .unwrap_or_else(|| panic!("no {suffix:?} in:\n{text}"));
    text[..at]
        .rsplit(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number before {suffix:?} in:\n{text}"))
}

#[test]
fn bots_see_exactly_the_kernel_views_and_the_journal_replays() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let mut served = start_serve(
        &data,
        "127.0.0.1:0",
        &["--npcs", "40", "--seed", "7", "--seconds", "120"],
    );

    let out = run_bounded(
        &mut bots(&served.addr, &data, 16, "3", 11),
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bots failed:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("16 started, 16 connected, 0 dropped"),
        "{stdout}"
    );
    let mismatches = stdout
        .lines()
        .find(|l| l.starts_with("view mismatches"))
        .unwrap_or_else(|| panic!("no mismatch line:\n{stdout}"));
    assert!(mismatches.ends_with(" 0"), "{stdout}");
    assert!(stdout.contains(", 16 final views and "), "{stdout}");
    // Every move the bots sent was acknowledged and found in the journal:
    // they walk at 80% of the max speed on their own clocks, and the server
    // judges speed by when moves arrive, so moves that bunch up behind a
    // busy machine's late ticks are not refused.
    let sent = number_before(&stdout, " moves sent");
    let found = number_before(&stdout, " acknowledged moves against the journal");
    assert!(sent > 0 && found == sent, "{stdout}");
    assert!(
        stdout.contains("server refused         nothing"),
        "{stdout}"
    );
    // Lockstep bots answer each tick in one datagram, move and
    // acknowledgement together: about 20 a second at 20 Hz, where bots on
    // their own clocks send about 40 (`--pace clock`).
    let out_rate = stdout
        .lines()
        .find_map(|l| l.strip_prefix("per client")?.trim().strip_prefix("out "))
        .and_then(|l| l.split(' ').next()?.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no per-client rate:\n{stdout}"));
    assert!(out_rate < 30.0, "{stdout}");

    // Ctrl-C: the server finishes its tick, closes the journal, says so.
    interrupt(&served.child);
    let status = wait_bounded(&mut served.child, Duration::from_secs(20));
    assert!(status.success(), "serve exited with {status}");
    let summary = served
        .stdout
        .recv_timeout(Duration::from_secs(5))
        .expect("serve output");
    assert!(summary.contains("journal closed"), "{summary}");
    assert!(summary.contains("16 connections"), "{summary}");

    let verified = replay_verify(&data);
    assert!(verified.contains("all digests match"), "{verified}");
}

/// The check is not vacuous: bots of one server verified against another
/// server's journal report mismatches and fail.
#[test]
fn bots_checked_against_another_journal_fail() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (data_a, data_b) = (dir.path().join("a"), dir.path().join("b"));
    let mut a = start_serve(
        &data_a,
        "127.0.0.1:0",
        &["--npcs", "30", "--seed", "1", "--seconds", "60"],
    );
    let mut b = start_serve(
        &data_b,
        "127.0.0.1:0",
        &["--npcs", "30", "--seed", "2", "--seconds", "60"],
    );
    let out = run_bounded(
        &mut bots(&a.addr, &data_b, 4, "1", 3),
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success(), "{stdout}");
    let line = stdout
        .lines()
        .find(|l| l.starts_with("view mismatches"))
        .unwrap_or_else(|| panic!("no mismatch line:\n{stdout}"));
    assert!(!line.ends_with(" 0"), "{stdout}");
    for s in [&mut a, &mut b] {
        interrupt(&s.child);
        let status = wait_bounded(&mut s.child, Duration::from_secs(20));
        assert!(status.success());
    }
}

/// With `--budget`, the bots check what a budget promises (every
/// rejection, Leave and Enter exactly; views by their ids) and report the
/// server's budget figures.
#[test]
fn bots_against_a_budgeted_server_see_exact_views() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    // A small world crowded enough that 2 KiB/s cannot carry every Update.
    let config = dir.path().join("lockgrid.toml");
    std::fs::write(&config, "[world]\nwidth_cells = 10\nheight_cells = 10\n")
        .expect("write config");
    let mut served = start_serve(
        &data,
        "127.0.0.1:0",
        &[
            "--npcs",
            "600",
            "--seed",
            "3",
            "--seconds",
            "120",
            "--budget",
            "2KiB",
            "--config",
            config.to_str().expect("utf-8 path"),
        ],
    );
    let out = run_bounded(
        &mut bots(&served.addr, &data, 8, "3", 5),
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "bots failed:\n{stdout}\n{stderr}");
    let mismatches = stdout
        .lines()
        .find(|l| l.starts_with("view mismatches"))
        .unwrap_or_else(|| panic!("no mismatch line:\n{stdout}"));
    assert!(mismatches.ends_with(" 0"), "{stdout}");
    let budget = stdout
        .lines()
        .find(|l| l.starts_with("server budget"))
        .unwrap_or_else(|| panic!("no budget line:\n{stdout}"));
    assert!(budget.contains("2048 B/s per client"), "{stdout}");
    let deferred = number_before(budget, " deferred");
    assert!(
        deferred > 0,
        "the budget never held an Update back:\n{stdout}"
    );
    interrupt(&served.child);
    let status = wait_bounded(&mut served.child, Duration::from_secs(20));
    assert!(status.success(), "serve exited with {status}");
}
