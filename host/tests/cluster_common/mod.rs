//! Helpers for the cluster tests: real `nats-server` processes with
//! JetStream on free loopback ports and temporary storage, `lockgrid serve
//! --cluster` nodes as processes, and walking protocol clients that move
//! to another node when theirs stops answering. Every process is stopped by
//! its id (`Child::kill`) when its handle drops.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant as StdInstant};

use lockgrid_kernel::{Fix, Move, Pos};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, DisconnectReason, Instant, WorldParams,
};

pub const BIN: &str = env!("CARGO_BIN_EXE_lockgrid");

/// The `nats-server` binary, or `None` (with a message) when it is absent
/// and the run is not CI's; under `CI=true` a missing server fails the test.
pub fn nats_server() -> Option<PathBuf> {
    for dir in ["/usr/sbin", "/usr/bin", "/usr/local/bin"] {
        let p = Path::new(dir).join("nats-server");
        if p.exists() {
            return Some(p);
        }
    }
    if let Ok(path) = std::env::var("PATH") {
        for dir in path.split(':') {
            let p = Path::new(dir).join("nats-server");
            if p.exists() {
                return Some(p);
            }
        }
    }
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
    assert!(
        !ci,
        "nats-server is not installed, and CI is set: .ci/run installs it (apt-get install -y nats-server)"
    );
    eprintln!(
        "SKIPPED: nats-server is not installed (apt-get install -y nats-server); the cluster tests need a real one"
    );
    None
}

/// A free TCP port on loopback (bound, read, released).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// A running nats-server.
pub struct NatsServer {
    pub child: Child,
    pub port: u16,
    /// Its HTTP monitoring port (`/jsz`).
    pub monitor: u16,
    pub name: String,
}

impl NatsServer {
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// kill -9 by pid.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The name of the server leading stream `stream`'s Raft group, as
    /// this server's monitoring endpoint (`/jsz`) reports it.
    pub fn stream_leader(&self, stream: &str) -> Option<String> {
        use std::io::{Read, Write};
        let mut tcp = TcpStream::connect(("127.0.0.1", self.monitor)).ok()?;
        tcp.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        tcp.write_all(b"GET /jsz?accounts=true&streams=true HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
            .ok()?;
        let mut reply = String::new();
        tcp.read_to_string(&mut reply).ok()?;
        let body = &reply[reply.find("\r\n\r\n")? + 4..];
        let jsz: serde_json::Value = serde_json::from_str(body).ok()?;
        jsz["account_details"]
            .as_array()?
            .iter()
            .flat_map(|a| a["stream_detail"].as_array().into_iter().flatten())
            .find(|s| s["name"] == stream)
            .and_then(|s| s["cluster"]["leader"].as_str())
            .map(str::to_owned)
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// `n` nats-servers with JetStream under `dir`: one alone when `n == 1`,
/// else a cluster with routes between all of them. Waits until each
/// accepts TCP connections.
pub fn start_nats(bin: &Path, dir: &Path, n: usize) -> Vec<NatsServer> {
    // Every port held until all are chosen, so that no two are the same.
    let held: Vec<std::net::TcpListener> = (0..3 * n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port"))
        .collect();
    let free: Vec<u16> = held
        .iter()
        .map(|l| l.local_addr().expect("local addr").port())
        .collect();
    drop(held);
    let ports = &free[..n];
    let routes = &free[n..2 * n];
    let monitors = &free[2 * n..];
    let route_list = routes
        .iter()
        .map(|p| format!("nats://127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",");
    let mut servers = Vec::new();
    for i in 0..n {
        let name = format!("n{i}");
        let sd = dir.join(&name);
        std::fs::create_dir_all(&sd).unwrap();
        let mut cmd = Command::new(bin);
        cmd.args(["-js", "-a", "127.0.0.1", "-p", &ports[i].to_string()])
            .args(["-m", &monitors[i].to_string(), "-sd"])
            .arg(&sd)
            .args(["-n", &name]);
        if n > 1 {
            cmd.args([
                "--cluster_name",
                "lockgrid",
                "--cluster",
                &format!("nats://127.0.0.1:{}", routes[i]),
                "--routes",
                &route_list,
            ]);
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nats-server starts");
        servers.push(NatsServer {
            child,
            port: ports[i],
            monitor: monitors[i],
            name,
        });
    }
    for s in &servers {
        let deadline = StdInstant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", s.port)).is_err() {
            assert!(
                StdInstant::now() < deadline,
                "nats-server {} never listened",
                s.name
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    servers
}

/// A running `lockgrid serve --cluster` node.
pub struct LgNode {
    pub child: Child,
    pub addr: SocketAddr,
    pub data: PathBuf,
    /// Its stdout lines so far, each with when it was read.
    pub lines: Arc<Mutex<Vec<(StdInstant, String)>>>,
}

impl LgNode {
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the process is still running (it did not exit on its own).
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Whether it said it leads and has not said it follows since.
    pub fn leading(&self) -> bool {
        let lines = self.lines.lock().unwrap();
        let lead = lines.iter().rposition(|(_, l)| l.contains("leading"));
        let follow = lines.iter().rposition(|(_, l)| l.contains("following"));
        match (lead, follow) {
            (Some(a), Some(b)) => a > b,
            (Some(_), None) => true,
            _ => false,
        }
    }

    /// When it first said it leads after `after`.
    pub fn led_since(&self, after: StdInstant) -> Option<StdInstant> {
        let lines = self.lines.lock().unwrap();
        lines
            .iter()
            .find(|(t, l)| *t >= after && l.contains("leading"))
            .map(|(t, _)| *t)
    }

    /// Its digests file: tick → digest.
    pub fn digests(&self) -> BTreeMap<u64, String> {
        read_digests(&self.data)
    }
}

impl Drop for LgNode {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn read_digests(data: &Path) -> BTreeMap<u64, String> {
    let text = std::fs::read_to_string(data.join("cluster-digests.txt")).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let (t, d) = l.split_once(' ')?;
            Some((t.parse().ok()?, d.to_owned()))
        })
        .collect()
}

/// Starts a node of world `world` on NATS `urls`; waits (bounded) until it listens.
pub fn start_node(urls: &str, world: &str, data: &Path, extra: &[&str]) -> LgNode {
    let mut args = vec!["--cluster", urls, "--world", world];
    args.extend_from_slice(extra);
    start_serve(data, &args)
}

/// The nodes' log filter: `LOCKGRID_TEST_NODE_LOG` when set (say
/// `warn,lockgrid_host=debug,async_nats=debug` to see a node's NATS
/// traffic), else `warn`.
pub fn node_log() -> String {
    std::env::var("LOCKGRID_TEST_NODE_LOG").unwrap_or_else(|_| "warn".to_owned())
}

/// Starts `lockgrid serve` (one node, its own journal, unless `extra`
/// says `--cluster`); waits (bounded) until it listens.
pub fn start_serve(data: &Path, extra: &[&str]) -> LgNode {
    let mut child = Command::new(BIN)
        .args(["serve"])
        .args(["--addr", "127.0.0.1:0", "--data-dir"])
        .arg(data)
        .args(extra)
        .env("RUST_LOG", node_log())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("lockgrid serve starts");
    let out = child.stdout.take().expect("stdout is piped");
    // Its log, each line marked with its data folder's name.
    let err = child.stderr.take().expect("stderr is piped");
    let tag = data
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            eprintln!("[{tag}] {line}");
        }
    });
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            sink.lock().unwrap().push((StdInstant::now(), line));
        }
    });
    let deadline = StdInstant::now() + Duration::from_secs(40);
    loop {
        let addr = lines.lock().unwrap().iter().find_map(|(_, l)| {
            l.strip_prefix("lockgrid serve: listening on ")?
                .split(',')
                .next()?
                .parse::<SocketAddr>()
                .ok()
        });
        if let Some(addr) = addr {
            return LgNode {
                child,
                addr,
                data: data.to_owned(),
                lines,
            };
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!("lockgrid serve exited before listening: {status}");
        }
        assert!(StdInstant::now() < deadline, "node never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What one connection of a walker left: its entity and the moves the
/// server acknowledged (a prefix of those sent).
#[derive(Clone, Debug)]
pub struct Session {
    pub node: usize,
    pub entity: u64,
    pub acked: Vec<Move>,
    /// The last tick applied and the view then (when the run ended on it).
    pub final_view: Option<(u64, Vec<u64>)>,
}

/// A protocol client walking back and forth; on a silent node (no
/// datagram for `silence`) it connects to the next node: as a new entity
/// without a name, with its entity back with one.
pub struct Walker {
    /// The name it says Hello with (empty: none).
    pub name: Vec<u8>,
    nodes: Vec<SocketAddr>,
    node: usize,
    socket: UdpSocket,
    client: Client<SocketAddr>,
    epoch: StdInstant,
    params: Option<WorldParams>,
    entity: Option<u64>,
    pos: Pos,
    dir: i64,
    sent: Vec<Move>,
    acked: usize,
    last_input: u64,
    heard: StdInstant,
    next_move: StdInstant,
    pub done: Vec<Session>,
    pub moves: u64,
    /// Input sent → acknowledged, for every input acknowledged.
    pub latencies: Vec<Duration>,
    sent_at: Option<StdInstant>,
    /// Every end of a connection, when and why.
    pub goodbyes: Vec<(StdInstant, DisconnectReason)>,
}

impl Walker {
    pub fn new(nodes: Vec<SocketAddr>, node: usize, epoch: StdInstant) -> Walker {
        Walker::named(nodes, node, epoch, b"")
    }

    /// A walker saying Hello with `name`.
    pub fn named(nodes: Vec<SocketAddr>, node: usize, epoch: StdInstant, name: &[u8]) -> Walker {
        let (socket, client) = connect(nodes[node], epoch, name);
        Walker {
            name: name.to_vec(),
            nodes,
            node,
            socket,
            client,
            epoch,
            params: None,
            entity: None,
            pos: Pos::new(Fix::ZERO, Fix::ZERO),
            dir: 1,
            sent: Vec::new(),
            acked: 0,
            last_input: 0,
            heard: StdInstant::now(),
            next_move: StdInstant::now(),
            done: Vec::new(),
            moves: 0,
            latencies: Vec::new(),
            sent_at: None,
            goodbyes: Vec::new(),
        }
    }

    /// Whether the current connection is up (it has its entity).
    pub fn connected(&self) -> bool {
        self.entity.is_some()
    }

    fn now(&self) -> Instant {
        Instant::from_micros(self.epoch.elapsed().as_micros() as u64)
    }

    fn note_acked(&mut self) {
        let acked = self.sent.len().saturating_sub(self.client.unacked_inputs());
        self.acked = self.acked.max(acked);
        if self.acked == self.sent.len() {
            if let Some(t) = self.sent_at.take() {
                self.latencies.push(t.elapsed());
            }
        }
    }

    /// Ends this connection's record and connects to the next node.
    fn move_on(&mut self) {
        self.note_acked();
        if let Some(entity) = self.entity.take() {
            self.done.push(Session {
                node: self.node,
                entity,
                acked: self.sent[..self.acked].to_vec(),
                final_view: None,
            });
        }
        self.node = (self.node + 1) % self.nodes.len();
        let (socket, client) = connect(self.nodes[self.node], self.epoch, &self.name);
        self.socket = socket;
        self.client = client;
        self.params = None;
        self.sent.clear();
        self.acked = 0;
        self.sent_at = None;
        self.last_input = 0;
        self.heard = StdInstant::now();
    }

    /// One turn: receive, timers, events, maybe a move, send.
    pub fn turn(&mut self, walking: bool, silence: Duration) {
        let mut buf = [0u8; 2048];
        while let Ok((n, from)) = self.socket.recv_from(&mut buf) {
            self.heard = StdInstant::now();
            let now = self.now();
            self.client.handle_datagram(now, from, &buf[..n]);
            self.note_acked();
        }
        let now = self.now();
        if self.client.poll_timeout().is_some_and(|t| t <= now) {
            self.client.handle_timeout(now);
        }
        self.note_acked();
        while let Some(ev) = self.client.poll_event() {
            match ev {
                ClientEvent::Connected(w) => {
                    self.params = Some(w.world);
                    self.entity = Some(w.entity);
                    // Its spawn point, or where it was when it takes its
                    // entity back.
                    self.pos = w.spawn.pos;
                }
                ClientEvent::Disconnected { reason } => {
                    self.goodbyes.push((StdInstant::now(), reason));
                    self.move_on();
                    return;
                }
                ClientEvent::Tick { .. } | ClientEvent::Refused(_) => {}
            }
        }
        if self.heard.elapsed() > silence {
            self.move_on();
            return;
        }
        // One input at a time: the next only once the last is acknowledged,
        // so the server's speed rules never refuse one (a refused input is
        // acknowledged too, and would look missing from the stream).
        if walking
            && self.params.is_some()
            && self.client.unacked_inputs() == 0
            && StdInstant::now() >= self.next_move
        {
            self.walk();
        }
        let mut out = [0u8; 1500];
        let now = self.now();
        while let Ok(Some(t)) = self.client.poll_transmit(now, &mut out) {
            let _ = self.socket.send_to(&out[..t.len], t.destination);
        }
    }

    fn walk(&mut self) {
        let (Some(me), Some(params)) = (self.entity, self.params) else {
            return;
        };
        // Four units a tick along x, turning at the world's edge (well under
        // the server's 200 units per second at 20 Hz).
        let step = Fix::from_num(4) * Fix::from_num(self.dir);
        let lo = params.origin.x;
        let hi = params.origin.x + params.cell_size * Fix::from_num(params.width_cells) - Fix::ONE;
        let mut x = self.pos.x + step;
        if x < lo || x > hi {
            self.dir = -self.dir;
            x = self.pos.x - step;
        }
        let m = Move {
            id: me,
            pos: Pos::new(x, self.pos.y),
            dir: 0,
            speed: Fix::from_num(4),
        };
        let tick = (self.client.applied_tick() + 1).max(self.last_input + 1);
        if self
            .client
            .send_input(tick, &[lockgrid_kernel::Command::Move(m)])
            .is_ok()
        {
            self.pos = m.pos;
            self.sent.push(m);
            self.sent_at = Some(StdInstant::now());
            self.last_input = tick;
            self.moves += 1;
        }
        self.next_move = StdInstant::now() + Duration::from_millis(50);
    }

    /// Ends the run: the current connection's record, with its final view.
    pub fn finish(mut self) -> Vec<Session> {
        self.note_acked();
        if let Some(entity) = self.entity {
            let view: Vec<u64> = self.client.view().ids().collect();
            self.done.push(Session {
                node: self.node,
                entity,
                acked: self.sent[..self.acked].to_vec(),
                final_view: Some((self.client.applied_tick(), view)),
            });
        }
        self.done
    }
}

fn connect(server: SocketAddr, epoch: StdInstant, name: &[u8]) -> (UdpSocket, Client<SocketAddr>) {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("client socket");
    socket.set_nonblocking(true).unwrap();
    let now = Instant::from_micros(epoch.elapsed().as_micros() as u64);
    // A fresh socket per connection; the nonce need only differ per run.
    let nonce = now.as_micros() ^ u64::from(socket.local_addr().map_or(0, |a| a.port()));
    let client =
        Client::new(ClientConfig::default(), server, name, nonce, now).expect("client config");
    (socket, client)
}

/// Runs `walkers` for `walk`, then `settle` without moving; `at` is called
/// once a turn with the elapsed time (to kill things on schedule).
pub fn run_walkers(
    walkers: &mut [Walker],
    walk: Duration,
    settle: Duration,
    mut at: impl FnMut(Duration),
) {
    let start = StdInstant::now();
    loop {
        let elapsed = start.elapsed();
        if elapsed >= walk + settle {
            break;
        }
        at(elapsed);
        for w in walkers.iter_mut() {
            w.turn(elapsed < walk, Duration::from_millis(2500));
        }
        std::thread::sleep(Duration::from_millis(3));
    }
}

/// Writes world `world` of `ticks` ticks with four NPCs into the stream at
/// `url`, by one node (its data folder `data`) that then stops.
pub fn write_world(url: &str, world: &str, ticks: u64, data: &Path) {
    let ticks = ticks.to_string();
    let data = data.to_str().expect("utf-8 path");
    let (ok, out, err) = lockgrid(&[
        "serve",
        "--cluster",
        url,
        "--world",
        world,
        "--addr",
        "127.0.0.1:0",
        "--npcs",
        "4",
        "--ticks",
        &ticks,
        "--data-dir",
        data,
    ]);
    assert!(ok, "the writer node fails: {err}");
    // Its socket's drops were read (Linux says which socket is whose).
    if cfg!(target_os = "linux") {
        assert!(
            out.contains(", 0 datagrams dropped at the socket"),
            "the writer node's summary: {out}"
        );
    }
}

/// Runs `lockgrid ARGS`; returns (success, stdout, stderr).
pub fn lockgrid(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .expect("lockgrid runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
