//! The plainest MCP client over a child's stdio: one JSON-RPC message a line, each request answered
//! before the next is sent, every message the server sends that is not the answer skipped. Both
//! sides of a side-by-side row speak through it, so neither pays for a client library the other
//! does not.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

/// An MCP server on a child's stdio, initialized. Dropped, its input closes (a server's sign to
/// end and clean up after itself); one still running 10 s later is killed.
pub struct LineClient {
    child: Child,
    input: Option<ChildStdin>,
    output: BufReader<ChildStdout>,
    next_id: u64,
}

impl LineClient {
    /// Spawns `command` (its stderr discarded) and initializes a session with it.
    pub fn start(mut command: Command) -> Self {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the server");
        let input = child.stdin.take();
        let output = BufReader::new(child.stdout.take().expect("stdout"));
        let mut client = Self {
            child,
            input,
            output,
            next_id: 0,
        };
        client.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "bench", "version": "1"}}),
        );
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }

    fn send(&mut self, message: &Value) {
        let mut line = message.to_string();
        line.push('\n');
        let input = self.input.as_mut().expect("open until dropped");
        input.write_all(line.as_bytes()).expect("write");
        input.flush().expect("flush");
    }

    /// Sends one request; its result.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.output.read_line(&mut line).expect("read");
            assert!(n > 0, "the server closed its output");
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["id"] == id && message.get("method").is_none() {
                return message["result"].clone();
            }
        }
    }

    /// Calls tool `name`; its result's first text, and the task it started (taskhost's `_meta`).
    pub fn call(&mut self, name: &str, arguments: Value) -> (String, Option<String>) {
        let result = self.request("tools/call", json!({"name": name, "arguments": arguments}));
        let text = result["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (text, taskhost_tests::started_task(&result))
    }
}

impl Drop for LineClient {
    fn drop(&mut self) {
        drop(self.input.take());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            // Polling the child's exit: 10 ms is well under the server's own shutdown.
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
