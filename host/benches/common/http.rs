//! HTTP as the benches speak it: a release host serving `--listen http://127.0.0.1:0`, principals,
//! and one keep-alive connection speaking JSON-RPC over `POST /mcp`.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;

use serde_json::{Value, json};

use super::profile_dir;

/// A host serving HTTP; killed when dropped.
pub struct Host {
    /// The host process.
    pub child: std::process::Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    state: std::path::PathBuf,
}

impl Drop for Host {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A host on `http://127.0.0.1:0` with its default plugins, a principal allowed 64 tasks at once.
pub fn start(dir: &std::path::Path) -> Host {
    start_with(dir, "[tasks]\nmax_concurrent_tasks_per_owner = 64\n", &[])
}

/// A host on `http://127.0.0.1:0` with `config` and `extra` arguments (its plugins, say).
pub fn start_with(dir: &std::path::Path, config_text: &str, extra: &[String]) -> Host {
    let state = dir.join("state");
    let config = dir.join("config.toml");
    std::fs::write(&config, config_text).expect("config");
    let mut child = std::process::Command::new(profile_dir().join("taskhost"))
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
        .args(extra)
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

/// Makes principal `name`; its token.
pub fn token(host: &Host, name: &str) -> String {
    let out = std::process::Command::new(profile_dir().join("taskhost"))
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
pub struct Conn {
    stream: BufReader<TcpStream>,
    port: u16,
    bearer: String,
    session: Option<String>,
    modern: bool,
}

impl Conn {
    /// A connection to the host on `port`, presenting `token`, in the 2026-07-28 era when `modern`.
    pub fn open(port: u16, token: &str, modern: bool) -> Self {
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

    /// A connection to the host on `port`, presenting `token`, in a legacy session it initialized.
    pub fn legacy(port: u16, token: &str) -> Self {
        let mut conn = Self::open(port, token, false);
        conn.request(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}),
        );
        conn.notify("notifications/initialized");
        conn
    }

    /// Sends one request and returns the JSON-RPC message that answers it.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.try_request(method, params).expect("an answer")
    }

    /// As [`Conn::request`]; the connection's error (closed by a host that went away, say).
    pub fn try_request(&mut self, method: &str, mut params: Value) -> std::io::Result<Value> {
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
        stream.write_all(head.as_bytes())?;
        stream.write_all(body.as_bytes())?;
        self.read_response()
    }

    /// Sends a notification of a legacy session.
    pub fn notify(&mut self, method: &str) {
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
        let _ = self.read_response().expect("an answer");
    }

    /// Reads one response (its head, then a chunked or sized body) and returns the message with an
    /// id in it (`null` for none).
    fn read_response(&mut self) -> std::io::Result<Value> {
        let mut chunked = false;
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if self.stream.read_line(&mut line)? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
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
                self.stream.read_line(&mut size)?;
                let n = usize::from_str_radix(size.trim(), 16)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
                let mut chunk = vec![0; n + 2];
                self.stream.read_exact(&mut chunk)?;
                if n == 0 {
                    break;
                }
                body.extend_from_slice(&chunk[..n]);
            }
        } else {
            body.resize(length, 0);
            self.stream.read_exact(&mut body)?;
        }
        let text = String::from_utf8_lossy(&body);
        Ok(text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .chain(std::iter::once(text.as_ref()))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("id").is_some())
            .unwrap_or(Value::Null))
    }

    /// Calls `tool` to start a task: the task its result's `_meta` names.
    pub fn start(&mut self, tool: &str, arguments: Value) -> String {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        taskhost_tests::started_task(&answer["result"])
            .unwrap_or_else(|| panic!("not started: {answer}"))
    }

    /// A tool call; its first text.
    pub fn call(&mut self, tool: &str, arguments: Value) -> String {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// `Threads` and `VmRSS` (KiB) of process `pid`.
pub fn threads_and_rss(pid: u32) -> (u64, u64) {
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

/// The CPU time process `pid` has used so far (user and system), in milliseconds.
pub fn cpu_ms(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's name (which may hold spaces) close with its `)`: utime and
    // stime are the 14th and 15th of the line, the 12th and 13th after it.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let ticks: u64 = after
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse::<u64>().ok())
        .sum();
    ticks as f64 * 1000.0 / clock_ticks()
}

/// Clock ticks a second (`getconf CLK_TCK`), 100 when it cannot be asked.
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

/// The view's first page as `token`: from `GET /api/events` to its whole first `tasks` event;
/// the seconds and the rows the event holds.
pub fn first_page(port: u16, token: &str) -> (f64, usize) {
    let t = std::time::Instant::now();
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let head = format!(
        "GET /api/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).expect("send");
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    while reader.read_line(&mut line).expect("head") > 2 {
        line.clear();
    }
    let mut text = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size).expect("a chunk's size");
        let n = usize::from_str_radix(size.trim(), 16).expect("a chunk size");
        let mut chunk = vec![0; n + 2];
        reader.read_exact(&mut chunk).expect("a chunk");
        // An event ends with a blank line: only a chunk that has one can end the first `tasks`.
        let ends = chunk[..n].windows(2).any(|w| w == b"\n\n") || text.last() == Some(&b'\n');
        text.extend_from_slice(&chunk[..n]);
        if ends && let Some(rows) = tasks_event(&String::from_utf8_lossy(&text)) {
            return (t.elapsed().as_secs_f64(), rows);
        }
        assert!(
            n > 0,
            "the stream ended without a tasks event: {}",
            String::from_utf8_lossy(&text)
        );
    }
}

/// The rows of the first whole `tasks` event in `text`, if it holds one.
fn tasks_event(text: &str) -> Option<usize> {
    let at = text.find("event: tasks\n")?;
    let data = &text[at..];
    let data = &data[data.find("data: ")? + 6..];
    let end = data.find("\n\n")?;
    let event: serde_json::Value = serde_json::from_str(&data[..end]).expect("the event's data");
    event["rows"].as_array().map(Vec::len)
}
