//! A client written from `docs/protocol.md` alone, in another language,
//! against a real `lockgrid serve`: the specification is wrong wherever the
//! two disagree.
//!
//! The client (`tests/spec_client/lockgrid_client.py`, Python standard
//! library only) knows nothing of the Rust crates. Three of them connect at
//! once, walk their entities well under the Welcome's `max_speed`, send
//! inputs the server must refuse, and report what they saw. Then the
//! server's journal is the judge: every digest a client applied is the
//! journal's for that tick; its final view is the one the kernel's events
//! for its entity build up to its last tick; the journal holds exactly its
//! legal moves for its entity, so the refused ones moved nothing. One client
//! first probes the server's answers before a connection and to protocol
//! violations; another loses, duplicates and reorders datagrams on purpose;
//! the third restarts on the same socket.
//!
//! Without `python3` the test is skipped, unless `CI=true`: there it
//! fails (`.ci/run` installs it).

mod serve_common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use lockgrid_host::decimal::parse_fix;
use serde_json::Value;
use serve_common::{interrupt, run_bounded, start_serve, wait_bounded, BIN};

/// One visible subject: raw x, raw y, heading, raw speed, layers.
type State = (i64, i64, u64, i64, u64);

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/spec_client/lockgrid_client.py")
}

/// Whether `python3` runs here; without it the test is skipped, except in CI.
fn python_available() -> bool {
    let found = Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(!ci, "CI=true but python3 is missing: .ci/run installs it");
        eprintln!("skipped: python3 is missing (apt-get install python3)");
    }
    found
}

/// A JSON number as the raw bits of a fixed-point value (exact decimals).
fn raw(v: &Value) -> i64 {
    let text = match v {
        Value::Number(n) => n.to_string(),
        other => panic!("not a number: {other}"),
    };
    parse_fix(&text)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
        .to_bits()
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

fn uint(v: &Value) -> u64 {
    v.as_u64()
        .unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}

/// Runs a `lockgrid` command that must succeed; returns its stdout.
fn lockgrid(args: &[&str], data: &Path) -> String {
    let out = run_bounded(
        Command::new(BIN).args(args).arg(data),
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "lockgrid {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// What the kernel says about one observer.
struct KernelSide {
    /// The digest of every tick.
    digests: BTreeMap<u64, String>,
    /// The view its events build up to the client's last tick.
    view: BTreeMap<u64, State>,
    /// Every state the kernel reported for each visible subject since its
    /// last Enter, up to that tick.
    reported: BTreeMap<u64, Vec<State>>,
}

/// What `lockgrid replay --events --observer` says about one entity, from
/// tick `from` to `to`, its view folded up to `last`.
fn kernel_side(data: &Path, entity: u64, from: u64, to: u64, last: u64) -> KernelSide {
    let events = lockgrid(
        &[
            "replay",
            "--events",
            "--observer",
            &entity.to_string(),
            "--from",
            &from.to_string(),
            "--to",
            &to.to_string(),
        ],
        data,
    );
    let mut digests = BTreeMap::new();
    let mut view = BTreeMap::new();
    let mut reported: BTreeMap<u64, Vec<State>> = BTreeMap::new();
    for line in events.lines() {
        let e: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        let tick = uint(&e["tick"]);
        let kind = e["type"].as_str().expect("type");
        if kind == "tick" {
            digests.insert(tick, e["digest"].as_str().expect("digest").to_owned());
            continue;
        }
        if tick > last || kind == "rejected" {
            continue;
        }
        assert_eq!(uint(&e["observer"]), entity, "{line}");
        let subject = uint(&e["subject"]);
        match kind {
            "leave" => {
                assert!(view.remove(&subject).is_some(), "{line}");
            }
            "enter" => {
                let state = (
                    raw(&e["pos"][0]),
                    raw(&e["pos"][1]),
                    uint(&e["dir"]),
                    raw(&e["speed"]),
                    uint(&e["layers"]),
                );
                assert!(view.insert(subject, state).is_none(), "{line}");
                reported.insert(subject, vec![state]);
            }
            "update" => {
                let s = view.get_mut(&subject).unwrap_or_else(|| panic!("{line}"));
                s.0 = raw(&e["pos"][0]);
                s.1 = raw(&e["pos"][1]);
                s.2 = uint(&e["dir"]);
                s.3 = raw(&e["speed"]);
                reported.entry(subject).or_default().push(*s);
            }
            other => panic!("unexpected event {other}: {line}"),
        }
    }
    KernelSide {
        digests,
        view,
        reported,
    }
}

/// The journal's commands naming `entity`, by tick: `("move", x, y, dir,
/// speed)` or `("despawn"|"spawn", ..)`.
fn journal_commands(scenario: &Value, entity: u64) -> Vec<(u64, String, Option<State>)> {
    let mut found = Vec::new();
    let ticks = scenario["ticks"].as_array().expect("ticks");
    for (i, tick) in ticks.iter().enumerate() {
        let Some(commands) = tick["commands"].as_array() else {
            continue;
        };
        for c in commands {
            let (kind, body) = c
                .as_object()
                .and_then(|o| o.iter().next())
                .expect("a command object");
            if body["id"].as_u64() != Some(entity) {
                continue;
            }
            let state = (kind == "move").then(|| {
                (
                    raw(&body["pos"][0]),
                    raw(&body["pos"][1]),
                    body.get("dir").map_or(0, uint),
                    body.get("speed").map_or(0, raw),
                    0,
                )
            });
            found.push((i as u64 + 1, kind.clone(), state));
        }
    }
    found
}

/// What one client does besides walking.
#[derive(Clone, Copy, Default)]
struct Role {
    /// Probes the server before connecting (`--probes`).
    probes: bool,
    /// Loses, duplicates and reorders datagrams.
    faulty: bool,
    /// Connects, stops without a Bye, starts again on the same socket.
    restarted: bool,
}

/// A finished run: the data folder, the server's stats, the journal as a
/// scenario, each client's report.
struct Run {
    data: PathBuf,
    stats: Value,
    scenario: Value,
    reports: Vec<Value>,
}

/// Runs the self-test; false when python3 is missing (and CI is not set).
fn ready() -> bool {
    if !python_available() {
        return false;
    }
    let selftest = run_bounded(
        Command::new("python3").arg(script()).arg("--self-test"),
        Duration::from_secs(30),
    );
    assert!(
        selftest.status.success(),
        "the spec's examples:\n{}",
        String::from_utf8_lossy(&selftest.stderr)
    );
    true
}

/// Starts `lockgrid serve` on a small world (8 × 8 cells of 100, so views
/// are never empty) with `npcs` NPCs, runs one client per role at once for
/// `seconds`, and stops the server with Ctrl-C.
fn run(dir: &Path, npcs: &str, extra: &[&str], roles: &[Role], seconds: &str) -> Run {
    let data = dir.join("data");
    let config = dir.join("world.toml");
    std::fs::write(
        &config,
        "[world]\ncell_size = 100\nwidth_cells = 8\nheight_cells = 8\n",
    )
    .expect("config written");
    let config = config.to_str().expect("utf-8 path");
    let mut args = vec!["--npcs", npcs, "--seed", "7", "--seconds", "120"];
    args.extend(["--config", config]);
    args.extend(extra);
    let mut served = start_serve(&data, "127.0.0.1:0", &args);

    let outs: Vec<PathBuf> = (0..roles.len())
        .map(|i| dir.join(format!("client{i}.json")))
        .collect();
    let runs: Vec<_> = outs
        .iter()
        .zip(roles)
        .enumerate()
        .map(|(i, (out, role))| {
            let mut cmd = Command::new("python3");
            cmd.arg(script())
                .args(["--server", &served.addr, "--seconds", seconds])
                .args(["--seed", &i.to_string(), "--out"])
                .arg(out);
            if role.probes {
                cmd.arg("--probes");
            }
            if role.faulty {
                cmd.args(["--loss", "0.15", "--dup", "0.1", "--reorder", "0.2"]);
            }
            if role.restarted {
                cmd.arg("--restart");
            }
            std::thread::spawn(move || run_bounded(&mut cmd, Duration::from_secs(60)))
        })
        .collect();
    for run in runs {
        let out = run.join().expect("client thread");
        assert!(
            out.status.success(),
            "spec client failed:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    interrupt(&served.child);
    let status = wait_bounded(&mut served.child, Duration::from_secs(20));
    assert!(status.success(), "serve exited with {status}");
    let summary = served
        .stdout
        .recv_timeout(Duration::from_secs(5))
        .expect("serve output");
    assert!(summary.contains("journal closed"), "{summary}");

    let stats: Value = serde_json::from_str(
        &std::fs::read_to_string(data.join("serve-stats.json")).expect("stats file"),
    )
    .expect("stats JSON");
    let scenario_file = dir.join("journal.scenario");
    lockgrid(
        &[
            "replay",
            "--export-scenario",
            scenario_file.to_str().expect("utf-8 path"),
        ],
        &data,
    );
    let scenario: Value =
        serde_json::from_str(&std::fs::read_to_string(&scenario_file).expect("scenario written"))
            .expect("scenario JSON");
    let reports = outs
        .iter()
        .map(|path| {
            serde_json::from_str(&std::fs::read_to_string(path).expect("client report"))
                .expect("report JSON")
        })
        .collect();
    Run {
        data,
        stats,
        scenario,
        reports,
    }
}

/// Each client sent one input of each refused kind, and nothing else was
/// refused: its walk is honest by the Welcome's limits.
fn check_refusal_counts(run: &Run, probes: bool) {
    let clients = run.reports.len() as u64;
    let stats = &run.stats;
    let refused = stats["refused"].as_object().expect("refused");
    for (reason, count) in refused {
        let expected = match reason.as_str() {
            // One move one raw unit past the distance allowance, one jump.
            "too_fast" => 2 * clients,
            "bad_speed" | "not_a_move" | "spoofed_id" => clients,
            // Checked below.
            "malformed" => uint(count),
            _ => 0,
        };
        assert_eq!(uint(count), expected, "refused {reason}: {stats}");
    }
    // The three probes the server must leave unanswered (a short Hello and
    // two datagrams shorter than any answer) are counted as malformed, and
    // so are the copies of the packets a faulty client sent twice, but not
    // exactly: a copy of a Bye that reaches a closed connection is not.
    // (The probes' version mismatches and stray packet are answered, not
    // counted.)
    if probes {
        assert!(uint(&refused["malformed"]) >= 3, "{stats}");
    }
}

/// Checks one client's report against the journal. With a budget, the
/// client's view has the kernel's subjects, each in a state the kernel
/// reported for it; without one, exactly the kernel's latest states.
fn check_client(run: &Run, role: Role, report: &Value, budget: Option<u64>) {
    let data = &run.data;
    let scenario = &run.scenario;
    let entity = uint(&report["entity"]);
    let welcome = uint(&report["welcome"]["tick"]);
    let last = uint(&report["last_tick"]);
    let stats = &report["stats"];
    eprintln!("client {entity}: ticks {welcome}..={last}, {stats}");
    assert!(last > welcome + 40, "{entity}: too few ticks applied");
    assert_eq!(
        report["welcome"]["limits"]["budget"].as_u64(),
        budget,
        "{entity}: the Welcome states the budget"
    );
    if role.probes {
        // The server's answers before a connection (short Hellos, other
        // versions, strays from unknown addresses) and to protocol
        // violations on one (a frame of the wrong direction, a gap in the
        // input numbers, an input tick that does not increase).
        let probes = report["probes"].as_object().expect("probes ran");
        assert!(probes.len() >= 9, "{probes:?}");
        for (name, probe) in probes {
            assert_eq!(probe["ok"], true, "probe {name}: {probe}");
        }
    }
    if !role.faulty {
        assert_eq!(report["disconnect"], "closed", "{entity}");
        // The Hello it repeated once connected brought the Welcome again.
        assert_eq!(uint(&stats["welcomes"]), 2, "{entity}");
    } else {
        // The server answers the first Bye it gets with one untracked
        // Disconnect(closed) and forgets the connection; if that answer is
        // lost, the next Bye gets unknown_connection.
        let end = report["disconnect"].as_str().unwrap_or_default();
        assert!(end == "closed" || end == "unknown_connection", "{report}");
        for fault in ["lost_in", "lost_out", "dup_in", "dup_out", "held_in"] {
            assert!(uint(&stats[fault]) > 0, "{entity}: no {fault}: {stats}");
        }
    }
    if budget.is_none() {
        // Without a budget the server knows what the client holds: no reset.
        assert_eq!(uint(&stats["resets"]), 0, "{entity}");
    }

    // Every tick after the Welcome's, consecutively, each with the
    // journal's digest.
    let digests: BTreeMap<u64, String> = report["digests"]
        .as_object()
        .expect("digests")
        .iter()
        .map(|(t, d)| {
            (
                t.parse().expect("tick"),
                d.as_str().expect("hex").to_owned(),
            )
        })
        .collect();
    let ticks: Vec<u64> = digests.keys().copied().collect();
    let to = *ticks.last().expect("some ticks");
    assert_eq!(ticks, (welcome + 1..=to).collect::<Vec<_>>(), "{entity}");
    let kernel = kernel_side(data, entity, welcome + 1, to, last);
    for (tick, digest) in &digests {
        assert_eq!(
            Some(digest),
            kernel.digests.get(tick),
            "{entity}: digest of tick {tick}"
        );
    }

    // The client's view at its last tick.
    let client_view: BTreeMap<u64, State> = report["view"]
        .as_object()
        .expect("view")
        .iter()
        .map(|(id, s)| {
            (
                id.parse().expect("subject id"),
                (
                    int(&s["x"]),
                    int(&s["y"]),
                    uint(&s["dir"]),
                    int(&s["speed"]),
                    uint(&s["layers"]),
                ),
            )
        })
        .collect();
    assert!(
        !kernel.view.is_empty(),
        "{entity}: an empty view proves little"
    );
    if budget.is_none() {
        assert_eq!(client_view, kernel.view, "{entity}: view at tick {last}");
    } else {
        // Membership is never rationed; states are ones the kernel reported.
        let ids: Vec<&u64> = client_view.keys().collect();
        let kernel_ids: Vec<&u64> = kernel.view.keys().collect();
        assert_eq!(ids, kernel_ids, "{entity}: view set at tick {last}");
        let stale = client_view
            .iter()
            .filter(|(id, s)| kernel.view.get(id) != Some(s))
            .count();
        eprintln!("client {entity}: {stale} subjects behind the kernel's state");
        // Otherwise the budget rationed nothing and this proves little.
        assert!(stale > 0, "{entity}: every state current under the budget");
        for (id, state) in &client_view {
            assert!(
                kernel.reported[id].contains(state),
                "{entity}: subject {id} in a state the kernel never reported: {state:?}"
            );
        }
    }

    // The journal holds the entity's spawn at the Welcome's tick + 1,
    // then exactly its legal moves, all acknowledged, in order, then the
    // despawn of its Bye: no refused input moved it.
    let moves = report["moves"].as_array().expect("moves");
    let kinds: Vec<&str> = moves
        .iter()
        .map(|m| m["kind"].as_str().expect("kind"))
        .collect();
    for bad in [
        "edge_too_fast",
        "too_fast",
        "bad_speed",
        "other_entity",
        "despawn",
    ] {
        assert!(kinds.contains(&bad), "{entity}: no {bad} input sent");
    }
    let mut legal = Vec::new();
    let mut sent_after = Vec::new();
    for m in moves {
        assert_eq!(m["acked"], true, "{entity}: unacknowledged input {m}");
        // Each refused input was told, with the reason the document
        // gives; no legal one was.
        let told = match m["kind"].as_str().expect("kind") {
            "legal" | "edge" => Value::Null,
            "edge_too_fast" | "too_fast" => "too_fast".into(),
            "bad_speed" => "bad_speed".into(),
            "other_entity" => "not_yours".into(),
            "despawn" => "not_allowed".into(),
            other => panic!("unknown kind {other}"),
        };
        assert_eq!(m["refused"], told, "{entity}: {m}");
        // "edge": a first move of exactly the whole distance allowance.
        if m["kind"] == "legal" || m["kind"] == "edge" {
            let c = &m["command"];
            legal.push((
                int(&c["x"]),
                int(&c["y"]),
                uint(&c["dir"]),
                int(&c["speed"]),
                0,
            ));
            sent_after.push(uint(&m["sent_after_tick"]));
        }
    }
    let journal = journal_commands(scenario, entity);
    let (first, rest) = journal.split_first().expect("a spawn");
    assert_eq!((first.0, first.1.as_str()), (welcome + 1, "spawn"));
    let (end, walked) = rest.split_last().expect("a despawn");
    assert_eq!(end.1, "despawn", "{entity}");
    assert!(
        end.0 > last,
        "{entity}: despawned at {} before {last}",
        end.0
    );
    let journal_moves: Vec<State> = walked
        .iter()
        .map(|(tick, kind, state)| {
            assert_eq!(kind, "move", "{entity} at tick {tick}");
            state.expect("a move's state")
        })
        .collect();
    assert_eq!(journal_moves, legal, "{entity}: the journal's moves");
    if role.restarted {
        let old = &report["earlier_life"];
        let old_entity = uint(&old["entity"]);
        assert_ne!(old_entity, entity);
        assert!(uint(&stats["dropped_before_welcome"]) > 0, "{stats}");
        // The old entity: spawned, never moved, despawned when the new
        // Hello passed, by the new entity's spawn.
        let old_commands = journal_commands(scenario, old_entity);
        let kinds: Vec<(u64, &str)> = old_commands
            .iter()
            .map(|(t, k, _)| (*t, k.as_str()))
            .collect();
        assert_eq!(kinds.len(), 2, "{kinds:?}");
        assert_eq!(kinds[0], (uint(&old["welcome_tick"]) + 1, "spawn"));
        assert_eq!(kinds[1].1, "despawn");
        assert!(kinds[1].0 > uint(&old["last_tick"]) && kinds[1].0 <= welcome + 1);
    }
    // A move is applied in a tick the server ran after the client sent
    // it, so after every tick the client had applied by then.
    for ((tick, _, _), after) in walked.iter().zip(&sent_after) {
        assert!(
            tick > after,
            "{entity}: a move sent after {after} in {tick}"
        );
    }
}

#[test]
fn a_client_built_from_the_spec_alone_agrees_with_the_server() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let roles = [
        Role {
            probes: true,
            ..Role::default()
        },
        Role {
            faulty: true,
            ..Role::default()
        },
        Role {
            restarted: true,
            ..Role::default()
        },
    ];
    let run = run(dir.path(), "40", &[], &roles, "5");
    check_refusal_counts(&run, true);
    for (role, report) in roles.iter().zip(&run.reports) {
        check_client(&run, *role, report, None);
    }
}

/// Under a budget too small for every Update: the Welcome states it, the
/// view sets stay exact, and the states are ones the kernel reported (the
/// lossy client's resets included).
#[test]
fn under_a_budget_the_spec_client_sees_every_member_and_only_real_states() {
    if !ready() {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let roles = [
        Role::default(),
        Role {
            faulty: true,
            ..Role::default()
        },
    ];
    // 400 NPCs on 64 cells: some 50 subjects in each view, more Updates
    // than the smallest budget the document allows (100 bytes a tick).
    let run = run(dir.path(), "400", &["--budget", "2000"], &roles, "4");
    check_refusal_counts(&run, false);
    for (role, report) in roles.iter().zip(&run.reports) {
        check_client(&run, *role, report, Some(2000));
    }
}
