//! `lockgrid run` as a user runs it: the real binary, real files, exit codes.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn lockgrid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockgrid"))
}

fn town_square() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/town_square.json")
}

fn write_temp(dir: &tempfile::TempDir, name: &str, text: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn malformed_scenario_gives_one_line_and_failure() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_temp(
        &dir,
        "bad.json",
        "{\"ticks\": [\n  {\"commands\": [{\"move\": {\"id\": 1, \"pos\": [0, \"x\"]}}]}\n]}\n",
    );
    let out = lockgrid().arg("run").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr,
        format!(
            "error: {}: ticks[0].commands[0].move.pos[1]: invalid type: string \"x\", expected a JSON number (line 2, column 49)\n",
            path.display()
        )
    );
}

#[test]
fn unreadable_and_invalid_inputs_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        write_temp(&dir, "empty.json", ""),
        write_temp(&dir, "binary.json", "\u{0}\u{1}{"),
        write_temp(&dir, "deep.json", &"[".repeat(1_000_000)),
        write_temp(
            &dir,
            "config.json",
            r#"{"config": {"cell_size": -1}, "ticks": []}"#,
        ),
        write_temp(&dir, "unknown.json", r#"{"ticks": [], "extra": 1}"#),
        dir.path().join("missing.json"),
    ];
    for path in cases {
        let out = lockgrid().arg("run").arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", path.display());
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.starts_with("error: "), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

#[test]
fn bundled_example_streams_every_tick() {
    let out = lockgrid().arg("run").arg(town_square()).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let tick_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("\"type\":\"tick\""))
        .collect();
    assert_eq!(tick_lines.len(), 40);
    assert!(tick_lines[0].starts_with("{\"tick\":1,\"type\":\"tick\",\"digest\":\""));
    for kind in ["enter", "leave", "update", "rejected"] {
        assert!(text.contains(&format!("\"type\":\"{kind}\"")), "no {kind}");
    }
}

#[test]
fn summary_prints_a_table() {
    let out = lockgrid()
        .arg("run")
        .arg(town_square())
        .arg("--summary")
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for row in [
        "ticks",
        "enter",
        "rejected",
        "final digest",
        "step time median",
        "step time max",
    ] {
        assert!(text.contains(row), "no {row} in {text}");
    }
    assert!(text.lines().next().unwrap().ends_with(" 40"), "{text}");
}

#[test]
fn closed_pipe_ends_quietly() {
    // Enough output to overflow a pipe buffer many times over.
    let mut scenario = String::from(
        r#"{"ticks": [{"commands": [{"spawn": {"id": 1, "pos": [100, 100], "observer": true}},
        {"spawn": {"id": 2, "pos": [110, 100], "observer": true}}]}"#,
    );
    for t in 0..20_000 {
        let x = 100 + t % 50;
        scenario.push_str(&format!(
            r#",{{"commands": [{{"move": {{"id": 1, "pos": [{x}, 100]}}}}, {{"move": {{"id": 2, "pos": [110, {x}]}}}}]}}"#
        ));
    }
    scenario.push_str("]}");
    let dir = tempfile::tempdir().unwrap();
    let path = write_temp(&dir, "long.json", &scenario);
    let mut child = lockgrid()
        .arg("run")
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("{\"tick\":1,"));
    // The reader is dropped here: the pipe closes under the writer.
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    assert_eq!(String::from_utf8(out.stderr).unwrap(), "");
    std::io::stdout().flush().unwrap();
}
