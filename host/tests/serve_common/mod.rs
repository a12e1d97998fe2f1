//! Helpers for tests that run `lockgrid serve` and `lockgrid bots` as processes.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, UdpSocket};
use std::time::Instant as StdInstant;

use lockgrid_protocol::Client;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub const BIN: &str = env!("CARGO_BIN_EXE_lockgrid");

/// A running `lockgrid serve` and the address it listens on.
pub struct Served {
    pub child: Child,
    pub addr: String,
    /// The rest of its stdout, collected by a thread.
    pub stdout: mpsc::Receiver<String>,
}

impl Drop for Served {
    /// A test that fails midway must not leave its server running.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts `lockgrid serve` on a free loopback port; waits (bounded) for its
/// "listening on" line.
pub fn start_serve(data: &Path, addr: &str, extra: &[&str]) -> Served {
    let mut child = Command::new(BIN)
        .args(["serve", "--addr", addr, "--data-dir"])
        .arg(data)
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("lockgrid serve starts");
    let out = child.stdout.take().expect("stdout is piped");
    let (first_tx, first_rx) = mpsc::channel();
    let (rest_tx, rest_rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut lines = BufReader::new(out).lines();
        if let Some(Ok(line)) = lines.next() {
            let _ = first_tx.send(line);
        }
        let mut rest = String::new();
        for line in lines.map_while(Result::ok) {
            rest.push_str(&line);
            rest.push('\n');
        }
        let _ = rest_tx.send(rest);
    });
    let line = match first_rx.recv_timeout(Duration::from_secs(20)) {
        Ok(line) => line,
        Err(_) => {
            let _ = child.kill();
            panic!("lockgrid serve did not report its address");
        }
    };
    let addr = line
        .split("listening on ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_owned();
    Served {
        child,
        addr,
        stdout: rest_rx,
    }
}

/// Waits for a child at most `limit`, killing it past that.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> ExitStatus {
    let until = StdInstant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if StdInstant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("process {} did not finish within {limit:?}", child.id());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a command to completion within `limit`, capturing its output.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("command starts");
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let status = wait_bounded(&mut child, limit);
    Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    }
}

/// `lockgrid bots` against `addr`, checked against `data`.
pub fn bots(addr: &str, data: &Path, clients: u32, seconds: &str, seed: u64) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "bots",
        "--clients",
        &clients.to_string(),
        "--seconds",
        seconds,
        "--server",
        addr,
    ])
    .args(["--seed", &seed.to_string(), "--data-dir"])
    .arg(data)
    .env("RUST_LOG", "warn");
    cmd
}

/// Sends SIGINT (as Ctrl-C does) to a child.
pub fn interrupt(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -INT failed");
}

/// `lockgrid replay DATA --verify`, which must succeed.
pub fn replay_verify(data: &Path) -> String {
    let out = run_bounded(
        Command::new(BIN).args(["replay", "--verify"]).arg(data),
        Duration::from_secs(60),
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "replay --verify failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A protocol client driven over a real UDP socket.
pub struct Driven {
    pub socket: UdpSocket,
    pub client: Client<SocketAddr>,
    pub epoch: StdInstant,
    /// The refusals the server told the client of, in order.
    pub refused: Vec<lockgrid_protocol::RefusedInput>,
}

impl Driven {
    pub fn now(&self) -> lockgrid_protocol::Instant {
        lockgrid_protocol::Instant::from_micros(self.epoch.elapsed().as_micros() as u64)
    }

    /// Drives the client until `done` holds or `limit` passes; returns whether `done` held.
    pub fn pump(
        &mut self,
        limit: Duration,
        mut done: impl FnMut(&Client<SocketAddr>) -> bool,
    ) -> bool {
        let until = StdInstant::now() + limit;
        let mut buf = vec![0u8; 65_536];
        let mut out = vec![0u8; 1200];
        while StdInstant::now() < until {
            let now = self.now();
            while let Ok((n, from)) = self.socket.recv_from(&mut buf) {
                self.client.handle_datagram(now, from, &buf[..n]);
            }
            if self.client.poll_timeout().is_some_and(|t| t <= now) {
                self.client.handle_timeout(now);
            }
            while let Some(ev) = self.client.poll_event() {
                if let lockgrid_protocol::ClientEvent::Refused(r) = ev {
                    self.refused.push(r);
                }
            }
            while let Ok(Some(t)) = self.client.poll_transmit(now, &mut out) {
                let _ = self.socket.send_to(&out[..t.len], t.destination);
            }
            if done(&self.client) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        false
    }
}
