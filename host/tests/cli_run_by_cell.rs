//! `lockgrid run --by-cell` as a user runs it: the real binary on a fixture.

use std::path::{Path, PathBuf};
use std::process::Command;

fn lockgrid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockgrid"))
}

fn town_square() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/town_square.json")
}

fn lines(args: &[&str]) -> Vec<serde_json::Value> {
    let out = lockgrid()
        .arg("run")
        .arg(town_square())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn tick_lines(all: &[serde_json::Value]) -> Vec<(u64, String)> {
    all.iter()
        .filter(|v| v["type"] == "tick")
        .map(|v| (v["tick"].as_u64().unwrap(), v["digest"].to_string()))
        .collect()
}

#[test]
fn by_cell_runs_the_same_ticks_and_counts_its_lines() {
    let cells = lines(&["--by-cell"]);
    let observers = lines(&[]);
    // The same world, stepped the same way: the same digests tick by tick.
    assert_eq!(tick_lines(&cells), tick_lines(&observers));

    let mut in_tick = 0;
    let mut kinds = std::collections::BTreeSet::new();
    for v in &cells {
        match v["type"].as_str().unwrap() {
            "tick" => {
                assert_eq!(v["events"].as_u64(), Some(in_tick), "{v}");
                in_tick = 0;
            }
            kind @ ("leave" | "enter" | "update") => {
                assert!(v["entity"].is_u64() && v["cell"][1].is_u64(), "{v}");
                kinds.insert(kind.to_owned());
                in_tick += 1;
            }
            other => panic!("unexpected line type {other}: {v}"),
        }
    }
    assert_eq!(
        kinds.len(),
        3,
        "the fixture exercises every kind: {kinds:?}"
    );
}

#[test]
fn by_cell_refuses_flags_that_do_not_apply() {
    for extra in [&["--summary"][..], &["--journal", "somewhere"][..]] {
        let out = lockgrid()
            .arg("run")
            .arg(town_square())
            .arg("--by-cell")
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert!(stderr.contains("cannot be used with"), "{stderr}");
    }
}
