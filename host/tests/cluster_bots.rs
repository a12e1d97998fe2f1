//! `lockgrid bots --server A,B` spreads its clients over the nodes of a
//! cluster and moves a client to the other node when its own is killed.

mod cluster_common;

use std::process::{Command, Stdio};
use std::time::Duration;

use cluster_common::*;

#[test]
fn bots_spread_over_nodes_and_move_when_one_dies() {
    let Some(nats) = nats_server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let servers = start_nats(&nats, &tmp.path().join("nats"), 1);
    let url = servers[0].url();
    let a = start_node(&url, "bots", &tmp.path().join("a"), &[]);
    let mut b = start_node(&url, "bots", &tmp.path().join("b"), &[]);
    let list = format!("{},{}", a.addr, b.addr);
    let bots = Command::new(BIN)
        .args([
            "bots",
            "--clients",
            "6",
            "--seconds",
            "9",
            "--no-verify",
            "--server",
            &list,
        ])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    b.kill();
    let out = bots.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("6 started, 6 connected"), "{text}");
    let moved: u64 = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("moved")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    assert!(
        moved >= 3,
        "the three clients of the killed node moved: {text}"
    );
    // The survivor still agrees with the stream.
    let (ok, out, err) = lockgrid(&["replay", &format!("{url}/bots"), "--verify"]);
    assert!(ok, "{out}{err}");
}
