//! The `lockgrid` binary refuses what it cannot do, clearly: exact config
//! numbers, negative flag values, inputs too large, scenario shapes, `-`
//! for standard input, and the first line of `--help`.

mod serve_common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use lockgrid_host::decimal::parse_fix;
use lockgrid_host::journal::JournalReader;
use lockgrid_host::store::journal_path;
use lockgrid_kernel::{Config, Fix, Pos};
use serve_common::{run_bounded, BIN};

fn lockgrid(args: &[&str]) -> Output {
    run_bounded(
        Command::new(BIN).args(args).env("RUST_LOG", "warn"),
        Duration::from_secs(60),
    )
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Serves one tick with `config` and returns the world config the journal holds.
fn served_world(config: &str) -> Result<Config, String> {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("lockgrid.toml");
    std::fs::write(&file, config).expect("write config");
    let data = dir.path().join("data");
    let out = lockgrid(&[
        "serve",
        "--addr",
        "127.0.0.1:0",
        "--ticks",
        "1",
        "--config",
        file.to_str().expect("utf-8 path"),
        "--data-dir",
        data.to_str().expect("utf-8 path"),
    ]);
    if !out.status.success() {
        return Err(stderr(&out));
    }
    let reader = JournalReader::open(&journal_path(&data)).expect("journal");
    Ok(*reader.config())
}

#[test]
fn config_numbers_are_read_from_their_text_exactly() {
    // Just above half a step: JSON rounds it up to one step; through f64 it was 0.
    let config = served_world(
        "[world]\nvisibility = \"radius\"\nhysteresis = 0.0000076293945312500000001\n\
         origin = [-0.1, 0x10]\ncell_size = 1_000.5\nwidth_cells = +8\nmove_epsilon = 25e-2\n",
    )
    .expect("serve starts");
    assert_eq!(config.hysteresis, Fix::from_bits(1));
    assert_eq!(
        config.origin,
        Pos::new(parse_fix("-0.1").expect("decimal"), Fix::from_num(16))
    );
    assert_eq!(config.cell_size, parse_fix("1000.5").expect("decimal"));
    assert_eq!(config.width_cells, 8);
    assert_eq!(config.move_epsilon, Fix::from_bits(1 << 14));
    // The same number in scenario JSON gives the same value.
    let json = lockgrid_host::scenario::Scenario::from_json_str(
        r#"{"config": {"hysteresis": 0.0000076293945312500000001}, "ticks": []}"#,
    )
    .expect("scenario");
    assert_eq!(json.config.hysteresis, config.hysteresis);
}

#[test]
fn non_finite_config_numbers_are_errors_naming_the_key() {
    for (text, key, value) in [
        ("[world]\ncell_size = nan\n", "cell_size", "nan"),
        ("[world]\nhysteresis = -inf\n", "hysteresis", "-inf"),
        ("[world]\norigin = [0, +inf]\n", "origin[1]", "inf"),
        ("[server]\nmax_speed = inf\n", "[server] max_speed", "inf"),
    ] {
        let message = served_world(text).expect_err(text);
        assert!(message.contains(key), "{text}: {message}");
        assert!(message.contains(value), "{text}: {message}");
        assert!(message.contains("not a finite number"), "{text}: {message}");
        assert!(!message.contains("--max-speed"), "{text}: {message}");
    }
}

#[test]
fn a_non_finite_client_timeout_is_a_config_error_naming_the_key() {
    for text in [
        "[server]\nclient_timeout = nan\n",
        "[server]\nclient_timeout = -1\n",
    ] {
        let message = served_world(text).expect_err(text);
        assert!(
            message.contains("lockgrid.toml: [server] client_timeout"),
            "{message}"
        );
        assert!(!message.contains("--client-timeout"), "{message}");
    }
}

#[test]
fn a_word_for_max_speed_is_a_config_error_naming_the_key() {
    let message = served_world("[server]\nmax_speed = \"fast\"\n").expect_err("refused");
    assert!(message.contains("lockgrid.toml"), "{message}");
    assert!(message.contains("[server] max_speed"), "{message}");
    assert!(message.contains("expected a number"), "{message}");
    assert!(!message.contains("--max-speed"), "{message}");
    let message = served_world("[server]\nmax_speed = 0\n").expect_err("refused");
    assert!(
        message.contains("[server] max_speed 0: must be positive"),
        "{message}"
    );
}

#[test]
fn negative_flag_values_are_validated_not_taken_for_flags() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let data = data.to_str().expect("utf-8 path");
    let cases: [(&[&str], &str); 8] = [
        (
            &["serve", "--data-dir", data, "--seconds", "-1"],
            "--seconds",
        ),
        (
            &["serve", "--data-dir", data, "--max-speed", "-5"],
            "--max-speed -5: must be positive",
        ),
        (
            &["serve", "--data-dir", data, "--max-speed=-5"],
            "--max-speed -5: must be positive",
        ),
        (&["serve", "--data-dir", data, "--ticks", "-1"], "--ticks"),
        (
            &["bots", "--data-dir", data, "--seconds", "-1"],
            "--seconds",
        ),
        (
            &["bots", "--data-dir", data, "--max-speed", "-5"],
            "--max-speed -5: must be positive",
        ),
        (&["replay", data, "--events", "--from", "-1"], "--from"),
        (
            &["run", "x.json", "--journal", data, "--snapshot-every", "-2"],
            "--snapshot-every",
        ),
    ];
    for (args, needle) in cases {
        let out = lockgrid(args);
        let message = stderr(&out);
        assert!(!out.status.success(), "{args:?}");
        assert!(message.contains(needle), "{args:?}: {message}");
        assert!(
            !message.contains("unexpected argument"),
            "{args:?}: {message}"
        );
        assert!(!message.contains(data), "{args:?}: {message}");
    }
    assert!(!Path::new(data).exists(), "no data folder was made");
}

#[test]
fn an_array_is_not_a_scenario_and_no_type_name_shows() {
    for text in [
        "[]",
        "[1, 2]",
        "{\"ticks\": [5]}",
        "{\"ticks\": [{\"commands\": [7]}]}",
    ] {
        let out = run_stdin(&["run", "-"], text);
        let message = stderr(&out);
        assert!(!out.status.success(), "{text}");
        assert!(
            message.starts_with("error: standard input: "),
            "{text}: {message}"
        );
        assert!(!message.contains("De"), "{text}: {message}");
    }
    let message = stderr(&run_stdin(&["run", "-"], " []"));
    assert_eq!(
        message,
        "error: standard input: expected a scenario object {\"config\": {...}, \"ticks\": [...]}, \
         found an array (line 1, column 2)\n"
    );
}

fn run_stdin(args: &[&str], input: &str) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lockgrid starts");
    let mut stdin = child.stdin.take().expect("piped");
    let input = input.to_owned();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child.wait_with_output().expect("lockgrid ends");
    writer.join().expect("writer thread");
    out
}

#[test]
fn a_dash_reads_the_scenario_from_standard_input() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/town_square.json");
    let text = std::fs::read_to_string(&path).expect("example scenario");
    let from_stdin = run_stdin(&["run", "-"], &text);
    let from_file = lockgrid(&["run", path.to_str().expect("utf-8 path")]);
    assert!(from_stdin.status.success(), "{}", stderr(&from_stdin));
    assert!(!from_stdin.stdout.is_empty());
    assert_eq!(from_stdin.stdout, from_file.stdout);
}

#[test]
fn summary_rows_line_up() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/rejected_commands.json");
    let out = lockgrid(&["run", path.to_str().expect("utf-8 path"), "--summary"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(text.contains("    unknown_entity"), "{text}");
    let widths: Vec<usize> = text.lines().map(|l| l.chars().count()).collect();
    assert!(widths.len() > 10, "{text}");
    assert!(widths.iter().all(|w| *w == widths[0]), "{widths:?}\n{text}");
    for line in text.lines() {
        let label_end = line.find("  ").unwrap_or(line.len());
        assert!(label_end < 19, "{line}");
    }
}

#[test]
fn help_opens_with_what_lockgrid_is() {
    let out = lockgrid(&["--help"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        text.starts_with("lockgrid: a deterministic lockstep area-of-interest kernel"),
        "{text}"
    );
    for command in ["serve", "bots", "run", "replay"] {
        assert!(text.contains(&format!("  {command} ")), "{command}: {text}");
    }
}

#[test]
fn inputs_larger_than_the_limits_are_refused_before_reading() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Sparse files: the size is there, the bytes are not.
    let scenario = dir.path().join("huge.json");
    std::fs::File::create(&scenario)
        .and_then(|f| f.set_len(lockgrid_host::scenario::MAX_SCENARIO_BYTES + 1))
        .expect("sparse file");
    let out = lockgrid(&["run", scenario.to_str().expect("utf-8 path")]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("a scenario may hold at most 268435456 bytes"),
        "{}",
        stderr(&out)
    );
    let message = served_world(&format!("# {}\n", "x".repeat(1 << 20))).expect_err("refused");
    assert!(
        message.contains("a config file may hold at most 1048576 bytes"),
        "{message}"
    );
}

#[test]
fn a_budget_is_a_size_per_second_and_zero_is_refused() {
    served_world("[server]\nbudget = \"32KiB\"\n").expect("a size with a unit");
    served_world("[server]\nbudget = 8000\n").expect("plain bytes");
    let message = served_world("[server]\nbudget = 0\n").expect_err("refused");
    assert!(
        message.contains("[server] budget 0: a budget must be positive"),
        "{message}"
    );
    let message = served_world("[server]\nbudget = \"8GiB\"\n").expect_err("refused");
    assert!(message.contains("[server] budget 8GiB"), "{message}");
    let message = serve_refuses("--budget", "0");
    assert!(message.contains("a budget must be positive"), "{message}");
}

#[test]
fn threads_run_from_one_to_eight() {
    // Radius mode without hysteresis, where the sweep (the part that
    // splits over threads) can run.
    let radius = "[world]\nvisibility = \"radius\"\n[server]\nnpcs = 40\nthreads = 4\n";
    served_world(radius).expect("4 threads");
    let message = served_world("[server]\nthreads = 9\n").expect_err("refused");
    assert!(
        message.contains("[server] threads 9: from 1 to 8"),
        "{message}"
    );
    let message = serve_refuses("--threads", "0");
    assert!(message.contains("--threads"), "{message}");
}

/// Starts `serve` with `flag value` on a fresh data folder; it must fail.
/// Returns what it said.
fn serve_refuses(flag: &str, value: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let out = lockgrid(&[
        "serve",
        "--data-dir",
        data.to_str().expect("utf-8 path"),
        flag,
        value,
    ]);
    assert!(!out.status.success(), "serve {flag} {value} started");
    stderr(&out)
}

#[test]
fn a_zero_spawn_area_is_a_config_error_naming_the_key() {
    let message = served_world("[server]\nspawn_area = 0\n").expect_err("refused");
    assert!(
        message.contains("[server] spawn_area 0: at least 1 cell"),
        "{message}"
    );
    served_world("[server]\nspawn_area = 64\n").expect("a world-wide spawn area serves");
}
