//! `lockgrid run` and `lockgrid serve` (one node or a cluster's) refuse,
//! before building it, a world that would reserve more memory than the
//! limit, with the figures.

mod cluster_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn lockgrid() -> Command {
    Command::new(env!("CARGO_BIN_EXE_lockgrid"))
}

fn town_square() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/town_square.json")
}

/// A size as `lockgrid` prints it: MiB in tenths, rounded down.
fn mib(bytes: u64) -> String {
    let tenths = u128::from(bytes) * 10 / (1 << 20);
    format!("{}.{} MiB", tenths / 10, tenths % 10)
}

/// What the default world (the options' world) would reserve, as printed.
fn default_world() -> String {
    mib(lockgrid_kernel::Config::default().reserved_bytes())
}

/// What the town square's world would reserve, as printed.
fn town_square_world() -> String {
    let text = std::fs::read_to_string(town_square()).unwrap();
    let scenario = lockgrid_host::scenario::Scenario::from_json_str(&text).unwrap();
    mib(scenario.config.reserved_bytes())
}

fn refused(out: &Output) -> String {
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "nothing runs: {out:?}");
    String::from_utf8(out.stderr.clone()).unwrap()
}

/// `lockgrid serve` on a free port with `--max-memory limit`, `extra`
/// flags and `data` as its data folder, run to its exit.
fn serve(limit: &str, extra: &[&str], data: &Path) -> Output {
    lockgrid()
        .args(["serve", "--addr", "127.0.0.1:0", "--max-memory", limit])
        .args(extra)
        .arg("--data-dir")
        .arg(data)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn run_refuses_a_world_above_the_limit() {
    for by_cell in [false, true] {
        let mut cmd = lockgrid();
        cmd.arg("run")
            .arg(town_square())
            .args(["--max-memory", "1MiB"]);
        if by_cell {
            cmd.arg("--by-cell");
        }
        let stderr = refused(&cmd.output().unwrap());
        assert!(
            stderr.contains("the world would reserve about ")
                && stderr.contains("more than the memory limit of 1.0 MiB (--max-memory)"),
            "{stderr}"
        );
    }
    // The same world under a limit it fits runs.
    let out = lockgrid()
        .arg("run")
        .arg(town_square())
        .args(["--max-memory", "1GiB"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn run_refuses_a_size_it_cannot_read() {
    let out = lockgrid()
        .arg("run")
        .arg(town_square())
        .args(["--max-memory", "lots"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("\"lots\" is not a size"), "{stderr}");
}

#[test]
fn serve_refuses_a_world_above_the_limit_before_creating_anything() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = serve("16MiB", &[], &data);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains(&format!(
            "the world would reserve about {}",
            default_world()
        )) && stderr.contains("more than the memory limit of 16.0 MiB (--max-memory)"),
        "{stderr}"
    );
    assert!(!data.exists(), "no data folder (nor lock file) was created");
}

#[test]
fn serve_counts_what_each_clients_connection_reserves() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // The default world (about 26 MiB) fits 512 MiB; 100 000 connections
    // with room for views of 1 024 subjects do not.
    let out = serve("512MiB", &["--max-clients", "100000"], &data);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("the world and its 100000 clients would reserve about 5.")
            && stderr.contains("GiB")
            && stderr.contains("each client's connection about 5")
            && stderr.contains("more than the memory limit of 512.0 MiB (--max-memory)"),
        "{stderr}"
    );
    assert!(!data.exists(), "no data folder (nor lock file) was created");
}

#[test]
fn serve_checks_the_world_of_an_existing_data_folder() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = lockgrid()
        .arg("run")
        .arg(town_square())
        .arg("--journal")
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    // The options' world (the default) would reserve about 26 MiB: the
    // figure says that the journal's world, the one that would run, is
    // checked.
    let out = serve("4MiB", &[], &data);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the world would reserve about {}",
            town_square_world()
        )),
        "{stderr}"
    );
}

#[test]
fn a_cluster_node_checks_the_streams_world_and_its_clients() {
    let Some(nats) = cluster_common::nats_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let servers = cluster_common::start_nats(&nats, &dir.path().join("nats"), 1);
    let url = servers[0].url();
    let cluster = |limit: &str, extra: &[&str], data: &str| {
        let mut args = vec!["--cluster", &url, "--world", "sized"];
        args.extend_from_slice(extra);
        serve(limit, &args, &dir.path().join(data))
    };

    // A new world above the limit is refused before it is stored...
    let stderr = refused(&cluster("16MiB", &["--ticks", "5"], "a"));
    assert!(
        stderr.contains(&format!(
            "the world would reserve about {}",
            default_world()
        )) && stderr.contains("more than the memory limit of 16.0 MiB (--max-memory)"),
        "{stderr}"
    );
    // ...so the next node stores its own, a small one, and runs.
    let small = ["--ticks", "5", "--max-clients", "16", "--config"];
    let config = dir.path().join("small.toml");
    std::fs::write(&config, "[world]\nmax_entities = 64\nmax_view = 16\n").unwrap();
    let mut args = small.to_vec();
    args.push(config.to_str().unwrap());
    let out = cluster("16MiB", &args, "b");
    assert!(out.status.success(), "{out:?}");

    // The stored world is what a joining node checks, not its options'
    // (the default world, about 26 MiB, would not fit 4 MiB)...
    let out = cluster("4MiB", &["--ticks", "5", "--max-clients", "16"], "c");
    assert!(out.status.success(), "{out:?}");
    // ...with each of its clients' connections.
    let stderr = refused(&cluster(
        "64MiB",
        &["--ticks", "5", "--max-clients", "100000"],
        "d",
    ));
    assert!(
        stderr.contains("the world and its 100000 clients would reserve about ")
            && stderr.contains("more than the memory limit of 64.0 MiB (--max-memory)"),
        "{stderr}"
    );
}
