//! `lockgrid serve --metrics`: the real server on free loopback ports,
//! real bots against it, and the Prometheus endpoint scraped over HTTP
//! while they play and after they leave.

mod serve_common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serve_common::{bots, interrupt, wait_bounded, BIN};

/// A `lockgrid serve` child, killed if the test fails midway.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Starts the server with `--metrics` on port 0; returns it with its UDP
/// and metrics addresses, read from its first two lines.
fn start(data: &std::path::Path) -> (Server, String, SocketAddr) {
    let mut child = Command::new(BIN)
        .args(["serve", "--addr", "127.0.0.1:0", "--metrics", "127.0.0.1:0"])
        .args(["--npcs", "20", "--data-dir"])
        .arg(data)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("lockgrid serve starts");
    let out = child.stdout.take().expect("piped");
    let server = Server(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = || {
        rx.recv_timeout(Duration::from_secs(30))
            .expect("lockgrid serve reports its addresses")
    };
    let (first, second) = (line(), line());
    let udp = first
        .split("listening on ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or_else(|| panic!("unexpected first line: {first}"))
        .to_owned();
    let metrics = second
        .strip_prefix("lockgrid serve: metrics on http://")
        .and_then(|s| s.strip_suffix("/metrics"))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("unexpected second line: {second}"));
    (server, udp, metrics)
}

/// `GET /metrics`; every sample line as `name{labels}` → value.
fn scrape(addr: SocketAddr) -> BTreeMap<String, f64> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(10)).expect("connects");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.contains(" 200 "), "{head}");
    assert!(body.ends_with("# EOF\n"), "{body}");
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (name, value) = l.rsplit_once(' ').expect("name value");
            (name.to_owned(), value.parse().expect("a number"))
        })
        .collect()
}

fn get(m: &BTreeMap<String, f64>, name: &str) -> f64 {
    *m.get(name).unwrap_or_else(|| panic!("no {name} in {m:#?}"))
}

#[test]
fn metrics_follow_a_bots_run() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let (server, udp, metrics) = start(&data);

    let idle = scrape(metrics);
    assert_eq!(get(&idle, "lockgrid_clients"), 0.0);

    let mut bots = bots(&udp, &data, 6, "4", 7)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bots start");
    // Scrape while they play (generous: the machine may be loaded).
    let mut during = scrape(metrics);
    for _ in 0..60 {
        if get(&during, "lockgrid_clients") > 0.0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        during = scrape(metrics);
    }
    assert!(get(&during, "lockgrid_clients") > 0.0, "{during:#?}");
    assert!(
        get(&during, "lockgrid_entities") >= 20.0,
        "the NPCs at least"
    );
    let status = wait_bounded(&mut bots, Duration::from_secs(120));
    let mut err = String::new();
    let _ = bots.stderr.take().map(|mut e| e.read_to_string(&mut err));
    assert!(status.success(), "bots failed: {err}");

    let after = scrape(metrics);
    let ticks = get(&after, "lockgrid_ticks_total");
    assert!(ticks > get(&during, "lockgrid_ticks_total"), "ticks go on");
    assert!(ticks >= 40.0, "4 s at 20 Hz: {ticks}");
    // Every tick's work is in the histogram, and it was journaled and
    // synced. The server ticks on while it is scraped: a scrape may fall
    // between two of one tick's updates.
    let about = |name: &str| {
        let n = get(&after, name);
        assert!((n - ticks).abs() <= 1.0, "{name} {n}, ticks {ticks}");
    };
    about("lockgrid_tick_duration_seconds_count");
    about("lockgrid_journal_append_seconds_count");
    about("lockgrid_journal_sync_seconds_count");
    about("lockgrid_tick_events_count{kind=\"update\"}");
    about("lockgrid_tick");
    assert!(get(&after, "lockgrid_journal_sync_seconds_sum") > 0.0);
    assert_eq!(get(&after, "lockgrid_connections_total"), 6.0);
    let (bytes_in, bytes_out) = (
        get(&after, "lockgrid_bytes_in_total"),
        get(&after, "lockgrid_bytes_out_total"),
    );
    assert!(
        bytes_out > 0.0 && bytes_in > 0.0,
        "{bytes_in} in, {bytes_out} out"
    );
    assert!(get(&after, "lockgrid_packets_out_total") * 1200.0 >= bytes_out);
    assert!(get(&after, "lockgrid_events_total{kind=\"enter\"}") > 0.0);
    assert!(get(&after, "lockgrid_events_total{kind=\"update\"}") > 0.0);
    assert_eq!(
        get(&after, "lockgrid_refusals_total{reason=\"spoofed_id\"}"),
        0.0
    );
    assert_eq!(get(&after, "lockgrid_snapshot_failures_total"), 0.0);
    // A few clients never fill the socket's buffer.
    assert_eq!(get(&after, "lockgrid_socket_drops_total"), 0.0);
    assert!(get(&after, "lockgrid_tick_overruns_total") <= ticks);

    let mut server = server;
    interrupt(&server.0);
    assert!(wait_bounded(&mut server.0, Duration::from_secs(60)).success());
    assert!(
        TcpStream::connect_timeout(&metrics, Duration::from_secs(2)).is_err(),
        "the endpoint closes with the server"
    );
}
