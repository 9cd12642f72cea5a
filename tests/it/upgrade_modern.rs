//! A 2026-07-28 client (no `initialize`, its tool changes told on a `subscriptions/listen` stream)
//! through `taskhost connect` across an upgrade (`SIGHUP`), spoken as raw JSON-RPC on the bridge's
//! stdio, as Claude Code speaks it: the open stream does not hold the upgrade up, no call fails,
//! and the stream tells of the new host once.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fixtures::*;
use crate::handover::{replace_binary, running_inode, upgradable_host};
use crate::mcp::binary;

/// How long the test waits for any one line before it calls the bridge silent.
const SILENCE: Duration = Duration::from_secs(30);

/// A `taskhost connect` bridge and what came out of it, every message kept in order.
struct ModernClient {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Value>,
    seen: Vec<Value>,
    next_id: u64,
}

impl ModernClient {
    fn connect(socket: &std::path::Path) -> Self {
        let mut child = Command::new(binary())
            .arg("connect")
            .arg(format!("unix:{}", socket.display()))
            .env("RUST_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn taskhost connect");
        let stdin = child.stdin.take().expect("its stdin");
        let stdout = BufReader::new(child.stdout.take().expect("its stdout"));
        let (to, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                // A line that is not JSON is kept as a string, for an assertion to show.
                let message = serde_json::from_str(&line).unwrap_or(Value::String(line));
                if to.send(message).is_err() {
                    break;
                }
            }
        });
        Self {
            child,
            stdin,
            lines,
            seen: Vec::new(),
            next_id: 0,
        }
    }

    /// Sends request `method` with `params` and the 2026-07-28 `_meta` every request carries; its id.
    fn send(&mut self, method: &str, mut params: Value) -> u64 {
        self.next_id += 1;
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw-2026", "version": "0"},
        });
        let request =
            json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params});
        writeln!(self.stdin, "{request}").expect("write to the bridge");
        self.stdin.flush().expect("flush the bridge");
        self.next_id
    }

    /// The first message that `matches`, among those seen or, reading on, the next; every message
    /// read is kept in `seen`.
    fn until(&mut self, what: &str, matches: impl Fn(&Value) -> bool) -> Value {
        if let Some(message) = self.seen.iter().find(|m| matches(m)) {
            return message.clone();
        }
        loop {
            match self.lines.recv_timeout(SILENCE) {
                Ok(message) => {
                    self.seen.push(message.clone());
                    if matches(&message) {
                        return message;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    panic!("no {what} within {SILENCE:?}; seen: {:?}", self.seen)
                }
                Err(RecvTimeoutError::Disconnected) => {
                    panic!("the bridge closed before {what}; seen: {:?}", self.seen)
                }
            }
        }
    }

    /// Sends a request and waits for its answer.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        self.until(&format!("answer to {method}"), |m| {
            m["id"] == id && m.get("method").is_none()
        })
    }

    /// Calls `tool`: its first text, or the call's error.
    fn call(&mut self, tool: &str, arguments: Value) -> Result<String, Value> {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        match answer.get("error") {
            Some(error) => Err(error.clone()),
            None => Ok(answer["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()),
        }
    }

    /// Calls `tool` to start a task: the task its result's `_meta` names.
    fn start(&mut self, tool: &str, arguments: Value) -> String {
        let answer = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        taskhost_tests::started_task(&answer["result"])
            .unwrap_or_else(|| panic!("not started: {answer}"))
    }

    /// How many messages seen so far are notifications of `method`.
    fn told(&self, method: &str) -> usize {
        self.seen.iter().filter(|m| m["method"] == method).count()
    }
}

impl Drop for ModernClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Proves, for a 2026-07-28 client with an open `subscriptions/listen` stream and a running
/// background task: a `SIGHUP` upgrade does not wait on the stream (the calls made across it all
/// answer, the last, sent once the new image runs, within a second of the signal), the task is
/// carried over, and the client is told `tools/list_changed` once on its stream and never
/// acknowledged a second time.
#[test]
fn a_2026_client_listening_through_the_bridge_sees_an_upgrade_as_one_tools_change() {
    let dir = scratch("upgrade-modern");
    let (host, exe) = upgradable_host(&dir);
    let host_pid = host.child.id();
    let mut client = ModernClient::connect(&host.socket);
    let discovered = client.request("server/discover", json!({}));
    assert!(discovered.get("result").is_some(), "{discovered}");
    let listen = client.send(
        "subscriptions/listen",
        json!({"notifications": {"toolsListChanged": true}}),
    );
    client.until("the stream's acknowledgement", |m| {
        m["method"] == "notifications/subscriptions/acknowledged"
    });
    let task = client.start(
        "bash",
        json!({"command": "exec sleep 1000", "run_in_background": true}),
    );
    let new_inode = replace_binary(&exe);
    let hup = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(host_pid as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    // Calls one after another until one was sent once the new image ran: some cross the pause.
    let mut failed = Vec::new();
    let mut last = loop {
        let upgraded = running_inode(host_pid) == Some(new_inode);
        let listed = client.call("task_list", json!({}));
        match listed {
            Ok(text) if upgraded => break text,
            Ok(_) => {}
            Err(error) => failed.push(error),
        }
    };
    let took = hup.elapsed();
    assert!(
        failed.is_empty(),
        "calls across the upgrade failed (the last answered {took:?} after the signal): {failed:?}"
    );
    assert!(
        took < Duration::from_secs(1),
        "the upgrade held the client's calls up for {took:?}"
    );
    assert!(last.contains(&format!("{task} [bash] running")), "{last}");
    client.until("the stream's tools change", |m| {
        m["method"] == "notifications/tools/list_changed"
    });
    // A last round trip: whatever the new host said before it has reached the client.
    last = client
        .call("task_list", json!({}))
        .expect("a call after the upgrade");
    assert!(last.contains(&task), "{last}");
    let changed: Vec<&Value> = client
        .seen
        .iter()
        .filter(|m| m["method"] == "notifications/tools/list_changed")
        .collect();
    assert_eq!(changed.len(), 1, "one tools change: {:?}", client.seen);
    assert_eq!(
        changed[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], listen,
        "told on the client's stream: {}",
        changed[0]
    );
    assert_eq!(
        client.told("notifications/subscriptions/acknowledged"),
        1,
        "the stream acknowledged once: {:?}",
        client.seen
    );
    client
        .call("task_kill", json!({"task_id": task}))
        .expect("the task ends");
    drop(client);
    drop(host);
}
