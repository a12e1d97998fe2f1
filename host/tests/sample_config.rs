//! The sample `lockgrid.toml` at the root of the repository starts a server,
//! means what its comments say, and shows every key a config may hold.

mod serve_common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use lockgrid_host::decimal::parse_fix;
use lockgrid_host::journal::JournalReader;
use lockgrid_host::store::journal_path;
use lockgrid_kernel::{Config, Fix, Visibility};
use serve_common::{run_bounded, BIN};

#[test]
fn the_sample_config_starts_a_server() {
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("../lockgrid.toml");
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    // Flags override the file's address and data folder, so the test
    // neither needs port 7777 nor writes into the repository.
    let out = run_bounded(
        Command::new(BIN)
            .args(["serve", "--config"])
            .arg(&sample)
            .args(["--addr", "127.0.0.1:0", "--ticks", "3", "--data-dir"])
            .arg(&data)
            .env("RUST_LOG", "warn"),
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("stopped at tick 3"), "{stdout}");

    let mut reader = JournalReader::open(&journal_path(&data)).expect("journal");
    let expected = Config {
        visibility: Visibility::Radius,
        hysteresis: parse_fix("12.5").expect("decimal"),
        ..Config::default()
    };
    assert_eq!(*reader.config(), expected);
    assert_eq!(expected.cell_size, Fix::from_num(100));
    // npcs = 20: twenty spawns in the first tick.
    let first = reader.next_record().expect("readable").expect("tick 1");
    let spawns = first
        .commands
        .iter()
        .filter(|c| matches!(c, lockgrid_kernel::Command::Spawn(_)))
        .count();
    assert_eq!(spawns, 20);
}

/// The keys `serve --config` accepts in `table`, as its refusal of an
/// unknown key lists them.
fn accepted_keys(table: &str) -> Vec<String> {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("unknown.toml");
    std::fs::write(&file, format!("[{table}]\nno_such_key = 1\n")).expect("write config");
    let out = run_bounded(
        Command::new(BIN)
            .args(["serve", "--addr", "127.0.0.1:0", "--ticks", "1", "--config"])
            .arg(&file)
            .arg("--data-dir")
            .arg(dir.path().join("data"))
            .env("RUST_LOG", "warn"),
        Duration::from_secs(60),
    );
    assert!(!out.status.success(), "an unknown key was accepted");
    let message = String::from_utf8_lossy(&out.stderr).into_owned();
    let list = message
        .split("expected one of ")
        .nth(1)
        .unwrap_or_else(|| panic!("no list of keys in {message}"));
    let keys: Vec<String> = list
        .split(',')
        .map(|k| k.trim().trim_matches('`').to_owned())
        .filter(|k| !k.is_empty() && !k.contains(char::is_whitespace))
        .collect();
    assert!(keys.len() > 5, "{message}");
    keys
}

#[test]
fn the_sample_config_shows_every_key() {
    let sample =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../lockgrid.toml"))
            .expect("the sample config");
    let world_at = sample.find("\n[world]").expect("a [world] table");
    let (server, world) = sample.split_at(world_at);
    for (table, text) in [("server", server), ("world", world)] {
        for key in accepted_keys(table) {
            // Set or shown commented out, with its default or an example.
            let shown = text.lines().any(|line| {
                let line = line.trim_start_matches('#').trim_start();
                line.strip_prefix(key.as_str())
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
            });
            assert!(shown, "lockgrid.toml does not show [{table}] {key}");
        }
    }
}
