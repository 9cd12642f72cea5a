//! HTTP as the tests speak it: a host serving `--listen http://127.0.0.1:0` (its URL read from its
//! stderr), and a plain HTTP/1.1 client over a TCP (or TLS) stream that sends one request per
//! connection and reads the response to its end, so a test sees exactly the bytes on the wire.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::fixtures::eventually;
use crate::mcp::binary;

/// A host with an HTTP listener, killed when dropped.
pub(crate) struct HttpHost {
    pub(crate) child: std::process::Child,
    /// `http://127.0.0.1:PORT/mcp` (or `https://`).
    pub(crate) url: String,
    pub(crate) state: std::path::PathBuf,
    /// Every line the host wrote to stderr so far (also echoed to the test's stderr).
    pub(crate) log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl HttpHost {
    /// A host on `http://127.0.0.1:0` with the state directory `<dir>/state`, its private directory
    /// under `dir`, not watching its plugins; `extra` arguments after. Returns once it printed its
    /// URL.
    pub(crate) fn start(dir: &Path, extra: &[&str]) -> Self {
        Self::start_on(
            dir,
            "http://127.0.0.1:0",
            &[&["--no-watch"], extra].concat(),
        )
    }

    /// A host on `listen` with the state directory `<dir>/state`, its private directory under
    /// `dir`; `extra` arguments after.
    pub(crate) fn start_on(dir: &Path, listen: &str, extra: &[&str]) -> Self {
        Self::start_with_env(dir, listen, extra, &[])
    }

    /// As [`HttpHost::start_on`], with `env` set for the host (a `RUST_LOG` in it replaces `warn`).
    pub(crate) fn start_with_env(
        dir: &Path,
        listen: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let state = dir.join("state");
        let mut child = std::process::Command::new(binary())
            .args(["serve", "--listen", listen, "--state"])
            .arg(&state)
            .args(extra)
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied())
            .env("XDG_RUNTIME_DIR", dir)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn taskhost");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        let log = std::sync::Arc::<std::sync::Mutex<Vec<String>>>::default();
        let kept = log.clone();
        let reader = std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if !sent && let Some(url) = line.strip_prefix("taskhost: MCP over HTTP at ") {
                    let _ = tx.send(url.to_owned());
                    sent = true;
                } else {
                    eprintln!("{line}");
                    kept.lock().unwrap_or_else(|e| e.into_inner()).push(line);
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("the host printed its URL");
        Self {
            child,
            url,
            state,
            log,
            reader: Some(reader),
        }
    }

    /// Stops the host and returns every line it wrote to stderr.
    pub(crate) fn log_to_its_end(&mut self) -> Vec<String> {
        crate::mcp::stop_host(&mut self.child);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// `host:port` of the listener.
    pub(crate) fn authority(&self) -> String {
        let rest = self.url.split("://").nth(1).unwrap_or_default();
        rest.trim_end_matches("/mcp").to_owned()
    }

    /// Makes principal `name`; its token.
    pub(crate) fn token(&self, name: &str) -> String {
        token_in(&self.state, name)
    }
}

impl Drop for HttpHost {
    /// Stops the host ([`crate::mcp::stop_host`]).
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(Some(_))) {
            crate::mcp::stop_host(&mut self.child);
        }
    }
}

/// Sends a `GET` of `path` that accepts an event stream, with `headers`, and reads the status line;
/// the connection (to read the stream from) and the status.
pub(crate) fn open_event_stream(
    host: &HttpHost,
    path: &str,
    headers: &[(&str, &str)],
) -> (std::net::TcpStream, u16) {
    let authority = host.authority();
    let mut stream = std::net::TcpStream::connect(&authority).expect("connect to the host");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut head = format!(
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\nConnection: close\r\n"
    );
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).expect("send the head");
    let mut status = String::new();
    let _ = BufReader::new(&stream).read_line(&mut status);
    let code = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (stream, code)
}

/// Makes principal `name` in the state directory `state`; its token (the last line printed).
pub(crate) fn token_in(state: &Path, name: &str) -> String {
    token_made(state, name, &[])
}

/// As [`token_in`], with `extra` arguments to `taskhost token create` (`--all-owners`).
pub(crate) fn token_made(state: &Path, name: &str, extra: &[&str]) -> String {
    let out = std::process::Command::new(binary())
        .args(["token", "create", name, "--state"])
        .arg(state)
        .args(extra)
        .output()
        .expect("token create");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .expect("a token")
        .to_owned()
}

/// Revokes principal `name`.
pub(crate) fn revoke_in(state: &Path, name: &str) {
    let out = std::process::Command::new(binary())
        .args(["token", "revoke", name, "--state"])
        .arg(state)
        .output()
        .expect("token revoke");
    assert!(out.status.success(), "{out:?}");
}

pub(crate) use taskhost_tests::http1::Response;

/// Sends one request on a new connection and reads the whole response ([`taskhost_tests::http1`]).
pub(crate) fn send<S: Read + Write>(
    stream: &mut S,
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Response {
    taskhost_tests::http1::exchange(stream, authority, method, path, headers, body)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// A plain HTTP client of one host.
pub(crate) struct Client {
    pub(crate) authority: String,
    pub(crate) token: Option<String>,
}

impl Client {
    /// A client of `host` presenting `token`.
    pub(crate) fn new(host: &HttpHost, token: &str) -> Self {
        Self {
            authority: host.authority(),
            token: Some(token.to_owned()),
        }
    }

    /// POSTs `body` to `/mcp` with the MCP headers and `extra` ones (which replace them by name).
    pub(crate) fn post(&self, extra: &[(&str, &str)], body: &[u8]) -> Response {
        let bearer = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let mut headers: Vec<(&str, &str)> = vec![
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
        ];
        if let Some(b) = &bearer {
            headers.push(("Authorization", b));
        }
        headers.retain(|(n, _)| !extra.iter().any(|(e, _)| e.eq_ignore_ascii_case(n)));
        headers.extend_from_slice(extra);
        let mut stream =
            std::net::TcpStream::connect(&self.authority).expect("connect to the host");
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .expect("timeout");
        send(&mut stream, &self.authority, "POST", "/mcp", &headers, body)
    }

    /// A 2026-07-28 (stateless) tool call.
    pub(crate) fn call(&self, tool: &str, arguments: Value) -> String {
        self.modern(
            "tools/call",
            Some(tool),
            json!({"name": tool, "arguments": arguments}),
        )
        .tool_text()
    }

    /// A 2026-07-28 tool call's whole answer: its text and the task it started.
    pub(crate) fn answer(&self, tool: &str, arguments: Value) -> crate::mcp::Answer {
        let response = self.modern(
            "tools/call",
            Some(tool),
            json!({"name": tool, "arguments": arguments}),
        );
        crate::mcp::Answer {
            text: response.tool_text(),
            started: response.started_task(),
        }
    }

    /// A 2026-07-28 request: its version in `_meta` and the headers it needs.
    pub(crate) fn modern(&self, method: &str, name: Option<&str>, params: Value) -> Response {
        self.modern_with(method, name, params, json!({}))
    }

    /// A 2026-07-28 request from a client that declared the tasks extension.
    pub(crate) fn with_tasks(&self, method: &str, name: Option<&str>, params: Value) -> Value {
        let capabilities = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
        let answer = self.modern_with(method, name, params, capabilities);
        answer
            .messages()
            .into_iter()
            .find(|m| m.get("id").is_some())
            .unwrap_or_else(|| json!({"no answer": answer.body}))
    }

    fn modern_with(
        &self,
        method: &str,
        name: Option<&str>,
        mut params: Value,
        capabilities: Value,
    ) -> Response {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": capabilities,
        });
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut headers = vec![
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", method),
        ];
        if let Some(name) = name {
            headers.push(("Mcp-Name", name));
        }
        self.post(&headers, body.to_string().as_bytes())
    }
}

/// A legacy (2025-11-25) session over HTTP: initialized, then one request per connection carrying
/// its `Mcp-Session-Id`.
pub(crate) struct LegacySession {
    pub(crate) client: Client,
    pub(crate) id: String,
}

impl LegacySession {
    /// Initializes a session as `client`.
    pub(crate) fn open(client: Client) -> Self {
        Self::declaring(client, json!({}))
    }

    /// Initializes a session as `client`, declaring `capabilities`.
    pub(crate) fn declaring(client: Client, capabilities: Value) -> Self {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "taskhost-tests", "version": "1"}}});
        let response = client.post(&[], init.to_string().as_bytes());
        assert_eq!(response.status, 200, "{response:?}");
        let id = response
            .headers
            .get("mcp-session-id")
            .expect("a session id")
            .clone();
        let session = Self { client, id };
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let done = session.post(initialized);
        assert_eq!(done.status, 202, "{done:?}");
        session
    }

    pub(crate) fn post(&self, body: Value) -> Response {
        self.client.post(
            &[
                ("Mcp-Session-Id", &self.id),
                ("MCP-Protocol-Version", "2025-11-25"),
            ],
            body.to_string().as_bytes(),
        )
    }

    /// A tool call in this session.
    pub(crate) fn call(&self, tool: &str, arguments: Value) -> String {
        self.post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}}))
            .tool_text()
    }
}

/// The pid a task printed as its first line, read through `client` (reads consume: the line is in
/// the first read that has output).
pub(crate) fn printed_pid(client: &Client, task: &str) -> i32 {
    let mut pid = None;
    let mut seen = String::new();
    assert!(
        eventually(Duration::from_secs(20), || {
            let read = client.call("task_output", json!({"task_id": task}));
            pid = read
                .lines()
                .next()
                .and_then(|l| l.trim().parse::<i32>().ok());
            seen.push_str(&read);
            pid.is_some()
        }),
        "{seen}"
    );
    pid.unwrap_or_default()
}
