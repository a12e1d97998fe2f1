//! `lockgrid view` in a real browser: a data folder made by a real serve +
//! bots run, the page driven headless through chromedriver's W3C WebDriver
//! API, the events it lists compared with `lockgrid replay --events`, and
//! a screenshot checked for content.
//!
//! Needs Debian's `chromium` and `chromium-driver` (`.ci/run` installs
//! them). Without them the test says why and passes, except under CI
//! (`CI=true`), where it must run.

mod serve_common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use serde_json::{json, Value};
use serve_common::{bots, interrupt, run_bounded, start_serve, wait_bounded, BIN};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Generous: two cores shared with other builds make a cold browser slow.
const PATIENCE: Duration = Duration::from_secs(90);

/// A child process killed (by its own pid) when the test ends, however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("bound").port()
}

/// A WebDriver session over chromedriver's JSON-over-HTTP API.
struct Browser {
    agent: ureq::Agent,
    base: String,
    session: String,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None)
        .timeout_global(Some(PATIENCE))
        .build()
        .into()
}

/// Sends one request and returns the reply's JSON `value`, failing on a
/// WebDriver error.
fn call(agent: &ureq::Agent, method: &str, url: &str, body: Option<Value>) -> Value {
    let reply = match (method, body) {
        ("GET", _) => agent.get(url).call(),
        ("DELETE", _) => agent.delete(url).call(),
        (_, body) => agent
            .post(url)
            .header("Content-Type", "application/json")
            .send(body.unwrap_or_else(|| json!({})).to_string()),
    };
    let mut reply = reply.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = reply.status();
    let text = reply
        .body_mut()
        .with_config()
        .limit(64 << 20)
        .read_to_string()
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let parsed: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert!(status.is_success(), "{method} {url}: {status} {text}");
    parsed["value"].clone()
}

impl Browser {
    fn open(driver_port: u16, profile: &Path) -> Browser {
        let agent = agent();
        let base = format!("http://127.0.0.1:{driver_port}");
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-dev-shm-usage",
            "--window-size=1400,1100",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .chain([format!("--user-data-dir={}", profile.display())])
        .collect::<Vec<_>>();
        let value = call(
            &agent,
            "POST",
            &format!("{base}/session"),
            Some(json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            }}})),
        );
        let session = value["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id in {value}"))
            .to_owned();
        Browser {
            agent,
            base,
            session,
        }
    }

    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        call(&self.agent, method, &url, body)
    }

    fn script(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }

    fn find(&self, css: &str) -> String {
        let value = self.call(
            "POST",
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        );
        // The W3C element reference key.
        value["element-6066-11e4-a52e-4f735466cecf"]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {value}"))
            .to_owned()
    }

    /// Polls `script` until it returns `true`.
    fn wait_for(&self, what: &str, script: &str) {
        let until = Instant::now() + PATIENCE;
        while self.script(script) != json!(true) {
            assert!(Instant::now() < until, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let url = format!("{}/session/{}", self.base, self.session);
        let _ = self.agent.delete(&url).call();
    }
}

/// A data folder from a short real run: a server with NPCs, three bots.
fn served_data_folder(data: &Path) {
    let mut served = start_serve(
        data,
        "127.0.0.1:0",
        &["--npcs", "40", "--seed", "3", "--seconds", "120"],
    );
    let out = run_bounded(
        &mut bots(&served.addr, data, 4, "2", 5),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "bots failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    interrupt(&served.child);
    let status = wait_bounded(&mut served.child, Duration::from_secs(30));
    assert!(status.success(), "serve exited with {status}");
}

fn replay_events(data: &Path, extra: &[&str]) -> String {
    let out = run_bounded(
        Command::new(BIN)
            .args(["replay"])
            .arg(data)
            .args(["--events"])
            .args(extra),
        Duration::from_secs(60),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// A tick and an observer worth looking at: the highest observer id with
/// view events (so, with several observers, not the one the page shows
/// first), at the last tick it has some (so not the tick the page opens on).
fn interesting(data: &Path) -> (u64, u64) {
    let all = replay_events(data, &[]);
    let mut best: Option<(u64, u64)> = None;
    for line in all.lines() {
        let v: Value = serde_json::from_str(line).expect("a JSON line");
        let (Some(tick), Some(observer)) = (v["tick"].as_u64(), v["observer"].as_u64()) else {
            continue;
        };
        if best.is_none_or(|b| (observer, tick) > b) {
            best = Some((observer, tick));
        }
    }
    let (observer, tick) = best.expect("some observer had view events");
    assert!(tick > 1, "the run is too short to pick a tick");
    (tick, observer)
}

#[test]
fn the_page_lists_what_replay_lists_and_draws_the_tick() {
    let have = Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists();
    if !have {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !ci,
            "CI=true but {CHROMIUM} or {CHROMEDRIVER} is missing: .ci/run installs them"
        );
        eprintln!(
            "skipped: {CHROMIUM} or {CHROMEDRIVER} is missing (apt-get install chromium chromium-driver)"
        );
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().join("data");
    served_data_folder(&data);
    let (tick, observer) = interesting(&data);

    let mut view = Command::new(BIN)
        .args(["view"])
        .arg(&data)
        .args(["--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("lockgrid view starts");
    let stdout = view.stdout.take().expect("piped");
    let view = Running(view);
    let mut first = String::new();
    BufReader::new(stdout)
        .read_line(&mut first)
        .expect("view prints its address");
    let url = first
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_owned();

    let driver_port = free_port();
    let driver = Running(
        Command::new(CHROMEDRIVER)
            .arg(format!("--port={driver_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts"),
    );
    let status = format!("http://127.0.0.1:{driver_port}/status");
    let until = Instant::now() + PATIENCE;
    let probe = agent();
    while !probe
        .get(&status)
        .call()
        .is_ok_and(|r| r.status().is_success())
    {
        assert!(Instant::now() < until, "chromedriver did not start");
        std::thread::sleep(Duration::from_millis(100));
    }

    let profile = dir.path().join("profile");
    let browser = Browser::open(driver_port, &profile);
    browser.call("POST", "/url", Some(json!({ "url": url })));
    browser.wait_for(
        "the index to be ready",
        "return document.getElementById('main').hidden === false",
    );

    // Pick the tick by typing it, as a person would.
    let tick_input = browser.find("#tick");
    browser.call("POST", &format!("/element/{tick_input}/clear"), None);
    browser.call(
        "POST",
        &format!("/element/{tick_input}/value"),
        Some(json!({ "text": format!("{tick}\u{E007}") })),
    );
    browser.wait_for(
        "the tick to load",
        &format!("return document.getElementById('events').dataset.tick === '{tick}'"),
    );
    // Then the observer from the picker.
    let option = browser.find(&format!("#observer option[value='{observer}']"));
    browser.call("POST", &format!("/element/{option}/click"), None);
    browser.wait_for(
        "the observer's events",
        &format!(
            "const e = document.getElementById('events'); \
             return e.dataset.tick === '{tick}' && e.dataset.observer === '{observer}'"
        ),
    );
    browser.wait_for(
        "the picture",
        "const p = document.getElementById('picture'); return p.complete && p.naturalWidth > 0",
    );

    let listed = browser
        .script("return Array.from(document.querySelectorAll('#events li'), li => li.textContent)");
    let listed: Vec<String> = serde_json::from_value(listed).expect("a list of lines");
    let t = tick.to_string();
    let id = observer.to_string();
    let expected = replay_events(&data, &["--observer", &id, "--from", &t, "--to", &t]);
    let expected: Vec<&str> = expected.lines().collect();
    assert!(expected.len() >= 2, "{expected:?}");
    assert_eq!(listed, expected);
    let digest = browser.script("return document.getElementById('digest').textContent");
    assert!(
        expected.last().is_some_and(|l| l.contains(&format!(
            "\"digest\":\"{}\"",
            digest.as_str().unwrap_or("?")
        ))),
        "{digest} vs {expected:?}"
    );

    let shot = browser.call("GET", "/screenshot", None);
    let png = base64::engine::general_purpose::STANDARD
        .decode(shot.as_str().expect("base64 text"))
        .expect("base64");
    let mut reader = png::Decoder::new(std::io::Cursor::new(png))
        .read_info()
        .expect("a PNG");
    let mut pixels = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut pixels).expect("pixels");
    let samples = info.color_type.samples();
    let pixels = &pixels[..info.buffer_size()];
    let first = &pixels[..samples];
    let other = pixels.chunks(samples).filter(|p| p != &first).count();
    assert!(info.width > 100 && info.height > 100);
    assert!(
        other > (info.width * info.height / 20) as usize,
        "screenshot nearly blank: {other} pixels differ from the first"
    );
    drop(browser);
    drop(driver);
    drop(view);
}
