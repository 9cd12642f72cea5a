//! What today's MCP clients need of the host: one shared host joined through `taskhost connect`,
//! progress for foreground commands, and (with the official Python SDK, in both protocol eras) tool
//! changes and notices.

use std::path::Path;
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, NumberOrString, ProgressToken, RequestMetaObject};
use rmcp::transport::TokioChildProcess;
use serde_json::json;

use crate::fixtures::*;
use crate::mcp::{self, SocketHost, Watcher, alive, binary, call};

/// A client that joins the host on `socket` through `taskhost connect ARGS`.
pub(crate) async fn bridged(socket: &Path, watcher: Watcher, args: &[&str]) -> (mcp::Client, u32) {
    let mut cmd = tokio::process::Command::new(binary());
    cmd.arg("connect")
        .arg(format!("unix:{}", socket.display()))
        .args(args);
    let transport = TokioChildProcess::new(cmd).expect("spawn taskhost connect");
    let pid = transport.id().expect("the bridge's pid");
    (watcher.serve(transport).await.expect("MCP handshake"), pid)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_relays_its_clients_pipes_without_blocking() {
    let dir = scratch("bridge-pipes");
    let mut host = SocketHost::start(&dir, &["--no-watch"]);
    let (client, pid) = bridged(&host.socket, Watcher::default(), &[]).await;
    mcp::assert_pipes_served_without_blocking(pid);
    assert_eq!(
        call(&client, "task_list", json!({})).await,
        "(no background tasks)"
    );
    client.cancel().await.expect("close");
    host.stop();
}

#[test]
fn a_bridge_on_sockets_relays_them_without_a_waiting_thread() {
    let dir = scratch("bridge-sockets");
    let mut host = SocketHost::start(&dir, &["--no-watch"]);
    let mut cmd = std::process::Command::new(binary());
    cmd.arg("connect")
        .arg(format!("unix:{}", host.socket.display()));
    mcp::serves_socketpairs_without_blocking(cmd);
    host.stop();
}

/// Proves: two `taskhost connect` clients on one host are two sessions (foreign reads and kills
/// refused, foreign tasks not listed); closing one ends its tasks (its bridge says goodbye); a
/// bridge told not to wait for a restart (`--reconnect-for-ms 0`) exits with the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_joined_through_the_bridge_are_separate_sessions() {
    let dir = scratch("bridge");
    let mut host = SocketHost::start(&dir, &["--no-watch"]);
    let (a, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let (b, b_pid) = bridged(
        &host.socket,
        Watcher::default(),
        &["--reconnect-for-ms", "0"],
    )
    .await;
    let id = mcp::start(&a, "echo $$; sleep 1000").await;
    assert_eq!(
        call(&b, "task_output", json!({"task_id": id})).await,
        format!("Error: unknown task {id}")
    );
    assert_eq!(
        call(&b, "task_kill", json!({"task_id": id})).await,
        format!("Error: unknown task {id}")
    );
    assert_eq!(
        call(&b, "task_list", json!({})).await,
        "(no background tasks)"
    );
    let text = mcp::read_waiting(&a, &id, 1000).await;
    let task_pid: i32 = text.lines().next().unwrap().trim().parse().unwrap();
    assert!(alive(task_pid));
    a.cancel().await.expect("close a");
    assert!(
        eventually(Duration::from_secs(10), || !alive(task_pid)),
        "closing the bridge ended its session's tasks"
    );
    host.stop();
    assert!(
        eventually(Duration::from_secs(10), || !alive(b_pid as i32)),
        "the bridge exited with the host"
    );
    drop(b);
}

/// Proves: a foreground command whose call carries a progress token reports progress (the latest
/// line) while it runs, before its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_command_reports_progress_before_its_result() {
    let watcher = Watcher::default();
    let client = mcp::stdio_client(&["--no-watch"], watcher.clone()).await;
    let mut params = CallToolRequestParams::new("bash").with_arguments(
        json!({"command": "for i in 1 2 3; do echo line $i; sleep 1; done"})
            .as_object()
            .unwrap()
            .clone(),
    );
    params.meta = Some(RequestMetaObject::with_progress_token(ProgressToken(
        NumberOrString::Number(7),
    )));
    let result = client.peer().call_tool(params).await.expect("call");
    let seen = watcher.progress.lock().unwrap().clone();
    assert_eq!(
        result.content[0].as_text().map(|t| t.text.as_str()),
        Some("line 1\nline 2\nline 3\n[exit code: 0]")
    );
    assert!(seen.len() >= 2, "progress before the result: {seen:?}");
    assert_eq!(seen[0], "line 1", "{seen:?}");
    client.cancel().await.expect("close");
}

/// The Python of the venv with the official MCP SDK (`scripts/test` makes it), if there is one.
pub(crate) fn sdk_python() -> Option<std::path::PathBuf> {
    match std::env::var_os("TASKHOST_MCP_VENV") {
        Some(venv) => python_of(venv.into()),
        None => venv_python("mcp-venv"),
    }
}

/// The Python of the venv `target/<name>` (made by `scripts/mcp-venv`), if there is one.
pub(crate) fn venv_python(name: &str) -> Option<std::path::PathBuf> {
    python_of(artifacts().parent()?.join(name))
}

fn python_of(venv: std::path::PathBuf) -> Option<std::path::PathBuf> {
    let python = venv.join("bin/python");
    python.exists().then_some(python)
}

/// The Python script `tests/python/<name>`.
pub(crate) fn python_script(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("python")
        .join(name)
}

/// Copies the tasks and bash plugins into `dir`, a host's plugin directory.
pub(crate) fn copy_tasks_and_bash(dir: &Path) {
    for p in ["tasks", "bash"] {
        let name = format!("libtaskhost_plugin_{p}.so");
        std::fs::copy(artifacts().join(&name), dir.join(&name)).unwrap();
    }
}

/// The stdout and stderr of a script's run, which must have succeeded.
pub(crate) fn succeeded(out: &std::process::Output) -> (String, String) {
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    (stdout, stderr)
}

/// Proves, with the official Python SDK (`mcp` 2.3): a 2026-07-28 client subscribed with
/// `listen(tools_list_changed=True)` receives the change after a plugin file is replaced, and a
/// completion notice as a logging message; a legacy client still does both; a 2026-07-28 client that
/// did not subscribe is told nothing (see `tests/python/eras.py`).
#[test]
fn the_python_sdk_sees_tool_changes_and_notices_in_both_eras() {
    let Some(python) = sdk_python() else {
        eprintln!(
            "the_python_sdk_sees_tool_changes_and_notices_in_both_eras: skipped: no Python venv with the \
             mcp SDK at target/mcp-venv (scripts/test makes one; pip could not reach the registry?)"
        );
        return;
    };
    let dir = scratch("python-sdk");
    copy_tasks_and_bash(&dir);
    let script = python_script("eras.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(binary())
        .arg(dir.path())
        .env("XDG_STATE_HOME", dir.join("state-home"))
        .output()
        .expect("run the Python SDK scenarios");
    let (stdout, stderr) = succeeded(&out);
    // The client that left with its listen stream open: its session ended at its EOF, before the
    // SDK's signal 2 s later would have stopped the host.
    let left = stderr
        .split("leaving with a listen stream open")
        .nth(1)
        .unwrap_or_default();
    let ended = left.find("session ended");
    let stopped = left.find("stopping:");
    assert!(
        ended.is_some() && stopped.is_none_or(|s| Some(s) > ended),
        "the session ended at the client's EOF: {left}"
    );
    for scenario in [
        "modern_subscribed",
        "legacy",
        "modern_unsubscribed",
        "modern_leaves_listening",
    ] {
        assert!(
            stdout.contains(&format!("ok {scenario}\n")),
            "{stdout}{stderr}"
        );
    }
}

/// Proves: `taskhost plugins` prints its columns lined up with its header.
#[test]
fn the_plugin_table_lines_up_with_its_header() {
    let dir = scratch("plugin-table");
    let mut host = SocketHost::start(&dir, &["--no-watch"]);
    let out = std::process::Command::new(binary())
        .args(["plugins", "--connect"])
        .arg(format!("unix:{}", host.socket.display()))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 4, "{text}");
    let path_at = lines[0].find("path").expect("a path column");
    for row in &lines[1..] {
        assert_eq!(row.find('/'), Some(path_at), "{text}");
        assert!(row.contains(" active "), "{text}");
    }
    host.stop();
}

/// Proves: `serve` started from a terminal says on stderr what it is and how to register it.
#[test]
fn serve_started_from_a_terminal_says_how_to_use_it() {
    let dir = scratch("first-run");
    // `--foreground`: without it `timeout` moves the host into a background process group of the
    // terminal, where its first read of stdin stops it (SIGTTIN) for good.
    let out = output_within(
        std::process::Command::new("script")
            .args(["-q", "-c"])
            .arg(format!(
                "timeout --foreground -s INT 2 {} serve --no-watch",
                binary().display()
            ))
            .arg("/dev/null")
            .env("XDG_RUNTIME_DIR", dir.path())
            .env("XDG_STATE_HOME", dir.join("state-home"))
            .env("RUST_LOG", "error")
            .stdin(std::process::Stdio::null()),
        Duration::from_secs(30),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for expected in [
        "taskhost is an MCP server",
        "claude mcp add taskhost",
        "[mcp_servers.taskhost]",
        "gemini mcp add taskhost",
        "\"type\": \"local\"",
        "serve --listen unix:",
        "Ctrl-C stops it.",
    ] {
        assert!(
            text.contains(expected),
            "{expected:?} missing from:\n{text}"
        );
    }
}
