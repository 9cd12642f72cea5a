//! A real Chromium driven over WebDriver: Debian's `chromium` and `chromium-driver` (`.ci/run`
//! installs them), headless, each browser with a profile directory of its own that goes with it.
//! The client is the WebDriver wire protocol itself (JSON over HTTP/1.1), through the tests' plain
//! HTTP client, so what the browser does is what a person's browser would do.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{Scratch, eventually};

/// Browsers started by this process, for their profiles' names.
static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// A headless Chromium behind its own chromedriver; both ended when dropped.
pub struct Browser {
    driver: Child,
    authority: String,
    session: String,
    _profile: Scratch,
}

/// The chromedriver of Debian's `chromium-driver`, when it is installed (`scripts/browser`
/// installs it); without it a browser test says it was skipped, or fails where
/// `TASKHOST_REQUIRE_BROWSER=1` (CI).
fn chromedriver() -> Option<PathBuf> {
    let path = PathBuf::from("/usr/bin/chromedriver");
    if path.exists() && Path::new("/usr/bin/chromium").exists() {
        return Some(path);
    }
    assert!(
        std::env::var_os("TASKHOST_REQUIRE_BROWSER").is_none(),
        "chromium or chromedriver is missing: apt-get install chromium chromium-driver (scripts/browser does)"
    );
    eprintln!("skipped: no chromium and chromedriver (scripts/browser installs them)");
    None
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a headless session; `None` when no
    /// browser is installed (see `chromedriver`).
    pub fn start() -> Option<Self> {
        let chromedriver = chromedriver()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let authority = format!("127.0.0.1:{port}");
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let profile = Scratch::new("taskhost-browser", &n.to_string());
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            // Chromium's own scratch files go with the profile, not into the temp dir.
            .env("TMPDIR", profile.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");

        let mut browser = Self {
            driver,
            authority,
            session: String::new(),
            _profile: profile,
        };
        assert!(
            eventually(Duration::from_secs(30), || {
                browser
                    .request("GET", "/status", None)
                    .is_some_and(|v| v["value"]["ready"] == true)
            }),
            "chromedriver did not become ready"
        );
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "unhandledPromptBehavior": "ignore",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1400,1000", "--no-first-run", "--disable-background-networking",
                         format!("--user-data-dir={}", browser._profile.path().display())],
            },
        }}});
        let opened = browser
            .request("POST", "/session", Some(&capabilities))
            .expect("a WebDriver session");
        browser.session = opened["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {opened}"))
            .to_owned();
        Some(browser)
    }

    /// One WebDriver request; its JSON answer, or `None` when the driver does not answer.
    fn request(&self, method: &str, path: &str, body: Option<&Value>) -> Option<Value> {
        let mut stream = std::net::TcpStream::connect(&self.authority).ok()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .ok()?;
        let body = body.map(Value::to_string).unwrap_or_default();
        let headers = [("Content-Type", "application/json")];
        let answer = crate::http1::exchange(
            &mut stream,
            &self.authority,
            method,
            path,
            &headers,
            body.as_bytes(),
        )
        .ok()?;
        serde_json::from_str(&answer.body).ok()
    }

    /// A command of this session; its `value`, or a panic naming the WebDriver error.
    fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        self.try_command(method, path, body)
            .unwrap_or_else(|error| panic!("{method} {path}: {error}"))
    }

    /// A command of this session; its `value`, or the WebDriver error's.
    fn try_command(&self, method: &str, path: &str, body: Option<Value>) -> Result<Value, Value> {
        let path = format!("/session/{}{path}", self.session);
        let answer = self
            .request(method, &path, body.as_ref())
            .unwrap_or_else(|| panic!("chromedriver did not answer {method} {path}"));
        let value = answer["value"].clone();
        if value.get("error").is_some() {
            return Err(value);
        }
        Ok(value)
    }

    /// Opens `url` and waits for the page to load.
    pub fn open(&self, url: &str) {
        self.command("POST", "/url", Some(json!({ "url": url })));
    }

    /// Goes back one entry in the session history, as the Back button does.
    pub fn back(&self) {
        self.command("POST", "/back", Some(json!({})));
    }

    /// Goes forward one entry in the session history.
    pub fn forward(&self) {
        self.command("POST", "/forward", Some(json!({})));
    }

    /// The address bar's URL.
    pub fn url(&self) -> String {
        self.command("GET", "/url", None)
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page; what it returns.
    pub fn run(&self, script: &str, args: &[Value]) -> Value {
        self.command(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// The text of the first element matching `css`, or `None` when there is none.
    pub fn text(&self, css: &str) -> Option<String> {
        self.run(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
            &[json!(css)],
        )
        .as_str()
        .map(str::to_owned)
    }

    /// Clicks the first element matching `css` as a person would (WebDriver's element click).
    pub fn click(&self, css: &str) {
        // The page redraws its rows as tasks change: an element found just before a redraw is
        // stale by the click, and the next look finds its successor.
        for _ in 0..50 {
            let found = self.command(
                "POST",
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            );
            let element = found
                .as_object()
                .and_then(|o| o.values().next())
                .and_then(Value::as_str)
                .unwrap_or_else(|| panic!("no element {css}: {found}"))
                .to_owned();
            let clicked = self.try_command(
                "POST",
                &format!("/element/{element}/click"),
                Some(json!({})),
            );
            match clicked {
                Ok(_) => return,
                Err(e) if e["error"] == "stale element reference" => continue,
                Err(e) => panic!("clicking {css}: {e}"),
            }
        }
        panic!("{css} went stale 50 times in a row");
    }

    /// The text of the open prompt (`alert`, `confirm`), if one is open.
    pub fn prompt(&self) -> Option<String> {
        let path = format!("/session/{}/alert/text", self.session);
        let answer = self.request("GET", &path, None)?;
        answer["value"].as_str().map(str::to_owned)
    }

    /// Accepts the open prompt.
    pub fn accept(&self) {
        self.command("POST", "/alert/accept", Some(json!({})));
    }

    /// Sets the window's outer size in CSS pixels, as a person resizing it would.
    pub fn resize(&self, width: u32, height: u32) {
        self.command(
            "POST",
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        );
    }

    /// Makes the page see the system's colour scheme as `scheme` (`light` or `dark`), as
    /// `prefers-color-scheme` reports it (Chromium's DevTools emulation, through chromedriver).
    pub fn prefer_scheme(&self, scheme: &str) {
        let features = json!([{"name": "prefers-color-scheme", "value": scheme}]);
        self.command(
            "POST",
            "/goog/cdp/execute",
            Some(json!({"cmd": "Emulation.setEmulatedMedia", "params": {"features": features}})),
        );
    }

    /// A PNG of the window.
    pub fn screenshot(&self) -> Vec<u8> {
        let encoded = self.command("GET", "/screenshot", None);
        base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            encoded.as_str().unwrap_or_default(),
        )
        .expect("a base64 screenshot")
    }

    /// The value of `script` once it is truthy, or `None` when `timeout` passed first.
    pub fn wait_for(&self, timeout: Duration, script: &str, args: &[Value]) -> Option<Value> {
        let mut found = None;
        eventually(timeout, || {
            let v = self.run(script, args);
            let truthy = !(v.is_null() || v == json!(false) || v == json!(""));
            if truthy {
                found = Some(v);
            }
            truthy
        });
        found
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let path = format!("/session/{}", self.session);
            let _ = self.request("DELETE", &path, None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
