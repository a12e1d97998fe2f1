//! `lockgrid render`: the picture of a tick, as reviewed SVG snapshots and
//! through the real binary (PNG, data folders, bad requests).

use std::path::{Path, PathBuf};
use std::process::Command;

use lockgrid_host::render::{to_svg, Timeline};
use lockgrid_host::scenario::Scenario;

const BIN: &str = env!("CARGO_BIN_EXE_lockgrid");

fn scenario_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/scenarios")
        .join(name)
}

/// Grid mode, tick 2: observer 1 sees 2 and 3; 4 walks into its nine cells
/// (Enter), 3 walks out (Leave), 5 despawns in view (Leave, gone), a move
/// of an unknown entity and an out-of-bounds spawn are rejected; observer
/// 6 stands elsewhere, heading south-west.
const GRID: &str = r#"{"config": {"cell_size": 10, "width_cells": 12, "height_cells": 8},
 "ticks": [
  {"commands": [
   {"spawn": {"id": 1, "pos": [25, 25], "observer": true, "dir": 16384}},
   {"spawn": {"id": 2, "pos": [31.5, 22]}},
   {"spawn": {"id": 3, "pos": [18, 30]}},
   {"spawn": {"id": 4, "pos": [55, 25], "dir": 32768, "speed": 2}},
   {"spawn": {"id": 5, "pos": [22, 12]}},
   {"spawn": {"id": 6, "pos": [95, 65], "observer": true, "dir": 24576}}
  ]},
  {"commands": [
   {"move": {"id": 4, "pos": [38, 25], "dir": 32768, "speed": 2}},
   {"move": {"id": 3, "pos": [5, 30], "dir": 32768}},
   {"despawn": {"id": 5}},
   {"move": {"id": 9, "pos": [1, 1]}},
   {"spawn": {"id": 7, "pos": [500, 1]}}
  ]}
 ]}"#;

fn svg_of(text: &str, tick: u64, observer: Option<u64>) -> String {
    let scenario = Scenario::from_json_str(text).expect("scenario");
    let timeline = Timeline::index(scenario, |_, _| {}).expect("config");
    let frame = timeline.frame(tick, observer).expect("tick and observer");
    to_svg(timeline.config(), &frame, frame.sight.as_ref())
}

fn snapshot(name: &str, svg: &str) {
    insta::with_settings!({
        snapshot_path => "../../snapshots/render",
        prepend_module_to_snapshot => false,
    }, {
        insta::assert_snapshot!(name, svg);
    });
}

#[test]
fn grid_tick_shows_nine_cells_enters_leaves_and_rejections() {
    let svg = svg_of(GRID, 2, Some(1));
    // What the snapshot must show, checked beside the reviewed text.
    assert!(svg.contains(r#"<rect id="area" x="10" y="10" width="30" height="30""#));
    assert!(svg.contains(r#"<g id="e1" class="chosen" transform="translate(25 25)">"#));
    assert!(svg.contains(r#"<g id="e6" class="observer""#));
    assert!(svg.contains(r#"transform="rotate(135)""#)); // 24576 / 65536 of a turn
    assert!(svg.contains(">enter 1</text>") && svg.contains(">leave 2</text>"));
    assert!(svg.contains(">  move 9: unknown_entity</text>"));
    assert!(svg.contains(">  spawn 7: out_of_bounds</text>"));
    assert!(!svg.contains("id=\"e5\""), "5 despawned");
    snapshot("grid_tick", &svg);
}

#[test]
fn radius_tick_shows_the_radius_and_the_hysteresis_ring() {
    let text = std::fs::read_to_string(scenario_file("hysteresis_band.json")).expect("fixture");
    // Tick 4: subject 2 at 115, past the radius (100) but inside the band (120): still seen.
    let svg = svg_of(&text, 4, None);
    assert!(svg.contains(r#"<circle id="area" cx="0" cy="0" r="100""#));
    assert!(svg.contains(r#"<circle id="hysteresis" cx="0" cy="0" r="120""#));
    assert!(svg.contains(">sees 1</text>"));
    snapshot("radius_tick", &svg);
}

#[test]
fn an_empty_world_and_no_observer_still_draw() {
    let svg = svg_of(GRID, 0, None);
    assert!(svg.contains(">no observer</text>"));
    assert!(svg.contains(r#"viewBox="0 0 120 80""#), "the whole world");
    snapshot("before_the_first_tick", &svg);
}

#[test]
fn every_tick_of_a_long_run_matches_a_straight_run() {
    // Frames come from kept states every 256 ticks; each must equal the
    // world reached by running straight through.
    let mut ticks = Vec::new();
    for t in 0..600u32 {
        let x = 5 + (t * 7) % 100;
        ticks.push(format!(
            r#"{{"commands": [{{"move": {{"id": 2, "pos": [{x}, 40]}}}}]}}"#
        ));
    }
    let text = format!(
        r#"{{"ticks": [{{"commands": [{{"spawn": {{"id": 1, "pos": [50, 40], "observer": true}}}}, {{"spawn": {{"id": 2, "pos": [5, 40]}}}}]}}, {}]}}"#,
        ticks.join(",")
    );
    let scenario = Scenario::from_json_str(&text).expect("scenario");
    let timeline = Timeline::index(scenario.clone(), |_, _| {}).expect("config");
    let mut world = lockgrid_kernel::World::new(scenario.config).expect("config");
    for (i, commands) in scenario.ticks.iter().enumerate() {
        let mut events = Vec::new();
        world.step(commands, &mut events);
        let tick = i as u64 + 1;
        if [1, 255, 256, 257, 511, 512, 513, 601].contains(&tick) {
            let frame = timeline.frame(tick, None).expect("tick");
            assert_eq!(frame.digest, world.digest(), "tick {tick}");
            assert_eq!(frame.events, events, "tick {tick}");
            assert_eq!(timeline.ticks()[i].digest, world.digest());
        }
    }
}

fn lockgrid(args: &[&str]) -> std::process::Output {
    Command::new(BIN)
        .args(args)
        .output()
        .expect("lockgrid runs")
}

#[test]
fn png_output_is_a_real_picture() {
    let dir = tempfile::tempdir().expect("temp dir");
    let png = dir.path().join("tick.png");
    let out = lockgrid(&[
        "render",
        scenario_file("town_square.json").to_str().expect("utf-8"),
        "--tick",
        "12",
        "--observer",
        "2",
        "-o",
        png.to_str().expect("utf-8"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png).expect("png written"),
    ));
    let mut reader = decoder.read_info().expect("a PNG");
    let mut pixels = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut pixels).expect("pixels");
    assert_eq!((info.width, info.height), (1300, 900));
    let bytes = &pixels[..info.buffer_size()];
    let px = info.color_type.samples();
    let first = &bytes[..px];
    let distinct = bytes.chunks(px).filter(|p| p != &first).count();
    assert!(distinct > 10_000, "{distinct} pixels differ from the first");
}

#[test]
fn a_data_folder_draws_as_its_scenario_does() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let scenario = scenario_file("town_square.json");
    let scenario = scenario.to_str().expect("utf-8");
    let data_s = data.to_str().expect("utf-8");
    let run = lockgrid(&["run", scenario, "--journal", data_s, "--summary"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    for tick in ["1", "17", "40"] {
        let from_data = lockgrid(&["render", data_s, "--tick", tick, "--observer", "1"]);
        let from_file = lockgrid(&["render", scenario, "--tick", tick, "--observer", "1"]);
        assert!(
            from_data.status.success(),
            "{}",
            String::from_utf8_lossy(&from_data.stderr)
        );
        assert!(from_data.stdout.starts_with(b"<svg"));
        assert_eq!(from_data.stdout, from_file.stdout, "tick {tick}");
    }
    let svg = dir.path().join("t.svg");
    let out = lockgrid(&[
        "render",
        data_s,
        "--tick",
        "3",
        "-o",
        svg.to_str().expect("utf-8"),
    ]);
    assert!(out.status.success());
    assert!(std::fs::read_to_string(&svg)
        .expect("svg")
        .starts_with("<svg"));
}

#[test]
fn impossible_requests_are_refused_clearly() {
    let scenario = scenario_file("town_square.json");
    let scenario = scenario.to_str().expect("utf-8");
    for (args, message) in [
        (
            vec!["--tick", "41"],
            "error: tick 41 is past the end (the last tick is 40)\n",
        ),
        (
            vec!["--tick", "3", "--observer", "101"],
            "error: entity 101 is an NPC at tick 3, not an observer\n",
        ),
        (
            vec!["--tick", "3", "--observer", "5000"],
            "error: entity 5000 is not alive at tick 3\n",
        ),
        (
            vec!["--tick", "3", "-o", "picture.gif"],
            "error: -o picture.gif: name the file .svg or .png\n",
        ),
    ] {
        let mut all = vec!["render", scenario];
        all.extend(&args);
        let out = lockgrid(&all);
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(String::from_utf8_lossy(&out.stderr), message, "{args:?}");
    }
    let out = lockgrid(&["render", scenario, "--tick", "-1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--tick"), "{stderr}");
    assert!(!stderr.contains("unexpected argument"), "{stderr}");
}
