use lockgrid_kernel::{Command, Config, ConfigError, Fix, Move, Pos, Spawn, Visibility};

use super::{Scenario, ScenarioError};

fn err(text: &str) -> String {
    match Scenario::from_json_str(text) {
        Ok(s) => panic!("parsed: {s:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn defaults_follow_the_brief() {
    let s = Scenario::from_json_str(
        r#"{"ticks": [{"commands": [
            {"spawn": {"id": 1, "pos": [1, 2]}},
            {"move": {"id": 1, "pos": [3, 4]}},
            {"despawn": {"id": 1}}]}, {}]}"#,
    )
    .unwrap();
    assert_eq!(s.config, Config::default());
    assert_eq!(s.config.max_observers, 4096);
    assert_eq!(
        s.ticks,
        vec![
            vec![
                Command::Spawn(Spawn {
                    radius: Fix::from_num(100),
                    ..Spawn::npc(1, Pos::from_ints(1, 2))
                }),
                Command::Move(Move {
                    id: 1,
                    pos: Pos::from_ints(3, 4),
                    dir: 0,
                    speed: Fix::ZERO
                }),
                Command::Despawn { id: 1 },
            ],
            vec![],
        ]
    );
}

#[test]
fn every_key_is_read() {
    let s = Scenario::from_json_str(
        r#"{"config": {"origin": [-100, -50.5], "cell_size": 25, "width_cells": 8,
             "height_cells": 4, "visibility": "radius", "hysteresis": 2.5,
             "update_interval": 5, "move_epsilon": 0.5, "dir_epsilon": 100,
             "max_entities": 10, "max_view": 3, "max_visible": 12},
            "ticks": [{"commands": [{"spawn": {"id": 18446744073709551615, "pos": [0.25, -1e1],
             "dir": 65535, "speed": 1.5, "observer": true, "layers": 6, "interest": 2}}]}]}"#,
    )
    .unwrap();
    let c = s.config;
    assert_eq!(
        c.origin,
        Pos::new(Fix::from_num(-100), Fix::from_num(-50.5))
    );
    assert_eq!(c.cell_size, Fix::from_num(25));
    assert_eq!((c.width_cells, c.height_cells), (8, 4));
    assert_eq!(c.visibility, Visibility::Radius);
    assert_eq!(c.hysteresis, Fix::from_num(2.5));
    assert_eq!(c.update_interval, 5);
    assert_eq!(c.move_epsilon, Fix::from_num(0.5));
    assert_eq!(c.dir_epsilon, 100);
    assert_eq!((c.max_entities, c.max_observers, c.max_view), (10, 10, 3));
    assert_eq!(c.max_visible, Some(12));
    assert_eq!(
        s.ticks[0][0],
        Command::Spawn(Spawn {
            id: u64::MAX,
            pos: Pos::new(Fix::from_num(0.25), Fix::from_num(-10)),
            dir: 65535,
            speed: Fix::from_num(1.5),
            observer: true,
            radius: Fix::from_num(25),
            layers: 6,
            interest: 2,
        })
    );
}

#[test]
fn errors_name_the_location() {
    let text = "{\"ticks\": [\n {\"commands\": []},\n {\"commands\": [{\"despawn\": {\"id\": 1}},\n   {\"move\": {\"id\": 2, \"pos\": {\"x\": 1}}}]}]}";
    assert_eq!(
        err(text),
        "ticks[1].commands[1].move.pos: invalid type: map, expected [x, y] (line 4, column 29)"
    );
    assert_eq!(
        err(r#"{"ticks": [{"commands": [{"move": {"id": 2, "pos": [1]}}]}]}"#),
        "ticks[0].commands[0].move.pos: invalid length 1, expected [x, y] (line 1, column 54)"
    );
    assert_eq!(
        err(r#"{"ticks": [{"commands": [{"move": {"id": 2, "pos": [1, 2, 3]}}]}]}"#),
        "ticks[0].commands[0].move.pos: invalid length 3, expected [x, y] (line 1, column 60)"
    );
    assert!(err(
        r#"{"ticks": [{"commands": [{"spawn": {"id": 1, "pos": [0, 0], "colour": 1}}]}]}"#
    )
    .starts_with("ticks[0].commands[0].spawn.colour: unknown field `colour`, expected one of"));
    assert!(err(r#"{"ticks": [{"commands": [{"jump": {"id": 1}}]}]}"#)
        .starts_with("ticks[0].commands[0]: unknown variant `jump`, expected one of"));
    assert!(err(r#"{"config": {"cell": 5}, "ticks": []}"#)
        .starts_with("config.cell: unknown field `cell`"));
    assert_eq!(
        err(r#"{"config": {}}"#),
        "missing field `ticks` (line 1, column 14)"
    );
    assert_eq!(
        err(r#"{"ticks": [{"commands": [{"move": {"pos": [0, 0]}}]}]}"#),
        "ticks[0].commands[0].move: missing field `id` (line 1, column 49)"
    );
    assert_eq!(
        err(r#"{"ticks": [] } x"#),
        "trailing characters (line 1, column 16)"
    );
    assert_eq!(
        err("{\"ticks\": [,]}"),
        "ticks[0]: expected value (line 1, column 12)"
    );
    assert_eq!(err(""), "EOF while parsing a value (line 1, column 0)");
    assert_eq!(
        err(r#"{"config": {"visibility": "cone"}, "ticks": []}"#),
        "config.visibility: unknown variant `cone`, expected `grid` or `radius` (line 1, column 32)"
    );
}

#[test]
fn numbers_out_of_range_are_errors() {
    assert_eq!(
        err(r#"{"ticks": [{"commands": [{"move": {"id": 1, "pos": [0, 0], "dir": 65536}}]}]}"#),
        "ticks[0].commands[0].move.dir: expected an integer in 0..=65535, found 65536 (line 1, column 72)"
    );
    assert_eq!(
        err(r#"{"ticks": [{"commands": [{"despawn": {"id": -1}}]}]}"#),
        "ticks[0].commands[0].despawn.id: expected an integer in 0..=18446744073709551615, found -1 (line 1, column 47)"
    );
    assert_eq!(
        err(r#"{"ticks": [{"commands": [{"despawn": {"id": 1.5}}]}]}"#),
        "ticks[0].commands[0].despawn.id: expected an integer in 0..=18446744073709551615, found 1.5 (line 1, column 48)"
    );
    assert_eq!(
        err(r#"{"ticks": [{"commands": [{"move": {"id": 1, "pos": [1e300, 0]}}]}]}"#),
        "ticks[0].commands[0].move.pos[0]: 1e+300 is outside the fixed-point range -2^47..2^47 (line 1, column 59)"
    );
    assert_eq!(
        err(r#"{"config": {"layers": 1}, "ticks": []}"#)
            .split(':')
            .next(),
        Some("config.layers")
    );
    assert!(err(
        r#"{"ticks": [{"commands": [{"spawn": {"id": 1, "pos": [0, 0], "layers": 4294967296}}]}]}"#
    )
    .contains("spawn.layers: expected an integer in 0..=4294967295"));
    assert!(
        err(r#"{"ticks": [{"commands": [{"move": {"id": 1, "pos": ["1", 0]}}]}]}"#).starts_with(
            "ticks[0].commands[0].move.pos[0]: invalid type: string \"1\", expected a JSON number"
        )
    );
}

#[test]
fn numbers_are_read_from_their_decimal_text() {
    // 0.1 is not representable: round to nearest (6553.6 → 6554 raw), not via f64.
    let s = Scenario::from_json_str(
        r#"{"ticks": [{"commands": [{"move": {"id": 1, "pos": [0.1, 1e2], "speed": 0.00003814697265625}}]}]}"#,
    )
    .unwrap();
    let Command::Move(m) = s.ticks[0][0] else {
        panic!("not a move")
    };
    assert_eq!(m.pos.x.to_bits(), 6554);
    assert_eq!(m.pos.y, Fix::from_num(100));
    assert_eq!(m.speed.to_bits(), 2); // 2.5 steps, ties to even
    assert_eq!(
        Scenario::from_json_str(r#"{"ticks": [{"commands": [{"despawn": {"id": 7e0}}]}]}"#)
            .unwrap()
            .ticks[0][0],
        Command::Despawn { id: 7 }
    );
}

#[test]
fn invalid_configs_are_typed_errors() {
    assert_eq!(
        Scenario::from_json_str(r#"{"config": {"cell_size": 0}, "ticks": []}"#),
        Err(ScenarioError::Config(ConfigError::CellSize))
    );
    assert_eq!(
        err(r#"{"config": {"max_entities": 4, "max_observers": 5}, "ticks": []}"#),
        "config: max_observers must not exceed max_entities"
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    for depth in [200, 100_000] {
        let text = format!(
            "{{\"ticks\": [{{\"commands\": [{{\"move\": {{\"id\": 1, \"pos\": [0, 0]}}}}]}}], \"x\": {}{}}}",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        assert!(err(&text).starts_with("x: unknown field"), "{depth}");
        let text = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        assert!(err(&text).contains("expected a scenario object"));
        let text = format!(
            "{{\"ticks\": [{{\"commands\": [{{\"move\": {{\"id\": 1, \"pos\": [0, 0, {}{}]}}}}]}}]}}",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        assert!(
            err(&text).contains("invalid length 3, expected [x, y]"),
            "{}",
            err(&text)
        );
        let text = format!(
            "{{\"ticks\": [{{\"commands\": {}{}}}]}}",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        assert!(
            err(&text).starts_with("ticks[0].commands[0]: "),
            "{}",
            err(&text)
        );
    }
}

#[test]
fn errors_stay_on_one_line() {
    let e = err("{\"ticks\": [], \"a\\nb\": 1}");
    assert!(!e.contains('\n'), "{e}");
    assert!(e.starts_with("a\\nb: unknown field `a\\nb`"), "{e}");
}

#[test]
fn written_scenarios_read_back_equal() {
    let text = r#"{"config": {"origin": [-100, -50.5], "cell_size": 25.125, "visibility": "radius",
        "max_entities": 10, "max_observers": 3, "max_view": 5, "max_visible": 7},
        "ticks": [
          {"commands": [{"spawn": {"id": 1, "pos": [0.1, -0.5], "observer": true, "radius": 7.75,
                        "layers": 2, "interest": 3, "dir": 9, "speed": 0.3}},
                        {"spawn": {"id": 2, "pos": [3, 4]}}]},
          {},
          {"commands": [{"move": {"id": 2, "pos": [5, 6], "dir": 1, "speed": 2}},
                        {"move": {"id": 1, "pos": [-7, 8]}}, {"despawn": {"id": 2}}]}]}"#;
    let s = Scenario::from_json_str(text).unwrap();
    let written = s.to_json();
    assert_eq!(
        Scenario::from_json_str(&written),
        Ok(s.clone()),
        "{written}"
    );
    assert!(
        written.contains("{\"spawn\": {\"id\": 2, \"pos\": [3, 4]}}"),
        "{written}"
    );
    assert!(written.contains("\n  {\"commands\": []}"), "{written}");
}
