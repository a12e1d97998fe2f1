//! Negative controls of the cluster: a record in the stream whose digest is
//! not the kernel's (a tampered tick) stops a node joining the world with a
//! desync report, and `replay nats://… --verify` reports it; a message that
//! is not a tick record at all stops a node with an error naming its
//! stream sequence. Nothing is skipped silently.

mod cluster_common;

use std::process::Command as Process;
use std::time::Duration;

use cluster_common::*;
use lockgrid_host::cluster::log::{connect, Appended, ClusterLog};
use lockgrid_host::cluster::record::encode_tick;
use lockgrid_kernel::{Command, Config};

/// Appends `bytes` as tick `tick` of `world`, as a leader would.
fn append_raw(url: &str, world: &str, tick: u64, bytes: Vec<u8>) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = connect(&[url.to_owned()]).await.unwrap();
        let log = ClusterLog::open(client, 1, world, Duration::from_secs(1))
            .await
            .unwrap();
        log.world_config(&Config::default()).await.unwrap();
        assert!(matches!(
            log.append(tick, bytes, "").await.unwrap(),
            Appended::Taken
        ));
    });
}

/// Runs a node of `world` until it stops by itself (bounded); its status and stderr.
fn run_node_until_it_stops(url: &str, world: &str, data: &std::path::Path) -> (bool, String) {
    let out = Process::new(BIN)
        .args(["serve", "--cluster", url, "--world", world])
        .args(["--addr", "127.0.0.1:0", "--seconds", "20", "--data-dir"])
        .arg(data)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_tampered_record_is_a_desync_and_garbage_names_its_sequence() {
    let Some(nats) = nats_server() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let servers = start_nats(&nats, &tmp.path().join("nats"), 1);
    let url = servers[0].url();

    // A world of 20 honest ticks, by one node that then stops.
    write_world(&url, "tamper", 20, &tmp.path().join("writer"));
    let honest = read_digests(&tmp.path().join("writer"));
    let last = *honest.keys().max().expect("the writer applied ticks");
    assert!(last >= 20);

    // Tick last+1 with a valid checksum but a digest the kernel does not compute.
    let forged = encode_tick(
        last + 1,
        &[Command::Despawn { id: 1 }],
        0x0bad_0bad_0bad_0bad,
    );
    append_raw(&url, "tamper", last + 1, forged);

    let joiner = tmp.path().join("joiner");
    let (ok, err) = run_node_until_it_stops(&url, "tamper", &joiner);
    assert!(!ok, "a node fed a tampered record kept serving");
    let seq = format!("stream sequence {}", last + 1);
    assert!(err.contains("desync") && err.contains(&seq), "{err}");
    let report = std::fs::read_to_string(joiner.join(format!("desync-{:020}.txt", last + 1)))
        .expect("a desync report");
    assert!(report.contains("0bad0bad0bad0bad"), "{report}");
    assert!(report.contains("Despawn"), "{report}");
    // Every tick before it was checked and agreed.
    let joined = read_digests(&joiner);
    assert_eq!(joined, honest);

    let address = format!("{url}/tamper");
    let (ok, out, err) = lockgrid(&["replay", &address, "--verify"]);
    assert!(!ok, "replay --verify passed a tampered stream: {out}");
    assert!(
        format!("{out}{err}").contains(&format!("desync at tick {}", last + 1)),
        "{out}{err}"
    );

    // A message that is no record at all, in another world.
    append_raw(
        &url,
        "garbage",
        1,
        b"not a tick record, just bytes".to_vec(),
    );
    let (ok, err) = run_node_until_it_stops(&url, "garbage", &tmp.path().join("g"));
    assert!(!ok);
    assert!(
        err.contains("stream sequence 1: not a tick record"),
        "{err}"
    );
    let (ok, out, err) = lockgrid(&["replay", &format!("{url}/garbage"), "--verify"]);
    assert!(!ok, "{out}");
    assert!(err.contains("stream sequence 1"), "{err}");
}
