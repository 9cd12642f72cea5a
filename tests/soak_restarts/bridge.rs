//! A client on a `taskhost connect` bridge, speaking newline-delimited JSON-RPC on its stdio, one
//! call at a time.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

/// One bridge and the client's end of it.
pub struct Bridge {
    child: Child,
    to: Option<ChildStdin>,
    from: BufReader<ChildStdout>,
    next_id: u64,
}

impl Bridge {
    /// Starts `taskhost connect` to `socket` and initializes an MCP session through it.
    pub fn connect(binary: &Path, socket: &Path) -> Self {
        let mut child = Command::new(binary)
            .arg("connect")
            .arg(format!("unix:{}", socket.display()))
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn taskhost connect");
        let to = child.stdin.take().expect("the bridge's stdin");
        let from = BufReader::new(child.stdout.take().expect("the bridge's stdout"));
        let mut bridge = Self {
            child,
            to: Some(to),
            from,
            next_id: 0,
        };
        let init = json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "soak-restarts", "version": "0"}});
        bridge.request("initialize", init).expect("initialize");
        bridge.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        bridge
    }

    fn send(&mut self, message: &Value) {
        let to = self.to.as_mut().expect("the bridge's stdin is open");
        writeln!(to, "{message}").expect("write to the bridge");
        to.flush().expect("flush the bridge");
    }

    /// Sends a request and reads lines until its answer: its result, or its error's message.
    pub fn request(&mut self, method: &str, params: Value) -> Result<Value, String> {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            let n = self
                .from
                .read_line(&mut line)
                .expect("read from the bridge");
            assert!(n > 0, "the bridge closed its output");
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if message["id"] != json!(id) {
                continue;
            }
            if let Some(error) = message.get("error") {
                return Err(error["message"].as_str().unwrap_or_default().to_owned());
            }
            return Ok(message["result"].clone());
        }
    }

    /// Calls a tool: its text blocks joined with `\n---\n`, or the call's error.
    pub fn call(&mut self, tool: &str, arguments: Value) -> Result<String, String> {
        let result = self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        let blocks: Vec<&str> = result["content"]
            .as_array()
            .map(|c| c.iter().filter_map(|b| b["text"].as_str()).collect())
            .unwrap_or_default();
        Ok(blocks.join("\n---\n"))
    }

    /// Calls `tool` to start a task: the task its result's `_meta` names, or the answer's text.
    pub fn start(&mut self, tool: &str, arguments: Value) -> Result<String, String> {
        let result = self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        taskhost_tests::started_task(&result).ok_or_else(|| format!("not started: {result}"))
    }
}

impl Drop for Bridge {
    /// Closes the client's input (the bridge says goodbye: its owner's tasks end) and reaps it.
    fn drop(&mut self) {
        drop(self.to.take());
        let _ = self.child.wait();
    }
}
