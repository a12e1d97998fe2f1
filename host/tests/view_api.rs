//! `lockgrid view`'s JSON endpoints, without a browser: what the page
//! shows equals what `lockgrid replay` says, and bad requests get clear
//! errors.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lockgrid_host::replay::{write_events, EventFilter, TickRange};
use lockgrid_host::scenario::Scenario;
use lockgrid_host::view::{respond, Index, Source};
use serde_json::Value;

fn ready(index: &Arc<Index>) -> Vec<Value> {
    let until = Instant::now() + Duration::from_secs(120);
    let mut seen = Vec::new();
    loop {
        let reply = respond(index, "t", "/api/progress");
        assert_eq!(reply.status, 200);
        let v: Value = serde_json::from_slice(&reply.body).expect("JSON");
        let state = v["state"].as_str().expect("state").to_owned();
        seen.push(v);
        match state.as_str() {
            "ready" => return seen,
            "indexing" => {}
            other => panic!("{other}: {seen:?}"),
        }
        assert!(Instant::now() < until, "indexing did not finish");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn get(index: &Index, url: &str) -> (u16, Value) {
    let reply = respond(index, "t", url);
    (
        reply.status,
        serde_json::from_slice(&reply.body).unwrap_or(Value::Null),
    )
}

fn data_folder(dir: &Path) -> std::path::PathBuf {
    let data = dir.join("data");
    let scenario =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios/town_square.json");
    let out = Command::new(env!("CARGO_BIN_EXE_lockgrid"))
        .arg("run")
        .arg(&scenario)
        .arg("--journal")
        .arg(&data)
        .arg("--summary")
        .output()
        .expect("lockgrid runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    data
}

#[test]
fn every_tick_and_observer_lists_what_replay_lists() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = data_folder(dir.path());
    let index = Index::start(Source::DataDir(data.clone()));
    let seen = ready(&index);
    let last = seen.last().expect("a reply");
    assert_eq!(last["last_tick"], 40);
    assert_eq!(last["visibility"], "radius");

    let (status, ticks) = get(&index, "/api/ticks");
    assert_eq!(status, 200);
    let mut all = Vec::new();
    write_events(
        &data,
        TickRange::default(),
        EventFilter::default(),
        &mut all,
    )
    .expect("replay");
    let tick_lines: Vec<Value> = String::from_utf8(all)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON"))
        .filter(|v| v["type"] == "tick")
        .collect();
    let listed = ticks["ticks"].as_array().expect("ticks");
    assert_eq!(listed.len(), 40);
    for (page, replayed) in listed.iter().zip(&tick_lines) {
        assert_eq!(page["tick"], replayed["tick"]);
        assert_eq!(page["digest"], replayed["digest"]);
        assert_eq!(
            page["view_events"].as_u64().unwrap_or(0) + page["rejected"].as_u64().unwrap_or(0),
            replayed["events"].as_u64().expect("count")
        );
    }

    let mut compared = 0;
    for t in 1..=40u64 {
        let (status, tick) = get(&index, &format!("/api/tick?t={t}"));
        assert_eq!(status, 200);
        for id in tick["observers"].as_array().expect("observers") {
            let id: u64 = id.as_str().expect("a string id").parse().expect("an id");
            let (status, v) = get(&index, &format!("/api/tick?t={t}&observer={id}"));
            assert_eq!(status, 200);
            let mut expected = Vec::new();
            let range = TickRange {
                from: t,
                to: Some(t),
            };
            write_events(
                &data,
                range,
                EventFilter { observer: Some(id) },
                &mut expected,
            )
            .expect("replay");
            let expected: Vec<String> = String::from_utf8(expected)
                .expect("utf-8")
                .lines()
                .map(str::to_owned)
                .collect();
            let listed: Vec<String> = serde_json::from_value(v["events"].clone()).expect("lines");
            assert_eq!(listed, expected, "tick {t}, observer {id}");
            compared += 1;
        }
    }
    assert!(compared >= 40, "{compared}");
    let reply = respond(&index, "t", "/api/tick.svg?t=7&observer=2");
    assert_eq!((reply.status, reply.content_type), (200, "image/svg+xml"));
    assert!(reply.body.starts_with(b"<svg"));
    let page = respond(&index, "t", "/");
    assert!(String::from_utf8_lossy(&page.body).contains("<progress id=\"progress\""));
}

#[test]
fn bad_requests_get_clear_errors() {
    let scenario = Scenario::from_json_str(
        r#"{"ticks": [{"commands": [{"spawn": {"id": 1, "pos": [5, 5], "observer": true}}, {"spawn": {"id": 2, "pos": [6, 5]}}]}]}"#,
    )
    .expect("scenario");
    let index = Index::start(Source::Scenario(Box::new(scenario)));
    ready(&index);
    for (url, status, message) in [
        ("/api/tick", 400, "t: the tick is required"),
        (
            "/api/tick?t=2",
            404,
            "tick 2 is past the end (the last tick is 1)",
        ),
        (
            "/api/tick?t=1&observer=2",
            404,
            "entity 2 is an NPC at tick 1, not an observer",
        ),
        (
            "/api/tick?t=-1",
            400,
            "t: expected an unsigned integer, found \"-1\"",
        ),
        ("/api/tick?t=1&zoom=2", 400, "unknown parameter \"zoom\""),
        ("/etc/passwd", 404, "no such page: /etc/passwd"),
    ] {
        let (got, v) = get(&index, url);
        assert_eq!((got, v["error"].as_str()), (status, Some(message)), "{url}");
    }
    let (_, v) = get(&index, "/api/ticks?from=5&to=2");
    assert_eq!(v["ticks"], Value::Array(Vec::new()));
}

#[test]
fn a_long_run_reports_progress_until_ready() {
    let mut ticks =
        vec![r#"{"commands": [{"spawn": {"id": 1, "pos": [5, 5], "observer": true}}]}"#.to_owned()];
    for t in 0..30_000u32 {
        let x = 5 + t % 50;
        ticks.push(format!(
            r#"{{"commands": [{{"move": {{"id": 1, "pos": [{x}, 5]}}}}]}}"#
        ));
    }
    let text = format!(r#"{{"ticks": [{}]}}"#, ticks.join(","));
    let scenario = Scenario::from_json_str(&text).expect("scenario");
    let index = Index::start(Source::Scenario(Box::new(scenario)));
    // Before indexing is done, the data endpoints say so.
    let early = respond(&index, "t", "/api/tick?t=1");
    assert!(
        early.status == 503 || early.status == 200,
        "{}",
        early.status
    );
    let seen = ready(&index);
    let mut last_done = 0;
    for v in &seen[..seen.len() - 1] {
        let (done, total) = (
            v["done"].as_u64().expect("done"),
            v["total"].as_u64().expect("total"),
        );
        assert!(total == 0 || total == 30_001, "{v}");
        assert!(done <= total.max(done) && done >= last_done, "{v}");
        last_done = done;
    }
    assert_eq!(seen.last().expect("ready")["last_tick"], 30_001);
}
