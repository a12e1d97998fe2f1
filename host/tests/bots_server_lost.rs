//! `lockgrid bots` fails, with a clear message, when there is no server or
//! when the server dies during the run and never comes back.

mod serve_common;

use std::net::UdpSocket;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serve_common::{bots, run_bounded, start_serve, wait_bounded, BIN};

#[test]
fn bots_fail_when_nothing_answers() {
    // A loopback port with no server behind it.
    let port = UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free port")
        .port();
    let addr = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let out = run_bounded(
        Command::new(BIN)
            .args(["bots", "--clients", "3", "--seconds", "30", "--no-verify"])
            .args(["--server", &addr])
            .env("RUST_LOG", "warn"),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("no client connected to {addr} within 5.0 s"))
            && stderr.contains("nothing answered there"),
        "{stderr}"
    );
    // It gives up after the connect timeout, not after the 30 s walk.
    assert!(
        started.elapsed() < Duration::from_secs(25),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn bots_fail_when_the_server_dies_and_never_comes_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    let mut served = start_serve(&data, "127.0.0.1:0", &[]);
    let mut child = bots(&served.addr, &data, 4, "60", 3)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bots start");
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        use std::io::Read;
        let (mut out, mut err) = (String::new(), String::new());
        let _ = stdout.read_to_string(&mut out);
        let _ = stderr.read_to_string(&mut err);
        let _ = tx.send((out, err));
    });
    // Let the clients connect and walk, then kill the server for good.
    std::thread::sleep(Duration::from_secs(3));
    served.child.kill().expect("kill the server");
    served.child.wait().expect("server reaped");
    let killed = Instant::now();
    let status = wait_bounded(&mut child, Duration::from_secs(45));
    let gave_up = killed.elapsed();
    let (out, err) = rx.recv_timeout(Duration::from_secs(10)).expect("output");
    assert!(!status.success(), "bots exited 0:\n{out}\n{err}");
    assert!(
        err.contains("the server stopped answering: nothing came from it for")
            && err.contains(&served.addr),
        "{out}\n{err}"
    );
    assert!(out.contains("4 connected"), "{out}");
    // Silence is tolerated for 5 s, and the run was to last 60 s.
    assert!(
        gave_up >= Duration::from_secs(4) && gave_up < Duration::from_secs(30),
        "gave up after {gave_up:?}"
    );
}
