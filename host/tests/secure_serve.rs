//! The real binaries with a key: `lockgrid serve --key` lets in bots with
//! tokens minted from the same key file, and a client whose token the
//! `lockgrid token` command printed; a client without a token is refused
//! with `token_missing`; expired, forged and reused tokens, and tampered,
//! replayed and misaddressed packets are refused and counted in the stats
//! while an honest client goes on. Without a key, serve warns that anyone
//! may connect.

use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant as StdInstant};

use lockgrid_protocol::token::{ConnectToken, DEFAULT_PROTOCOL_ID};
use lockgrid_protocol::{
    Client, ClientConfig, ClientEvent, DisconnectReason, Instant, PrivateKey, TokenParams,
};

const BIN: &str = env!("CARGO_BIN_EXE_lockgrid");

struct Served {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `lockgrid serve` on a free loopback port; stderr goes to `log`.
fn serve(data: &Path, log: &Path, extra: &[&str]) -> Served {
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--addr",
            "127.0.0.1:0",
            "--seconds",
            "60",
            "--data-dir",
        ])
        .arg(data)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log).expect("log file"))
        .spawn()
        .expect("spawn serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("serve's first line");
    let addr = line
        .split_whitespace()
        .find_map(|w| w.trim_end_matches(',').parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    Served { child, addr }
}

fn run(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let until = StdInstant::now() + limit;
    while child.try_wait().expect("try_wait").is_none() {
        if StdInstant::now() > until {
            let _ = child.kill();
            panic!("command ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

/// Drives one protocol client over a real socket until it connects or ends.
fn drive(mut client: Client<SocketAddr>, server: SocketAddr) -> Result<u64, DisconnectReason> {
    let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
    socket
        .set_read_timeout(Some(Duration::from_millis(10)))
        .expect("timeout");
    let epoch = StdInstant::now();
    let now = || Instant::from_micros(epoch.elapsed().as_micros() as u64);
    let mut buf = vec![0u8; 1500];
    while epoch.elapsed() < Duration::from_secs(20) {
        while let Some(t) = client.poll_transmit(now(), &mut buf).expect("mtu buffer") {
            socket.send_to(&buf[..t.len], server).expect("send");
        }
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            client.handle_datagram(now(), from, &buf[..n]);
        }
        if client.poll_timeout().is_some_and(|t| t <= now()) {
            client.handle_timeout(now());
        }
        while let Some(e) = client.poll_event() {
            match e {
                ClientEvent::Connected(w) => return Ok(w.entity),
                ClientEvent::Disconnected { reason } => return Err(reason),
                ClientEvent::Tick { .. } | ClientEvent::Refused(_) => {}
            }
        }
    }
    panic!("the client neither connected nor was refused");
}

fn read(path: &Path) -> String {
    let mut s = String::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_string(&mut s))
        .expect("read");
    s
}

#[test]
fn a_keyed_server_admits_token_holders_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (data, key, log) = (
        dir.path().join("data"),
        dir.path().join("key"),
        dir.path().join("serve.log"),
    );
    std::fs::write(&key, format!("{}\n", "3c".repeat(32))).expect("key file");
    let key_arg = key.to_str().expect("utf-8 path");
    let served = serve(&data, &log, &["--key", key_arg]);
    let addr = served.addr.to_string();

    // Bots mint their own tokens from the key file, connect and check their views.
    let out = run(
        Command::new(BIN)
            .args([
                "bots",
                "--clients",
                "4",
                "--seconds",
                "2",
                "--server",
                &addr,
                "--key",
                key_arg,
                "--data-dir",
            ])
            .arg(&data),
        Duration::from_secs(90),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "bots failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("4 started, 4 connected, 0 dropped"),
        "{stdout}"
    );

    // A token printed by `lockgrid token` connects as its client id.
    let out = run(
        Command::new(BIN).args([
            "token",
            "--key",
            key_arg,
            "--client-id",
            "4294970000",
            "--expires",
            "1m",
            "--server",
            &addr,
        ]),
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hex = String::from_utf8(out.stdout).expect("utf-8");
    let bytes: Vec<u8> = (0..hex.trim().len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex.trim()[i..i + 2], 16).expect("hex"))
        .collect();
    let token = ConnectToken::decode(&bytes).expect("a connect token");
    let client =
        Client::with_token(ClientConfig::default(), served.addr, &token, Instant::ZERO).unwrap();
    assert_eq!(drive(client, served.addr), Ok(4_294_970_000));

    // No token, or a token for another server: refused, with the reason.
    let bare = Client::new(ClientConfig::default(), served.addr, b"", 1, Instant::ZERO).unwrap();
    assert_eq!(
        drive(bare, served.addr),
        Err(DisconnectReason::TokenMissing)
    );
    let out = run(
        Command::new(BIN).args([
            "token",
            "--key",
            key_arg,
            "--client-id",
            "4294970001",
            "--server",
            "127.0.0.1:9",
        ]),
        Duration::from_secs(30),
    );
    let hex = String::from_utf8(out.stdout).expect("utf-8");
    let bytes: Vec<u8> = (0..hex.trim().len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex.trim()[i..i + 2], 16).expect("hex"))
        .collect();
    let other = ConnectToken::decode(&bytes).expect("a connect token");
    let client =
        Client::with_token(ClientConfig::default(), served.addr, &other, Instant::ZERO).unwrap();
    assert_eq!(
        drive(client, served.addr),
        Err(DisconnectReason::TokenWrongServer)
    );

    // Bots without the key hear why, in words, and what to do.
    let out = run(
        Command::new(BIN).args([
            "bots",
            "--clients",
            "1",
            "--seconds",
            "1",
            "--no-verify",
            "--server",
            &addr,
        ]),
        Duration::from_secs(60),
    );
    assert!(!out.status.success(), "bots without the key connected");
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(
        message.contains("the server refused them: invalid connect token"),
        "{message}"
    );
    assert!(message.contains("give bots --key"), "{message}");
    assert!(!message.contains("TokenInvalid"), "{message}");
    drop(served);
    let log = read(&log);
    assert!(log.contains("connect tokens required"), "{log}");
    assert!(!log.contains("unauthenticated"), "{log}");
}

#[test]
fn a_server_without_a_key_warns_at_startup() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (data, log) = (dir.path().join("data"), dir.path().join("serve.log"));
    let served = serve(&data, &log, &[]);
    let bare = Client::new(ClientConfig::default(), served.addr, b"", 1, Instant::ZERO).unwrap();
    assert!(drive(bare, served.addr).is_ok());
    drop(served);
    let log = read(&log);
    assert!(log.contains("unauthenticated and unencrypted"), "{log}");
}

#[test]
fn token_refuses_bad_keys_and_durations() {
    let dir = tempfile::tempdir().expect("temp dir");
    let key = dir.path().join("key");
    std::fs::write(&key, "not hex").expect("key file");
    let out = run(
        Command::new(BIN)
            .args(["token", "--client-id", "1", "--key"])
            .arg(&key),
        Duration::from_secs(30),
    );
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("key file"));
    std::fs::write(&key, "ab".repeat(32)).expect("key file");
    for bad in ["0s", "10x", "abc", "-5", "-5s", "-1m"] {
        let out = run(
            Command::new(BIN)
                .args(["token", "--client-id", "1", "--expires", bad, "--key"])
                .arg(&key),
            Duration::from_secs(30),
        );
        assert!(!out.status.success(), "--expires {bad} accepted");
        let message = String::from_utf8_lossy(&out.stderr);
        assert!(message.contains("--expires"), "{bad}: {message}");
        // A negative value is validated, not taken for a flag.
        assert!(!message.contains("unexpected argument"), "{bad}: {message}");
        if bad.starts_with('-') {
            assert!(message.contains("must be positive"), "{bad}: {message}");
        }
    }
    let out = run(
        Command::new(BIN)
            .args(["token", "--client-id", "-1", "--key"])
            .arg(&key),
        Duration::from_secs(30),
    );
    assert!(!out.status.success(), "--client-id -1 accepted");
    let message = String::from_utf8_lossy(&out.stderr);
    assert!(message.contains("--client-id"), "{message}");
    assert!(!message.contains("unexpected argument"), "{message}");
}

/// One honest client on its own socket, stepped by the test, which can
/// hold back the next datagram it sends (to tamper with or resend it).
struct Session {
    socket: UdpSocket,
    client: Client<SocketAddr>,
    server: SocketAddr,
    epoch: StdInstant,
    sent: Vec<Vec<u8>>,
    ticks: u64,
    ended: Option<DisconnectReason>,
}

impl Session {
    fn connect(token: &ConnectToken, server: SocketAddr) -> Session {
        let client = Client::with_token(ClientConfig::default(), server, token, Instant::ZERO)
            .expect("client");
        let socket = UdpSocket::bind("127.0.0.1:0").expect("bind");
        socket
            .set_read_timeout(Some(Duration::from_millis(5)))
            .expect("timeout");
        let mut s = Session {
            socket,
            client,
            server,
            epoch: StdInstant::now(),
            sent: Vec::new(),
            ticks: 0,
            ended: None,
        };
        let until = StdInstant::now() + Duration::from_secs(20);
        while s.ticks == 0 {
            assert!(StdInstant::now() < until, "the honest client never ticked");
            s.step(false);
            assert_eq!(s.ended, None);
        }
        s
    }

    fn now(&self) -> Instant {
        Instant::from_micros(self.epoch.elapsed().as_micros() as u64)
    }

    /// One round of the drive loop; with `hold`, the first datagram the
    /// client sends is returned instead of sent.
    fn step(&mut self, mut hold: bool) -> Option<Vec<u8>> {
        let mut held = None;
        let mut buf = vec![0u8; 1500];
        while let Some(t) = self
            .client
            .poll_transmit(self.now(), &mut buf)
            .expect("mtu")
        {
            let bytes = buf[..t.len].to_vec();
            if hold {
                hold = false;
                held = Some(bytes);
                continue;
            }
            self.socket.send_to(&bytes, self.server).expect("send");
            self.sent.push(bytes);
        }
        if let Ok((n, from)) = self.socket.recv_from(&mut buf) {
            let now = self.now();
            self.client.handle_datagram(now, from, &buf[..n]);
        }
        if self.client.poll_timeout().is_some_and(|t| t <= self.now()) {
            let now = self.now();
            self.client.handle_timeout(now);
        }
        while let Some(e) = self.client.poll_event() {
            match e {
                ClientEvent::Tick { .. } => self.ticks += 1,
                ClientEvent::Disconnected { reason } => self.ended = Some(reason),
                ClientEvent::Connected(_) | ClientEvent::Refused(_) => {}
            }
        }
        held
    }

    /// The next datagram the client would send, not sent.
    fn hold_next(&mut self) -> Vec<u8> {
        let until = StdInstant::now() + Duration::from_secs(10);
        loop {
            assert!(StdInstant::now() < until, "the client sent nothing");
            if let Some(bytes) = self.step(true) {
                return bytes;
            }
        }
    }

    fn run_for(&mut self, d: Duration) {
        let until = StdInstant::now() + d;
        while StdInstant::now() < until {
            self.step(false);
        }
    }
}

#[test]
fn attacks_on_a_keyed_server_are_refused_and_counted_while_an_honest_client_goes_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (data, key_file, log) = (
        dir.path().join("data"),
        dir.path().join("key"),
        dir.path().join("serve.log"),
    );
    std::fs::write(&key_file, "5a".repeat(32)).expect("key file");
    let served = serve(
        &data,
        &log,
        &["--key", key_file.to_str().expect("utf-8 path")],
    );
    let key = lockgrid_host::token::read_key_file(&key_file).expect("key");
    let servers = [served.addr];
    let now = lockgrid_host::token::unix_now();
    let mint = |key: &PrivateKey, client_id: u64, create: u64, expire: u64| {
        lockgrid_host::token::mint(
            key,
            &TokenParams {
                protocol_id: DEFAULT_PROTOCOL_ID,
                create_unix_secs: create,
                expire_unix_secs: expire,
                client_id,
                server_addresses: &servers,
                user_data: b"",
            },
        )
        .expect("token")
    };

    let token = mint(&key, 4_294_970_100, now, now + 120);
    let mut honest = Session::connect(&token, served.addr);

    // Tokens: expired, minted under another key, and the honest one again
    // from another address.
    let expired = mint(&key, 4_294_970_101, now - 120, now - 60);
    let forged = mint(&PrivateKey([0x11; 32]), 4_294_970_102, now, now + 120);
    for (token, reason) in [
        (&expired, DisconnectReason::TokenExpired),
        (&forged, DisconnectReason::TokenInvalid),
        (&token, DisconnectReason::TokenReused),
    ] {
        let client = Client::with_token(ClientConfig::default(), served.addr, token, Instant::ZERO)
            .expect("client");
        assert_eq!(drive(client, served.addr), Err(reason));
        honest.run_for(Duration::from_millis(50));
    }

    // Packets: an old one again, a fresh one with a byte of its ciphertext
    // altered, and a fresh one from another address.
    let old = honest.sent.last().expect("sealed packets went out").clone();
    honest.socket.send_to(&old, served.addr).expect("send");
    let mut tampered = honest.hold_next();
    let n = tampered.len();
    tampered[n - 20] ^= 0x40;
    honest.socket.send_to(&tampered, served.addr).expect("send");
    let stolen = honest.hold_next();
    let thief = UdpSocket::bind("127.0.0.1:0").expect("bind");
    thief.send_to(&stolen, served.addr).expect("send");

    let ticks = honest.ticks;
    honest.run_for(Duration::from_secs(1));
    assert_eq!(honest.ended, None, "the honest client was dropped");
    assert!(
        honest.ticks > ticks + 5,
        "the honest client stopped ticking"
    );

    interrupt_and_wait(served);
    let stats: serde_json::Value =
        serde_json::from_str(&read(&data.join("serve-stats.json"))).expect("stats JSON");
    let refused = &stats["refused"];
    // At least: a client may say Hello again before the refusal arrives.
    assert!(refused["token"].as_u64() >= Some(3), "{stats}");
    assert_eq!(refused["unauthentic"], 2, "{stats}");
    assert_eq!(refused["replayed"], 1, "{stats}");
}

/// Stops a server as Ctrl-C does and waits, so it writes its final stats.
fn interrupt_and_wait(mut served: Served) {
    let status = Command::new("kill")
        .args(["-INT", &served.child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let until = StdInstant::now() + Duration::from_secs(30);
    while served.child.try_wait().expect("try_wait").is_none() {
        assert!(StdInstant::now() < until, "serve did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}
