//! A journal whose digests disagree with its commands is refused by
//! `lockgrid render` and `lockgrid view`, not drawn as if it were true.

// The journal types are for `rewrite_journal`, shared with the unit tests.
use lockgrid_host::journal::{Journal, JournalReader, Record, SyncPolicy};

mod rewrite_journal;
use rewrite_journal::rewrite_journal;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use lockgrid_host::view::{respond, Index, Source};

const BIN: &str = env!("CARGO_BIN_EXE_lockgrid");

fn diverged_data_folder(dir: &Path) -> std::path::PathBuf {
    let data = dir.join("data");
    let scenario =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/town_square.json");
    let out = Command::new(BIN)
        .arg("run")
        .arg(&scenario)
        .arg("--journal")
        .arg(&data)
        .arg("--summary")
        .output()
        .expect("lockgrid runs");
    assert!(out.status.success());
    rewrite_journal(&data.join("journal.lgj"), |r: &mut Record| {
        if r.tick == 12 {
            r.digest ^= 1;
        }
    });
    data
}

#[test]
fn render_refuses_a_tick_past_a_divergence() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = diverged_data_folder(dir.path());
    let before = Command::new(BIN)
        .arg("render")
        .arg(&data)
        .args(["--tick", "11"])
        .output()
        .expect("lockgrid runs");
    assert!(before.status.success());
    let after = Command::new(BIN)
        .arg("render")
        .arg(&data)
        .args(["--tick", "20"])
        .output()
        .expect("lockgrid runs");
    let stderr = String::from_utf8_lossy(&after.stderr);
    assert!(!after.status.success());
    assert!(after.stdout.is_empty());
    assert!(stderr.contains("12"), "{stderr}");
}

#[test]
fn view_reports_the_divergence_instead_of_a_timeline() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = diverged_data_folder(dir.path());
    let index = Index::start(Source::DataDir(data));
    let until = Instant::now() + Duration::from_secs(60);
    let progress = loop {
        let reply = respond(&index, "data", "/api/progress");
        let v: serde_json::Value = serde_json::from_slice(&reply.body).expect("JSON");
        if v["state"] != "indexing" {
            break v;
        }
        assert!(Instant::now() < until, "indexing did not finish");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert_eq!(progress["state"], "failed", "{progress}");
    let error = progress["error"].as_str().expect("an error");
    assert!(
        error.contains("diverges from the journal at tick 12"),
        "{error}"
    );
    let reply = respond(&index, "data", "/api/tick?t=1");
    assert_eq!(reply.status, 500);
}
