//! `lockgrid serve` options: a TOML config file, flags over it, bad input.

mod serve_common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use lockgrid_host::journal::JournalReader;
use lockgrid_host::store::journal_path;
use serve_common::{run_bounded, BIN};

/// `lockgrid serve` for one tick on any free port, with `extra` flags.
fn serve_one_tick(data: &Path, extra: &[&str]) -> Output {
    run_bounded(
        Command::new(BIN)
            .args([
                "serve",
                "--addr",
                "127.0.0.1:0",
                "--ticks",
                "1",
                "--data-dir",
            ])
            .arg(data)
            .args(extra)
            .env("RUST_LOG", "warn"),
        Duration::from_secs(30),
    )
}

#[test]
fn config_file_sets_the_world_and_flags_override_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let file = dir.path().join("serve.toml");
    std::fs::write(
        &file,
        "[server]\naddr = \"127.0.0.1:0\"\nnpcs = 5\ntick_rate = 50\nmax_speed = 80.5\n\n[world]\ncell_size = 50\nwidth_cells = 8\nheight_cells = 6\nvisibility = \"radius\"\nhysteresis = 2.5\n",
    )
    .expect("write config");
    let out = run_bounded(
        Command::new(BIN)
            .args(["serve", "--ticks", "6", "--npcs", "3", "--config"])
            .arg(&file)
            .arg("--data-dir")
            .arg(&data)
            .env("RUST_LOG", "warn"),
        Duration::from_secs(30),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.starts_with("lockgrid serve: listening on 127.0.0.1:"),
        "{stdout}"
    );
    assert!(stdout.contains("stopped at tick 6"), "{stdout}");
    let mut reader = JournalReader::open(&journal_path(&data)).expect("journal");
    let config = *reader.config();
    assert_eq!((config.width_cells, config.height_cells), (8, 6));
    assert_eq!(config.cell_size, lockgrid_kernel::Fix::from_num(50));
    // --npcs 3 overrides the file's 5: three spawns in tick 1.
    let first = reader.next_record().expect("readable").expect("tick 1");
    let spawns = first
        .commands
        .iter()
        .filter(|c| matches!(c, lockgrid_kernel::Command::Spawn(_)))
        .count();
    assert_eq!(spawns, 3);
}

#[test]
fn bad_options_fail_with_a_message() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("bad.toml");
    std::fs::write(&file, "[world]\nwidth_cell = 8\n").expect("write");
    for (args, needle) in [
        (
            vec!["--config", file.to_str().expect("utf-8 path")],
            "width_cell",
        ),
        (vec!["--tick-rate", "0"], "--tick-rate"),
        (vec!["--max-speed", "fast"], "--max-speed"),
        (vec!["--max-speed=-3"], "--max-speed"),
    ] {
        let out = serve_one_tick(&dir.path().join("data"), &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn a_second_server_on_the_same_data_folder_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let mut first = serve_common::start_serve(&data, "127.0.0.1:0", &["--seconds", "30"]);
    let out = serve_one_tick(&data, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("in use by another server"), "{stderr}");
    serve_common::interrupt(&first.child);
    let status = serve_common::wait_bounded(&mut first.child, Duration::from_secs(20));
    assert!(status.success());
}
