//! The sample `lockgrid.toml` at the root of the repository starts a server
//! and means what its comments say.

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
