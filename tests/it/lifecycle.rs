//! The host's life and death with the real binary: nothing outlives it however it ends, signals end
//! it cleanly in any mode, and the next host removes what a dead one left.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::fixtures::*;
use crate::mcp::{self, SocketHost, Watcher, alive, binary, call, host_dir, printed_pids};

/// Proves: SIGKILL of a host with running tasks of three kinds (a plain command, a child with a
/// grandchild, a `setsid` daemon still running) leaves no process of theirs alive a second later, and
/// the next host removes the dead one's private directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_with_sigkill_leaves_no_task_process_alive() {
    let dir = scratch("sigkill");
    // No handover: a SIGKILLed host's tasks end at once.
    let config = crate::handover::grace_config(&dir, 0);
    let mut host = SocketHost::start(&dir, &["--no-watch", "--config", &config]);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let plain = mcp::start(&client, "echo $$; exec sleep 1000").await;
    let nested = mcp::start(
        &client,
        "bash -c 'sleep 1000 & echo $!; echo $$; wait' & echo $!; wait",
    )
    .await;
    let daemon = mcp::start(&client, "setsid sleep 1000 & echo $!; echo $$; wait").await;
    let mut pids = printed_pids(&client, &plain, 1).await;
    pids.extend(printed_pids(&client, &nested, 3).await);
    pids.extend(printed_pids(&client, &daemon, 2).await);
    assert!(pids.iter().all(|&p| alive(p)), "all running: {pids:?}");
    let host_pid = host.child.id() as i32;
    let own_dir = host_dir(&dir, host_pid).expect("the host's directory");

    host.child.kill().unwrap();
    host.child.wait().unwrap();
    // The keeper's rounds take up to a second; the deadline leaves room for a busy machine.
    let ended = eventually(Duration::from_secs(10), || !pids.iter().any(|&p| alive(p)));
    let survivors: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(ended, "alive after the host died: {survivors:?}");
    assert!(
        own_dir.exists(),
        "a SIGKILLed host cannot clean up after itself"
    );
    drop(client);

    let mut next = SocketHost::start(&dir, &["--no-watch"]);
    assert!(
        !own_dir.exists(),
        "the next host removed the dead one's directory"
    );
    next.stop();
}

/// Proves: SIGTERM, SIGINT and SIGHUP each end a stdio host whose client still holds stdin open,
/// within its grace, with exit code 0, its task's processes ended and its directory removed.
#[test]
fn a_stop_signal_ends_a_stdio_host_with_stdin_held_open() {
    let dir = scratch("signals");
    for signal in ["TERM", "INT", "HUP"] {
        let mut child = std::process::Command::new(binary())
            .args(["serve", "--no-watch"])
            .env("XDG_RUNTIME_DIR", dir.path())
            .env("XDG_STATE_HOME", dir.join("state-home"))
            .env("RUST_LOG", "warn")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let _stdin = child.stdin.take();
        let pid = child.id() as i32;
        assert!(
            eventually(Duration::from_secs(10), || host_dir(&dir, pid).is_some()),
            "the host started"
        );
        let own_dir = host_dir(&dir, pid).unwrap();
        // Signals are in force before the directory exists: a signal while the plugins load ends
        // the host as well.
        let sent = Instant::now();
        assert!(
            std::process::Command::new("kill")
                .args([&format!("-{signal}"), &pid.to_string()])
                .status()
                .unwrap()
                .success()
        );
        let exited = eventually(Duration::from_secs(10), || {
            matches!(child.try_wait(), Ok(Some(_)))
        });
        assert!(exited, "SIG{signal} did not end the host");
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "SIG{signal}: {status:?}");
        assert!(sent.elapsed() < Duration::from_secs(10));
        assert!(!own_dir.exists(), "SIG{signal}: the directory was left");
    }
}

/// Waits until `path` exists.
fn appears(path: &Path) -> bool {
    eventually(Duration::from_secs(10), || path.exists())
}

/// Proves: a second stop signal during a slow shutdown exits at once with the signal's code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_signal_exits_at_once() {
    let dir = scratch("second-signal");
    let config = dir.join("slow.toml");
    std::fs::write(&config, "[tasks]\nteardown_grace_ms = 60000\n").unwrap();
    let mut host = SocketHost::start(&dir, &["--no-watch", "--config", config.to_str().unwrap()]);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    // A task that ignores SIGTERM holds the shutdown for its grace (the process group's kill).
    let marker = dir.join("trapped");
    mcp::start(
        &client,
        &format!("trap '' TERM; touch {}; sleep 1000", marker.display()),
    )
    .await;
    assert!(appears(&marker));
    let pid = host.child.id().to_string();
    let kill = |sig: &str| {
        std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .unwrap()
    };
    kill("-TERM");
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        matches!(host.child.try_wait(), Ok(None)),
        "still shutting down"
    );
    kill("-INT");
    let exited = eventually(Duration::from_secs(5), || {
        matches!(host.child.try_wait(), Ok(Some(_)))
    });
    assert!(exited, "the second signal did not end the host");
    assert_eq!(host.child.wait().unwrap().code(), Some(128 + 2));
    drop(client);
}

/// Reads the pid a command wrote to `file`, once it is there.
fn pid_in(file: &Path) -> i32 {
    assert!(appears(file), "{} never appeared", file.display());
    let mut text = String::new();
    assert!(eventually(Duration::from_secs(5), || {
        text = std::fs::read_to_string(file).unwrap_or_default();
        text.ends_with('\n')
    }));
    text.trim().parse().expect("a pid")
}

/// Proves: a client's `notifications/cancelled` for a foreground `bash` ends the command within a
/// second (SIGTERM to its group), and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_foreground_command_ends_within_a_second() {
    use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest};
    use rmcp::service::PeerRequestOptions;
    let dir = scratch("fg-cancel");
    let pidfile = dir.join("pid");
    let client = mcp::stdio_client(&["--no-watch"], Watcher::default()).await;
    let args = json!({"command": format!("echo $$ > {}; exec sleep 30", pidfile.display())});
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(
        CallToolRequestParams::new("bash").with_arguments(args.as_object().unwrap().clone()),
    ));
    let handle = client
        .peer()
        .send_cancellable_request(request, PeerRequestOptions::no_options())
        .await
        .expect("send");
    let pid = pid_in(&pidfile);
    assert!(alive(pid));
    handle
        .cancel(Some("the user pressed Esc".into()))
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(1), || !alive(pid)),
        "the cancelled command is still running"
    );
    assert_eq!(
        call(&client, "bash", json!({"command": "echo still here"})).await,
        "still here\n[exit code: 0]"
    );
    client.cancel().await.expect("close");
}

/// Proves: the end of a session ends its foreground commands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_end_ends_its_foreground_commands() {
    let dir = scratch("fg-session-end");
    let host = SocketHost::start(&dir, &["--no-watch"]);
    let pidfile = dir.join("pid");
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let peer = client.peer().clone();
    let command = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let pending = tokio::spawn(async move {
        let args = json!({"command": command});
        peer.call_tool(
            rmcp::model::CallToolRequestParams::new("bash")
                .with_arguments(args.as_object().unwrap().clone()),
        )
        .await
    });
    let pid = pid_in(&pidfile);
    assert!(alive(pid));
    client.cancel().await.expect("close");
    assert!(
        eventually(Duration::from_secs(2), || !alive(pid)),
        "the foreground command outlived its session"
    );
    pending.abort();
}

/// Proves: past `max_foreground_per_owner` a foreground call is refused with a clear error and runs
/// nothing; one that ends frees its slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_foreground_limit_refuses_calls_past_it() {
    let dir = scratch("fg-limit");
    let config = dir.join("limit.toml");
    std::fs::write(&config, "[tasks]\nmax_foreground_per_owner = 2\n").unwrap();
    let client = std::sync::Arc::new(
        mcp::stdio_client(
            &["--no-watch", "--config", config.to_str().unwrap()],
            Watcher::default(),
        )
        .await,
    );
    let mut holders = Vec::new();
    for i in 0..2 {
        let (client, file) = (client.clone(), dir.join(format!("held-{i}")));
        holders.push(tokio::spawn(async move {
            call(
                &client,
                "bash",
                json!({"command": format!("touch {}; sleep 1", file.display())}),
            )
            .await
        }));
    }
    assert!(appears(&dir.join("held-0")) && appears(&dir.join("held-1")));
    let refused = dir.join("refused");
    let text = call(
        &client,
        "bash",
        json!({"command": format!("touch {}", refused.display())}),
    )
    .await;
    assert_eq!(
        text,
        "Error: too many foreground commands running in this session (limit 2); wait for one to finish, or run this one with run_in_background"
    );
    for h in holders {
        assert_eq!(h.await.unwrap(), "[exit code: 0]");
    }
    assert!(!refused.exists(), "the refused call ran nothing");
    assert_eq!(
        call(&client, "bash", json!({"command": "echo free"})).await,
        "free\n[exit code: 0]"
    );
}

/// Proves: 500 concurrent foreground calls from one session do not stop another session's `echo hi`
/// (the limit turns most of them away at once, and the host has descriptors to spare).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_foreground_calls_does_not_starve_another_session() {
    let dir = scratch("fg-flood");
    let host = SocketHost::start(&dir, &["--no-watch"]);
    let flooder = std::sync::Arc::new(mcp::socket_client(&host.socket, Watcher::default()).await);
    let other = mcp::socket_client(&host.socket, Watcher::default()).await;
    let calls: Vec<_> = (0..500)
        .map(|_| {
            let c = flooder.clone();
            tokio::spawn(async move { call(&c, "bash", json!({"command": "sleep 2"})).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        call(&other, "bash", json!({"command": "echo hi"})).await,
        "hi\n[exit code: 0]"
    );
    let mut refused = 0;
    for c in calls {
        let text = c.await.unwrap();
        if text.starts_with("Error: too many foreground commands") {
            refused += 1;
        } else {
            assert_eq!(text, "[exit code: 0]");
        }
    }
    assert!(refused >= 500 - 16, "{refused} refused");
    other.cancel().await.expect("close");
}

/// A host driven line by line on its stdio, as a raw JSON-RPC client.
struct RawSession {
    /// The host's default state directory, removed with the session.
    _state: Scratch,
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl RawSession {
    async fn start() -> Self {
        let state = scratch("raw-state");
        let mut child = tokio::process::Command::new(binary())
            .args(["serve", "--no-watch"])
            .env("XDG_STATE_HOME", state.path())
            .env("RUST_LOG", "error")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(
            child.stdout.take().unwrap(),
        ));
        let mut s = Self {
            _state: state,
            child,
            stdin,
            stdout,
        };
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}});
        s.send(&init.to_string()).await;
        assert_eq!(s.reply().await["id"], 0);
        s.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        s
    }

    /// Closes stdin, as a client's end, and waits for the host to exit cleanly.
    async fn close(self) {
        let Self {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let status = tokio::time::timeout(Duration::from_secs(20), child.wait())
            .await
            .expect("the host exits when its client goes")
            .unwrap();
        assert!(status.success(), "{status:?}");
    }

    async fn send(&mut self, line: &str) {
        use tokio::io::AsyncWriteExt;
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    /// The next reply (notifications skipped), within 10 s.
    async fn reply(&mut self) -> serde_json::Value {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(10), self.stdout.next_line())
                .await
                .expect("a reply within 10 s (never silence)")
                .unwrap()
                .expect("the host is still there");
            let v: serde_json::Value = serde_json::from_str(&line).unwrap();
            if v.get("id").is_some() {
                return v;
            }
        }
    }

    /// Calls `bash` with `args` as request `id`; returns the result's first text.
    async fn bash(&mut self, id: u64, args: serde_json::Value) -> String {
        let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "bash", "arguments": args}});
        self.send(&call.to_string()).await;
        let r = self.reply().await;
        assert_eq!(r["id"], id, "{r}");
        r["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no text in {r}"))
            .to_owned()
    }
}

/// Proves: unparsable, over-long and ill-typed JSON-RPC input each get their error reply, never
/// silence, and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_json_rpc_input_gets_an_error_reply_and_the_session_goes_on() {
    let mut s = RawSession::start().await;
    s.send("{this is not json").await;
    let r = s.reply().await;
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (serde_json::Value::Null, json!(-32700)),
        "{r}"
    );

    let long = format!("{{\"pad\": \"{}\"}}", "x".repeat(17 << 20));
    s.send(&long).await;
    let r = s.reply().await;
    assert_eq!(r["error"]["code"], -32600, "{r}");

    s.send(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"bash","arguments":[1,2]}}"#)
        .await;
    let r = s.reply().await;
    assert_eq!(
        (r["id"].clone(), r["error"]["code"].clone()),
        (json!(5), json!(-32602)),
        "{r}"
    );

    s.send(r#"{"jsonrpc":"2.0","id":6,"method":"ping"}"#).await;
    assert_eq!(s.reply().await["id"], 6, "the session goes on");
    s.close().await;
}

/// Proves: a spawn that fails (a NUL byte, an argument list too long, a missing or non-directory
/// workdir) is a tool error naming the OS cause, in the foreground and in the background, and a
/// background start that fails registers nothing (no id burnt, nothing listed); an error quotes at
/// most 200 characters of a bad value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_spawn_is_an_error_naming_the_cause_and_registers_nothing() {
    let mut s = RawSession::start().await;
    let file = std::env::current_exe().unwrap();
    let huge = format!("echo {}", "x".repeat(200_000));
    let cases = [
        (
            json!({"command": "echo a\u{0}b"}),
            "Error: cannot start the command: nul byte found in provided data",
        ),
        (
            json!({"command": huge}),
            "Error: cannot start the command: Argument list too long (os error 7)",
        ),
        (
            json!({"command": "true", "workdir": "/nonexistent/dir"}),
            "Error: cannot start the command: workdir /nonexistent/dir: No such file or directory (os error 2)",
        ),
        (
            json!({"command": "true", "workdir": file}),
            &*format!(
                "Error: cannot start the command: workdir {}: not a directory",
                file.display()
            ),
        ),
    ];
    let mut id = 10;
    for (args, expected) in &cases {
        for background in [false, true] {
            let mut args = args.clone();
            args["run_in_background"] = json!(background);
            id += 1;
            assert_eq!(
                s.bash(id, args).await,
                *expected,
                "background: {background}"
            );
        }
    }
    let list = json!({"jsonrpc": "2.0", "id": 90, "method": "tools/call",
        "params": {"name": "task_list", "arguments": {}}});
    s.send(&list.to_string()).await;
    assert_eq!(
        s.reply().await["result"]["content"][0]["text"],
        "(no background tasks)"
    );
    assert_eq!(
        s.bash(91, json!({"command": "true", "run_in_background": true}))
            .await,
        "started background task bash-1",
        "no id was burnt"
    );
    let quoted = s.bash(92, json!({"command": vec!["y"; 5000]})).await;
    assert!(
        quoted.starts_with("Error: invalid command: expected a string, got [\"y\""),
        "{quoted:.300}"
    );
    assert!(quoted.len() < 300, "{} characters", quoted.len());
    assert!(quoted.ends_with("more characters)"), "{quoted}");
    s.close().await;
}

/// Proves: after a burst of 300 concurrent tool calls (each holding a plugin thread for 300 ms) the
/// host's thread count comes back within 8 of where it was before the burst (idle plugin threads beyond
/// the core exit after five idle seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plugin_threads_shrink_back_after_a_burst_of_calls() {
    let dir = scratch("shrink");
    let probe = built("taskhost_test_probe");
    let host = SocketHost::start(&dir, &["--no-watch", "--plugin", probe.to_str().unwrap()]);
    let pid = host.child.id() as i32;
    let client = std::sync::Arc::new(mcp::socket_client(&host.socket, Watcher::default()).await);
    assert_eq!(
        call(&client, "probe_block", json!({"ms": 1})).await,
        "unblocked"
    );
    let threads = || crate::faults::status_kib(pid, "Threads");
    let before = threads();
    let burst: Vec<_> = (0..300)
        .map(|_| {
            let c = client.clone();
            tokio::spawn(async move { call(&c, "probe_block", json!({"ms": 300})).await })
        })
        .collect();
    let mut peak = 0;
    for b in burst {
        peak = peak.max(threads());
        assert_eq!(b.await.unwrap(), "unblocked");
    }
    assert!(
        peak > before + 50,
        "the burst grew the pool: {before} -> {peak}"
    );
    assert!(
        eventually(Duration::from_secs(20), || threads() <= before + 8),
        "threads stayed at {} (before the burst: {before}, peak {peak})",
        threads()
    );
}

/// Proves: Ctrl-C in a terminal (tmux types it) ends `taskhost serve` at once, with its files.
#[test]
fn ctrl_c_in_a_terminal_ends_serve() {
    let dir = scratch("ctrl-c");
    let socket = format!("taskhost-it-{}", std::process::id());
    let pidfile = dir.join("pid");
    let tmux = |args: &[&str]| {
        std::process::Command::new("tmux")
            .args(["-L", &socket])
            .env("TMUX_TMPDIR", dir.path())
            .args(args)
            .status()
            .is_ok_and(|s| s.success())
    };
    let command = format!(
        "echo $$ > {}; XDG_RUNTIME_DIR={} XDG_STATE_HOME={}/state-home RUST_LOG=error exec {} serve --no-watch",
        pidfile.display(),
        dir.display(),
        dir.display(),
        binary().display()
    );
    if !tmux(&["new-session", "-d", "-x", "120", "-y", "30", &command]) {
        eprintln!("ctrl_c_in_a_terminal_ends_serve: skipped: tmux could not start");
        return;
    }
    let pid = pid_in(&pidfile);
    assert!(
        eventually(Duration::from_secs(10), || host_dir(&dir, pid).is_some()),
        "the host started"
    );
    // Its signal handlers are in force before its directory exists.
    assert!(tmux(&["send-keys", "C-c"]));
    let ended = eventually(Duration::from_secs(5), || !alive(pid));
    tmux(&["kill-server"]);
    assert!(ended, "Ctrl-C did not end serve");
    assert!(host_dir(&dir, pid).is_none(), "its directory was left");
}
