//! Owners that outlive their connection, with the real binary: a `taskhost connect` bridge comes
//! back through a SIGKILL and restart of its host as the same owner (its tasks listed and readable,
//! the lost one told once), another bridge never sees them; on one host, a connection that says
//! hello comes back within its grace, one that says goodbye ends at once, and one that does not come
//! back is ended when its grace passes.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::clients::bridged;
use crate::fixtures::*;
use crate::mcp::{self, SocketHost, Watcher, alive, call, printed_pids};

/// Proves the restart scenario through the bridge: bridge A starts a task that finishes and one that
/// runs, the host is SIGKILLed and a new one started on the same socket and state; A's client sees
/// no disconnection, lists both (the running one `lost`, its output readable to its last line) and
/// is told of the lost one once; bridge B sees none of them; A's next task gets a new id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_comes_back_through_a_host_restart_as_the_same_owner() {
    let dir = scratch("owner-restart");
    // No handover: the running task is lost with its host.
    let mut host = crate::handover::grace_host(&dir, 0);
    let (a, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let (b, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let finished = mcp::start(&a, "echo done; exit 3").await;
    assert!(
        mcp::read_waiting(&a, &finished, 20_000)
            .await
            .contains("exit code: 3")
    );
    let running = mcp::start(&a, "echo first line; echo $$; exec sleep 1000").await;
    let pid = printed_pids(&a, &running, 1).await[0];
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    assert!(
        eventually(Duration::from_secs(10), || !alive(pid)),
        "the keeper ended the dead host's task"
    );
    let _next = crate::handover::grace_host(&dir, 0);

    // The first call after the restart waits for the bridge to come back, then carries the notice
    // of the task that was lost while nobody was told.
    let listed = call(&a, "task_list", json!({})).await;
    assert!(
        listed.contains(&finished) && listed.contains(&running),
        "{listed}"
    );
    assert!(
        listed.contains("lost"),
        "the running task is lost: {listed}"
    );
    let notices = listed.split("\n---\n").skip(1).collect::<Vec<_>>();
    assert_eq!(
        notices.iter().filter(|n| n.contains(&running)).count(),
        1,
        "the lost task is told once: {listed}"
    );
    assert!(
        !notices.iter().any(|n| n.contains(&finished)),
        "the task read before the restart is not told again: {listed}"
    );
    let output = call(&a, "task_output", json!({"task_id": running})).await;
    assert!(output.starts_with("first line\n"), "{output}");
    assert!(output.contains("lost"), "{output}");
    let again = call(&a, "task_list", json!({})).await;
    assert!(!again.contains("\n---\n"), "no notice twice: {again}");

    assert_eq!(
        call(&b, "task_list", json!({})).await,
        "(no background tasks)"
    );
    assert_eq!(
        call(&b, "task_output", json!({"task_id": running})).await,
        format!("Error: unknown task {running}")
    );
    let newer = mcp::start(&a, "true").await;
    assert!(number(&newer) > number(&running), "{newer} after {running}");
    a.cancel().await.expect("close a");
    b.cancel().await.expect("close b");
}

fn number(id: &str) -> u64 {
    id.rsplit_once('-')
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

/// A raw connection that says hello, speaks line-delimited JSON-RPC, and can leave with or without
/// a goodbye.
struct Raw {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    secret: String,
    next_id: u64,
}

impl Raw {
    fn connect(socket: &Path, owner: &str) -> Self {
        let mut stream = UnixStream::connect(socket).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        writeln!(stream, "#taskhost hello owner={owner}").unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut welcome = String::new();
        reader.read_line(&mut welcome).unwrap();
        let secret = welcome
            .split_whitespace()
            .find_map(|w| w.strip_prefix("owner="))
            .unwrap_or_else(|| panic!("no owner in the welcome: {welcome}"))
            .to_owned();
        assert_eq!(secret.len(), 64, "{welcome}");
        let mut raw = Self {
            stream,
            reader,
            secret,
            next_id: 0,
        };
        raw.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "0"}}),
        );
        raw.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        raw
    }

    fn send(&mut self, message: &Value) {
        writeln!(self.stream, "{message}").unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.reader.read_line(&mut line).unwrap() > 0,
                "the host closed"
            );
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == id {
                return message;
            }
        }
    }

    fn call(&mut self, tool: &str, arguments: Value) -> String {
        let reply = self.request("tools/call", json!({"name": tool, "arguments": arguments}));
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Starts a task printing its pid; its id and pid.
    fn start_sleeper(&mut self) -> (String, i32) {
        let text = self.call(
            "bash",
            json!({"command": "echo $$; exec sleep 1000", "run_in_background": true}),
        );
        let id = text
            .strip_prefix("started background task ")
            .unwrap_or_else(|| panic!("{text}"))
            .to_owned();
        let mut pid = None;
        assert!(eventually(Duration::from_secs(10), || {
            let out = self.call("task_output", json!({"task_id": id}));
            pid = pid.or_else(|| out.lines().find_map(|l| l.trim().parse().ok()));
            pid.is_some()
        }));
        (id, pid.unwrap_or_default())
    }

    fn goodbye(mut self) {
        writeln!(self.stream, "#taskhost goodbye").unwrap();
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut self.reader, &mut rest);
    }
}

/// Proves, on one host: a connection lost without a goodbye comes back within its grace as the same
/// owner (its running task still there), a fresh owner does not see it, and a goodbye ends the
/// owner at once (its task ended).
#[test]
fn a_lost_connection_comes_back_within_its_grace_and_a_goodbye_ends_its_owner() {
    let dir = scratch("owner-grace");
    let host = SocketHost::start(&dir, &["--no-watch"]);
    let mut first = Raw::connect(&host.socket, "new");
    let (id, pid) = first.start_sleeper();
    let secret = first.secret.clone();
    drop(first);

    let mut stranger = Raw::connect(&host.socket, "new");
    assert_eq!(
        stranger.call("task_list", json!({})),
        "(no background tasks)"
    );
    let mut back = Raw::connect(&host.socket, &secret);
    assert!(back.call("task_list", json!({})).contains(&id));
    assert!(alive(pid), "the task ran on while its owner was away");
    back.goodbye();
    assert!(
        eventually(Duration::from_secs(10), || !alive(pid)),
        "a goodbye ends the owner's tasks at once"
    );
    let after = Raw::connect(&host.socket, &secret);
    assert_ne!(after.secret, secret, "an ended owner's secret names nobody");
    stranger.goodbye();
    after.goodbye();
}

/// Proves: an owner whose connection was lost and does not come back is ended when
/// `[host] owner_grace_ms` passes (its task ended).
#[test]
fn an_owner_that_does_not_come_back_is_ended_after_its_grace() {
    let dir = scratch("owner-expiry");
    let config = dir.join("taskhost.toml");
    std::fs::write(&config, "[host]\nowner_grace_ms = 300\n").unwrap();
    let host = SocketHost::start(&dir, &["--no-watch", "--config", config.to_str().unwrap()]);
    let mut raw = Raw::connect(&host.socket, "new");
    let (_, pid) = raw.start_sleeper();
    drop(raw);
    assert!(
        eventually(Duration::from_secs(20), || !alive(pid)),
        "the owner was ended after its grace"
    );
}

/// Proves, with the official Python SDK in the 2026-07-28 era (no `initialize`): a client joined
/// through `taskhost connect` goes on through a SIGKILL and restart of its host without noticing:
/// its next call lists its task (`lost`), a foreground call works, and the client never reconnects.
#[test]
fn a_2026_client_through_the_bridge_goes_on_through_a_host_restart() {
    use std::io::{BufRead, Write};
    let Some(python) = crate::clients::sdk_python() else {
        eprintln!(
            "a_2026_client_through_the_bridge_goes_on_through_a_host_restart: skipped: no Python \
             venv with the mcp SDK at target/mcp-venv"
        );
        return;
    };
    let dir = scratch("owner-python");
    // No handover: the running task is lost with its host.
    let mut host = crate::handover::grace_host(&dir, 0);
    let script = crate::clients::python_script("bridge_restart.py");
    let mut client = std::process::Command::new(python)
        .arg(script)
        .arg(crate::mcp::binary())
        .arg(&host.socket)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run the Python client");
    // A client that hangs is killed, which ends its output: the test then fails, it never hangs.
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let pid = nix::unistd::Pid::from_raw(client.id() as i32);
    std::thread::spawn(move || {
        if finished.recv_timeout(Duration::from_secs(120)).is_err() {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
        }
    });
    let mut lines = BufReader::new(client.stdout.take().expect("its stdout")).lines();
    let mut next = || lines.next().and_then(Result::ok).unwrap_or_default();
    let started = next();
    let id = started
        .strip_prefix("started ")
        .unwrap_or_else(|| panic!("{started}"))
        .to_owned();
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    let _next_host = crate::handover::grace_host(&dir, 0);
    let mut stdin = client.stdin.take().expect("its stdin");
    writeln!(stdin, "restarted").unwrap();
    let listed = next();
    assert!(
        listed.starts_with("listed ") && listed.contains(&id) && listed.contains("lost"),
        "{listed}"
    );
    let after = next();
    assert!(after.contains("after the restart"), "{after}");
    assert_eq!(next(), "ok");
    assert!(client.wait().unwrap().success());
    let _ = done.send(());
}
