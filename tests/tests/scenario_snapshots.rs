//! Named scenario fixtures (`tests/scenarios/*.json`): each one's JSON Lines
//! event stream is a reviewed insta snapshot under the top-level
//! `snapshots/`, its final digest is a committed golden value, and its
//! events agree with the oracle.
//!
//! A changed snapshot or digest is a behaviour change: review the diff
//! against the contract before accepting it.

use lockgrid_host::run;
use lockgrid_host::scenario::Scenario;
use lockgrid_tests::{check, gen};

/// Fixture name → final digest, as 16 hex digits.
const GOLDEN: &[(&str, &str)] = &[
    ("cell_border", "3248e1469a6b2641"),
    ("hysteresis_band", "1dae9d817485ac85"),
    ("crowd_beyond_max_view", "084cb07dc3fb7f4c"),
    ("observer_spawns_into_crowd", "09d5de54e0294f5e"),
    ("despawn_respawn_same_tick", "a57c25a1da439196"),
    ("rejected_commands", "c4d1bb72787d6baa"),
    ("npc_area_observer_walks", "100c600f5bd2f427"),
    ("update_throttle", "e88572c307105439"),
    ("visible_pairs_bound", "9ab263f788ecf061"),
];

fn load(name: &str) -> Scenario {
    let path = format!("{}/scenarios/{name}.json", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Scenario::from_json_str(&text).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn event_stream(scenario: &Scenario) -> (String, u64) {
    let mut out = Vec::new();
    let summary = run::run_scenario(scenario, &mut out).expect("fixtures run");
    let text = String::from_utf8(out).expect("the event stream is ASCII");
    (text, summary.final_digest)
}

#[test]
fn fixtures_match_their_snapshots_and_digests() {
    let mut wrong = Vec::new();
    for (name, digest) in GOLDEN {
        let scenario = load(name);
        let (text, final_digest) = event_stream(&scenario);
        insta::with_settings!({
            snapshot_path => "../../snapshots",
            prepend_module_to_snapshot => false,
            description => format!("tests/scenarios/{name}.json"),
        }, {
            insta::assert_snapshot!(*name, text);
        });
        let got = format!("{final_digest:016x}");
        if got != *digest {
            wrong.push(format!("{name}: golden {digest}, got {got}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "final digests changed:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn fixtures_agree_with_the_oracle() {
    let mut names: Vec<&str> = GOLDEN.iter().map(|(n, _)| *n).collect();
    // The bundled example, too.
    names.push("town_square");
    for name in names {
        let s = load(name);
        let s = gen::Scenario {
            config: s.config,
            ticks: s.ticks,
        };
        if let Err(e) = check::against_oracle(&s) {
            panic!("{name}: {e}");
        }
    }
}

#[test]
fn every_fixture_is_listed() {
    for path in lockgrid_tests::scenario_fixtures() {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        if name == "town_square" {
            continue;
        }
        assert!(
            GOLDEN.iter().any(|(n, _)| *n == name),
            "{name} has no golden digest"
        );
    }
}
