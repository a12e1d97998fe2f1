//! `lockgrid run --journal` then `lockgrid replay`, as a user runs them.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

// The journal types are for `rewrite_journal`, shared with the unit tests.
use lockgrid_host::journal::{Journal, JournalReader, Record, SyncPolicy};

mod rewrite_journal;
use rewrite_journal::rewrite_journal;

fn lockgrid(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lockgrid"))
        .args(args)
        .arg(dir)
        .output()
        .unwrap()
}

fn town_square() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/town_square.json")
}

fn recorded(dir: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_lockgrid"))
        .arg("run")
        .arg(town_square())
        .args(["--snapshot-every", "10", "--journal"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn verify_passes_and_events_match_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let run = recorded(&dir);
    let out = lockgrid(&["replay", "--verify"], &dir);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.starts_with("verified 40 ticks from the start, 4 snapshots compared"),
        "{stdout}"
    );
    assert!(stdout.contains("ticks/s"));
    let out = lockgrid(&["replay", "--events"], &dir);
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), run);
    // A second journal into the same folder is refused.
    let again = Command::new(env!("CARGO_BIN_EXE_lockgrid"))
        .arg("run")
        .arg(town_square())
        .arg("--journal")
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8(again.stderr)
        .unwrap()
        .contains("a journal already exists"));
}

#[test]
fn verify_names_the_first_divergent_tick() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    recorded(&dir);
    // Journal a wrong digest for tick 17, with a valid CRC.
    rewrite_journal(&dir.join("journal.lgj"), |r| {
        if r.tick == 17 {
            r.digest = r.digest.wrapping_add(1);
        }
    });

    let out = lockgrid(&["replay", "--verify"], &dir);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with("DESYNC at tick 17\n"), "{stdout}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("error: desync at tick 17"), "{stderr}");
    // --events refuses to stream past a divergence.
    let out = lockgrid(&["replay", "--events"], &dir);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("tick 17 replays to digest"));
}

#[test]
fn corrupt_journals_fail_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    recorded(&dir);
    let path = dir.join("journal.lgj");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[200] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let out = lockgrid(&["replay", "--verify"], &dir);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("journal: corrupt record at offset"),
        "{stderr}"
    );
    std::fs::write(&path, &bytes[..50]).unwrap();
    let out = lockgrid(&["replay", "--verify"], &dir);
    assert!(String::from_utf8(out.stderr)
        .unwrap()
        .contains("shorter than a journal header"));
    let out = lockgrid(&["replay", "--verify"], &tmp.path().join("nowhere"));
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn verify_names_unusable_snapshots_and_says_when_none_could_be_compared() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    recorded(&dir);
    let snaps = dir.join("snapshots");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&snaps)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    assert_eq!(names.len(), 4);
    // A snapshot of another recording (another history of the same world).
    let other = tmp.path().join("other");
    let out = Command::new(env!("CARGO_BIN_EXE_lockgrid"))
        .arg("run")
        .arg(town_square())
        .args(["--snapshot-every", "7", "--journal"])
        .arg(&other)
        .output()
        .unwrap();
    assert!(out.status.success());
    let foreign = other.join("snapshots/snapshot-00000000000000000014.lgs");
    std::fs::copy(&foreign, snaps.join("snapshot-00000000000000000020.lgs")).unwrap();
    let out = lockgrid(&["replay", "--verify"], &dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(!stdout.contains("DESYNC"), "{stdout}");
    assert!(
        stderr.contains("snapshot-00000000000000000020.lgs: its digest")
            && stderr.contains("it does not belong to this journal"),
        "{stderr}"
    );
    assert!(
        stdout
            .contains("3 snapshots compared, 1 could not be used (named above): all digests match"),
        "{stdout}"
    );

    for path in &names {
        std::fs::write(path, b"not a snapshot").unwrap();
    }
    let out = lockgrid(&["replay", "--verify"], &dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    for path in &names {
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            stderr.contains(&format!("{name}: unreadable: ")),
            "{name} not named: {stderr}"
        );
    }
    assert!(!stdout.contains("0 snapshots compared"), "{stdout}");
    assert!(
        stdout.contains("no snapshot could be compared: the 4 in the range could not be used"),
        "{stdout}"
    );
}

#[test]
fn tick_ranges_and_flags_that_do_not_apply_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    recorded(&dir);
    let file = tmp.path().join("out.json");
    let file = file.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["replay", "--events", "--from", "500"],
            "--from 500 is past the journal's last tick 40 (it holds ticks 1 to 40)",
        ),
        (
            &["replay", "--events", "--observer", "3", "--from", "41"],
            "--from 41 is past the journal's last tick 40",
        ),
        (
            &["replay", "--events", "--from", "10", "--to", "5"],
            "--from 10 is after --to 5: the range holds no tick",
        ),
        (
            &["replay", "--verify", "--from", "400"],
            "--from 400 is past the journal's last tick 40",
        ),
        (
            &["replay", "--verify", "--to", "41"],
            "--to 41 is past the journal's last tick 40",
        ),
        (
            &["replay", "--export-scenario", file, "--from", "41"],
            "--from 41 is past the journal's last tick 40",
        ),
        (
            &["replay", "--verify", "--observer", "3"],
            "cannot be used with '--observer <ID>'",
        ),
        (
            &["replay", "--export-scenario", file, "--observer", "3"],
            "cannot be used with '--observer <ID>'",
        ),
    ];
    for (args, message) in cases {
        let out = lockgrid(args, &dir);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?} printed output");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    assert!(!Path::new(file).exists(), "an export was written");
    // The last tick itself is in range, for every mode.
    for args in [
        &["replay", "--events", "--from", "40", "--to", "40"][..],
        &["replay", "--verify", "--from", "40"][..],
        &["replay", "--export-scenario", file, "--from", "40"][..],
    ] {
        let out = lockgrid(args, &dir);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
