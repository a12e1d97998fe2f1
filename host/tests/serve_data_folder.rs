//! Opening a data folder with `lockgrid serve`: leftover temporary files are
//! removed, and snapshots without a journal are refused unless the operator
//! discards them explicitly.

mod serve_common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use lockgrid_host::store::{journal_path, list_snapshots, snapshot_dir};
use serve_common::{run_bounded, BIN};

/// `lockgrid serve` for `ticks` ticks on any free port, with `extra` flags.
fn serve(data: &Path, ticks: &str, extra: &[&str]) -> Output {
    run_bounded(
        Command::new(BIN)
            .args(["serve", "--addr", "127.0.0.1:0", "--ticks", ticks])
            .args(["--snapshot-every", "2", "--data-dir"])
            .arg(data)
            .args(extra)
            .env("RUST_LOG", "warn"),
        Duration::from_secs(60),
    )
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn snapshots_without_a_journal_are_refused_until_discarded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let out = serve(&data, "4", &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!list_snapshots(&snapshot_dir(&data)).unwrap().is_empty());
    std::fs::remove_file(journal_path(&data)).unwrap();

    let out = serve(&data, "1", &[]);
    assert!(!out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("but there is no journal") && stderr.contains("--discard-snapshots"),
        "{stderr}"
    );
    assert!(!journal_path(&data).exists(), "a new world was started");

    let out = serve(&data, "1", &["--discard-snapshots"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(journal_path(&data).exists());
    assert!(list_snapshots(&snapshot_dir(&data)).unwrap().is_empty());
}

#[test]
fn leftovers_are_removed_and_a_missing_snapshot_folder_is_recreated() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let out = serve(&data, "2", &[]);
    assert!(out.status.success(), "{}", text(&out));
    let leftovers = [
        data.join("journal.tmp"),
        data.join("serve-stats.json.tmp"),
        snapshot_dir(&data).join(".snapshot-00000000000000000004.lgs.tmp"),
    ];
    for path in &leftovers {
        std::fs::write(path, b"partial").unwrap();
    }
    let out = serve(&data, "1", &[]);
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for path in &leftovers {
        assert!(!path.exists(), "{} left", path.display());
        assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    }

    // Snapshots are a cache: a server whose snapshots folder was removed
    // writes the next one into a new folder instead of stopping.
    std::fs::remove_dir_all(snapshot_dir(&data)).unwrap();
    let out = serve(&data, "4", &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!list_snapshots(&snapshot_dir(&data)).unwrap().is_empty());
}
