//! `lockgrid serve` whose snapshots cannot be written keeps serving: the
//! failures are logged and counted in the stats file, the journal stays
//! whole, and a mended folder gets snapshots again.

mod serve_common;

use std::process::Command;
use std::time::Duration;

use lockgrid_host::serve::stats::ServeStats;
use serve_common::{replay_verify, run_bounded, BIN};

fn serve(data: &std::path::Path, ticks: &str) -> std::process::Output {
    run_bounded(
        Command::new(BIN)
            .args(["serve", "--addr", "127.0.0.1:0", "--tick-rate", "100"])
            .args([
                "--npcs",
                "5",
                "--snapshot-every",
                "5",
                "--ticks",
                ticks,
                "--data-dir",
            ])
            .arg(data)
            .env("RUST_LOG", "warn"),
        Duration::from_secs(60),
    )
}

#[test]
fn snapshot_failures_do_not_stop_the_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let out = serve(&data, "3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The snapshots folder becomes a file: no snapshot can be written.
    let snapshots = data.join("snapshots");
    std::fs::remove_dir_all(&snapshots).expect("remove");
    std::fs::write(&snapshots, b"in the way").expect("write");
    let out = serve(&data, "22");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the server stopped:\n{stderr}");
    assert!(stderr.contains("cannot write a snapshot"), "{stderr}");
    let stats = ServeStats::read(&data).expect("stats file");
    assert_eq!(stats.tick, 25);
    assert_eq!(stats.snapshot_failures, 5, "ticks 5, 10, …, 25: {stats:?}");
    assert!(stats.snapshot_error.is_some());
    // Mended: a removed folder is made again at the next snapshot tick.
    std::fs::remove_file(&snapshots).expect("remove the file");
    let out = serve(&data, "5");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stats = ServeStats::read(&data).expect("stats file");
    assert_eq!((stats.snapshot_failures, stats.snapshots_written), (0, 1));
    assert!(snapshots
        .join("snapshot-00000000000000000030.lgs")
        .is_file());
    // The journal of all three runs replays to its digests.
    replay_verify(&data);
}
