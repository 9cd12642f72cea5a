//! HTTP figures for `scripts/bench`, against the real release `taskhost` serving
//! `--listen http://127.0.0.1:0` with its default plugins:
//! - a non-blocking `task_output` round trip over one keep-alive connection, against the era's
//!   cheapest round trip on the same connection (`ping` in a legacy session; `server/discover` in
//!   2026-07-28, which has no `ping`);
//! - 100 clients at once, each its own principal and connection, each starting 20 background tasks
//!   and reading each to its end: every output checked byte for byte, the wall time, and the host's
//!   threads and resident memory after.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

use serde_json::{Value, json};

/// A host serving HTTP; killed when dropped.
struct Host {
    child: std::process::Child,
    port: u16,
    state: std::path::PathBuf,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(dir: &std::path::Path) -> Host {
    let state = dir.join("state");
    // Each client starts 20 tasks at once, past the default 10 a principal may run.
    let config = dir.join("config.toml");
    std::fs::write(&config, "[tasks]\nmax_concurrent_tasks_per_owner = 64\n").expect("config");
    let mut child = std::process::Command::new(common::profile_dir().join("taskhost"))
        .args([
            "serve",
            "--no-watch",
            "--listen",
            "http://127.0.0.1:0",
            "--config",
        ])
        .arg(&config)
        .arg("--state")
        .arg(&state)
        .env("XDG_RUNTIME_DIR", dir)
        .env("RUST_LOG", "error")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn taskhost");
    let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
    let url = lines
        .by_ref()
        .map_while(Result::ok)
        .find_map(|l| {
            l.strip_prefix("taskhost: MCP over HTTP at ")
                .map(str::to_owned)
        })
        .expect("the host printed its URL");
    std::thread::spawn(move || lines.for_each(drop));
    let port = url
        .trim_end_matches("/mcp")
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("a port");
    Host { child, port, state }
}

fn token(host: &Host, name: &str) -> String {
    let out = std::process::Command::new(common::profile_dir().join("taskhost"))
        .args(["token", "create", name, "--state"])
        .arg(&host.state)
        .output()
        .expect("token create");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .expect("a token")
        .to_owned()
}

/// One keep-alive connection speaking JSON-RPC over POST /mcp.
struct Conn {
    stream: BufReader<TcpStream>,
    port: u16,
    bearer: String,
    session: Option<String>,
    modern: bool,
}

impl Conn {
    fn open(port: u16, token: &str, modern: bool) -> Self {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream.set_nodelay(true).expect("nodelay");
        Self {
            stream: BufReader::new(stream),
            port,
            bearer: format!("Bearer {token}"),
            session: None,
            modern,
        }
    }

    /// Sends one request and returns the JSON-RPC message that answers it.
    fn request(&mut self, method: &str, mut params: Value) -> Value {
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
            self.port, self.bearer
        );
        if self.modern {
            params["_meta"] = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}});
            head.push_str(&format!(
                "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n"
            ));
            if let Some(name) = params.get("name").and_then(Value::as_str) {
                head.push_str(&format!("Mcp-Name: {name}\r\n"));
            }
        } else if let Some(id) = &self.session {
            head.push_str(&format!(
                "Mcp-Session-Id: {id}\r\nMCP-Protocol-Version: 2025-11-25\r\n"
            ));
        }
        let body =
            json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
        let stream = self.stream.get_mut();
        stream.write_all(head.as_bytes()).expect("send");
        stream.write_all(body.as_bytes()).expect("send");
        self.read_response()
    }

    fn notify(&mut self, method: &str) {
        let body = json!({"jsonrpc": "2.0", "method": method}).to_string();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Session-Id: {}\r\nMCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\r\n{body}",
            self.port,
            self.bearer,
            self.session.as_deref().unwrap_or(""),
            body.len()
        );
        self.stream
            .get_mut()
            .write_all(head.as_bytes())
            .expect("send");
        let _ = self.read_response();
    }

    /// Reads one response (its head, then a chunked or sized body) and returns the message with an
    /// id in it (`null` for none).
    fn read_response(&mut self) -> Value {
        let mut chunked = false;
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line).expect("head");
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let lower = line.to_ascii_lowercase();
            if lower.starts_with("transfer-encoding:") && lower.contains("chunked") {
                chunked = true;
            } else if let Some(n) = lower.strip_prefix("content-length:") {
                length = n.trim().parse().unwrap_or(0);
            } else if let Some(id) = lower.strip_prefix("mcp-session-id:") {
                self.session = Some(line[line.len() - id.trim().len()..].to_owned());
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                let mut size = String::new();
                self.stream.read_line(&mut size).expect("chunk size");
                let n = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
                let mut chunk = vec![0; n + 2];
                self.stream.read_exact(&mut chunk).expect("chunk");
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        } else {
            body.resize(length, 0);
            self.stream.read_exact(&mut body).expect("body");
        }
        let text = String::from_utf8_lossy(&body);
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .chain(std::iter::once(text.as_ref()))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("id").is_some())
            .unwrap_or(Value::Null)
    }

    fn call(&mut self, tool: &str, arguments: Value) -> String {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

fn round_trips(host: &Host) {
    let token = token(host, "bench-round-trip");
    for (era, modern, baseline) in [
        ("legacy session", false, "MCP ping round trip over HTTP"),
        ("2026-07-28", true, "server/discover round trip over HTTP"),
    ] {
        let mut conn = Conn::open(host.port, &token, modern);
        if !modern {
            conn.request(
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}),
            );
            conn.notify("notifications/initialized");
        }
        let started = conn.call(
            "bash",
            json!({"command": "sleep 600", "run_in_background": true}),
        );
        let id = started
            .trim_start_matches("started background task ")
            .to_owned();
        let n = 2_000;
        let (mut best_ping, mut best_read) = (f64::MAX, f64::MAX);
        for _ in 0..3 {
            let t = Instant::now();
            for _ in 0..n {
                if modern {
                    conn.request("server/discover", json!({}));
                } else {
                    conn.request("ping", json!({}));
                }
            }
            best_ping = best_ping.min(t.elapsed().as_secs_f64() * 1e6 / f64::from(n));
            let t = Instant::now();
            for _ in 0..n {
                conn.call("task_output", json!({"task_id": id}));
            }
            best_read = best_read.min(t.elapsed().as_secs_f64() * 1e6 / f64::from(n));
        }
        conn.call("task_kill", json!({"task_id": id}));
        println!(
            "{{\"name\":\"task_output round trip over HTTP (non-blocking), {era}\",\"unit\":\"us\",\"value\":{best_read:.1},\"baseline_name\":\"{baseline}\",\"baseline\":{best_ping:.1},\"ratio\":{:.2}}}",
            best_read / best_ping
        );
    }
}

/// `Threads` and `VmRSS` (KiB) of process `pid`.
fn threads_and_rss(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (field("Threads:"), field("VmRSS:"))
}

fn concurrent_clients(host: &Host) {
    let (clients, tasks) = (100, 20);
    let tokens: Vec<String> = (0..clients)
        .map(|i| token(host, &format!("bench-client-{i}")))
        .collect();
    let (threads_before, rss_before) = threads_and_rss(host.child.id());
    let t = Instant::now();
    let handles: Vec<_> = tokens
        .into_iter()
        .enumerate()
        .map(|(i, token)| {
            let port = host.port;
            std::thread::spawn(move || {
                let mut conn = Conn::open(port, &token, true);
                let ids: Vec<String> = (0..tasks)
                    .map(|j| {
                        let command = format!("printf 'client {i} task {j}\\n'; seq 1 200");
                        let started = conn.call(
                            "bash",
                            json!({"command": command, "run_in_background": true}),
                        );
                        started
                            .trim_start_matches("started background task ")
                            .to_owned()
                    })
                    .collect();
                let expected_tail: String = (1..=200).map(|n| format!("{n}\n")).collect();
                let mut wrong = 0;
                for (j, id) in ids.iter().enumerate() {
                    let read = conn.call(
                        "task_output",
                        json!({"task_id": id, "wait": true, "timeout_ms": 60000}),
                    );
                    let expected = format!(
                        "client {i} task {j}\n{expected_tail}[status: completed, exit code: 0]"
                    );
                    if !read.starts_with(&expected) {
                        wrong += 1;
                    }
                }
                wrong
            })
        })
        .collect();
    let wrong: usize = handles.into_iter().map(|h| h.join().unwrap_or(tasks)).sum();
    let elapsed = t.elapsed().as_secs_f64();
    let (threads, rss) = threads_and_rss(host.child.id());
    println!(
        "{{\"name\":\"{clients} HTTP clients x {tasks} background tasks, each read to its end ({wrong} outputs wrong; host threads {threads_before} -> {threads}, RSS {} -> {} MiB)\",\"unit\":\"s\",\"value\":{elapsed:.2},\"baseline_name\":\"(absolute)\",\"baseline\":{elapsed:.2},\"ratio\":1.00}}",
        rss_before / 1024,
        rss / 1024
    );
}

fn main() {
    let dir = common::scratch("http");
    let host = start(dir.path());
    round_trips(&host);
    concurrent_clients(&host);
}
