//! End to end: the real `taskhost` binary, spoken to over MCP (rmcp's client) on stdio and on a Unix
//! socket.

#![allow(
    deprecated,
    reason = "MCP logging notifications carry the notices (SEP-2577 deprecates them in rmcp)"
)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, LoggingMessageNotificationParam, ReadResourceRequestParams,
    ResourceContents,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ServiceExt};
use serde_json::{Value, json};

use crate::fixtures::*;

/// Counts `tools/list_changed` and keeps logging notices.
#[derive(Clone, Default)]
pub(crate) struct Watcher {
    pub(crate) list_changed: Arc<AtomicUsize>,
    pub(crate) notices: Arc<Mutex<Vec<String>>>,
    /// Progress messages, in arrival order.
    pub(crate) progress: Arc<Mutex<Vec<String>>>,
    /// Directories the client's host uses, removed with the last clone of the watcher.
    kept: Arc<Mutex<Vec<Scratch>>>,
}

impl ClientHandler for Watcher {
    async fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress
            .lock()
            .unwrap()
            .push(params.message.unwrap_or_default());
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.list_changed.fetch_add(1, Ordering::SeqCst);
    }

    #[allow(
        deprecated,
        reason = "the handler of the deprecated logging notification"
    )]
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.notices
            .lock()
            .unwrap()
            .push(params.data.as_str().unwrap_or_default().to_owned());
    }
}

pub(crate) type Client = RunningService<RoleClient, Watcher>;

pub(crate) fn binary() -> PathBuf {
    let p = artifacts().join("taskhost");
    assert!(
        p.exists(),
        "{} is missing: build the workspace first",
        p.display()
    );
    p
}

pub(crate) async fn stdio_client(args: &[&str], watcher: Watcher) -> Client {
    let mut cmd = tokio::process::Command::new(binary());
    cmd.arg("serve").args(args);
    command_client(cmd, watcher).await
}

/// A client of the host `cmd` starts, speaking MCP on its stdio. Unless `cmd` names one, the host's
/// default state directory is a fresh one that goes with the client (a test never writes the
/// user's).
pub(crate) async fn command_client(mut cmd: tokio::process::Command, watcher: Watcher) -> Client {
    cmd.env("RUST_LOG", "warn");
    let named = cmd
        .as_std()
        .get_envs()
        .any(|(k, v)| k == "XDG_STATE_HOME" && v.is_some());
    if !named {
        let state = scratch("client-state");
        cmd.env("XDG_STATE_HOME", state.path());
        watcher.kept.lock().unwrap().push(state);
    }
    let transport = TokioChildProcess::new(cmd).expect("spawn taskhost");
    watcher.serve(transport).await.expect("MCP handshake")
}

pub(crate) async fn socket_client(path: &Path, watcher: Watcher) -> Client {
    let stream = tokio::net::UnixStream::connect(path)
        .await
        .expect("connect");
    watcher.serve(stream).await.expect("MCP handshake")
}

pub(crate) async fn call(client: &Client, tool: &str, args: Value) -> String {
    try_call(client, tool, args).await.expect("call")
}

/// As [`call`], the call's failure (a host that restarted under it) returned, not a panic.
pub(crate) async fn try_call(client: &Client, tool: &str, args: Value) -> Result<String, String> {
    try_answer(client, tool, args).await.map(|a| a.text)
}

/// A tool's answer: its text blocks joined by `\n---\n`, and the task the call started, read
/// from the result's `_meta` (the text is the model's and is never parsed for it).
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) text: String,
    pub(crate) started: Option<String>,
}

/// Calls `tool` and returns its whole answer.
pub(crate) async fn answer(client: &Client, tool: &str, args: Value) -> Answer {
    try_answer(client, tool, args).await.expect("call")
}

/// As [`answer`], the call's failure returned, not a panic.
pub(crate) async fn try_answer(client: &Client, tool: &str, args: Value) -> Result<Answer, String> {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let result = client
        .peer()
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .map_err(|e| e.to_string())?;
    let text = result
        .content
        .iter()
        .filter_map(|b| b.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n---\n");
    let started = serde_json::to_value(&result)
        .ok()
        .and_then(|r| taskhost_tests::started_task(&r));
    Ok(Answer { text, started })
}

/// Reads a task's output, waiting up to `timeout_ms` for it to settle: the answer's first block
/// only, since notices of other tasks (or of this one) may ride along after it.
pub(crate) async fn read_waiting(client: &Client, id: &str, timeout_ms: u64) -> String {
    let answer = call(
        client,
        "task_output",
        json!({"task_id": id, "wait": true, "timeout_ms": timeout_ms}),
    )
    .await;
    match answer.split_once("\n---\n") {
        Some((output, _notices)) => output.to_owned(),
        None => answer,
    }
}

/// Starts `command` in the background and returns its task id (the first block; notices, its own
/// among them, may follow it).
pub(crate) async fn start(client: &Client, command: &str) -> String {
    let started = answer(
        client,
        "bash",
        json!({"command": command, "run_in_background": true}),
    )
    .await;
    started_id(&started)
}

/// The task a start's answer names in its `_meta`.
pub(crate) fn started_id(answer: &Answer) -> String {
    answer
        .started
        .clone()
        .unwrap_or_else(|| panic!("not started: {answer:?}"))
}

/// The pids a task prints, one per line, once it has printed `n` of them.
pub(crate) async fn printed_pids(client: &Client, id: &str, n: usize) -> Vec<i32> {
    let mut pids = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.len() < n && Instant::now() < deadline {
        let text = call(client, "task_output", json!({"task_id": id})).await;
        pids.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(pids.len(), n, "the task printed its pids: {pids:?}");
    pids
}

async fn plugins_resource(client: &Client) -> Value {
    let read = client
        .peer()
        .read_resource(ReadResourceRequestParams::new("taskhost://plugins"))
        .await
        .expect("resource");
    match &read.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => {
            serde_json::from_str(text).expect("json")
        }
        other => panic!("not text: {other:?}"),
    }
}

pub(crate) fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_stdio_a_background_command_is_started_polled_waited_listed_and_killed() {
    let client = stdio_client(&["--no-watch"], Watcher::default()).await;
    let info = client.peer_info().expect("server info");
    assert!(
        info.instructions
            .as_deref()
            .unwrap_or("")
            .contains("Track every background task id you start")
    );
    let tools = client.peer().list_all_tools().await.expect("tools");
    let mut names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "bash",
            "subagent",
            "task_input",
            "task_kill",
            "task_list",
            "task_output"
        ]
    );

    let id = start(&client, "echo one; sleep 0.3; echo two").await;
    let first = call(&client, "task_output", json!({"task_id": id})).await;
    assert!(first.ends_with("[status: running]"), "{first}");
    let rest = read_waiting(&client, &id, 10_000).await;
    assert!(
        rest.ends_with("[status: completed, exit code: 0]"),
        "{rest}"
    );
    // Either read may find nothing new, depending on how fast bash starts.
    let both = format!("{}{}", first.trim_end_matches("[status: running]"), rest);
    assert_eq!(
        both.replace("(no new output)\n", ""),
        "one\ntwo\n[status: completed, exit code: 0]"
    );
    let sleeper = start(&client, "sleep 60").await;
    assert_eq!(
        call(&client, "task_kill", json!({"task_id": sleeper})).await,
        format!("requested cancellation of task {sleeper}")
    );
    let list = call(&client, "task_list", json!({})).await;
    assert!(
        list.starts_with(&format!(
            "{id} [bash] completed — echo one; sleep 0.3; echo two\n{sleeper} [bash] "
        )),
        "{list}"
    );
    assert_eq!(
        call(&client, "no_such_tool", json!({})).await,
        "Error: unknown tool no_such_tool"
    );
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_tasks_plugin_a_background_start_hits_the_fence() {
    let bash = artifacts().join("libtaskhost_plugin_bash.so");
    let client = stdio_client(
        &["--no-watch", "--plugin", bash.to_str().unwrap()],
        Watcher::default(),
    )
    .await;
    assert_eq!(
        call(
            &client,
            "bash",
            json!({"command": "echo x", "run_in_background": true})
        )
        .await,
        "Error: background tasks unavailable: no control surface is attached (load the tasks plugin)"
    );
    assert_eq!(
        call(&client, "bash", json!({"command": "echo fg"})).await,
        "fg\n[exit code: 0]"
    );
    client.cancel().await.expect("close");
}

/// The private directory of the host `pid` started with `XDG_RUNTIME_DIR=runtime`.
pub(crate) fn host_dir(runtime: &Path, pid: i32) -> Option<PathBuf> {
    std::fs::read_dir(runtime.join("taskhost"))
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(&format!("host-{pid}.")))
        })
}

/// A host serving on a socket, killed when dropped.
pub(crate) struct SocketHost {
    pub(crate) child: std::process::Child,
    pub(crate) socket: PathBuf,
}

impl SocketHost {
    /// A host on `<dir>/taskhost.sock`, its private directory under `dir`.
    pub(crate) fn start(dir: &Path, extra: &[&str]) -> Self {
        Self::start_with(dir, &dir.join("taskhost.sock"), "077", extra)
    }

    /// A host on `socket`, started through `sh` so the umask is `umask`; its private directory under
    /// `dir`. Returns once the socket accepts connections.
    pub(crate) fn start_with(dir: &Path, socket: &Path, umask: &str, extra: &[&str]) -> Self {
        Self::start_after(dir, socket, &format!("umask {umask}"), extra)
    }

    /// A host on `socket`, exec'd by `sh` after the shell commands `setup`; its private directory
    /// under `dir`. Returns once the socket accepts connections.
    pub(crate) fn start_after(dir: &Path, socket: &Path, setup: &str, extra: &[&str]) -> Self {
        let child = Self::command_after(dir, socket, setup, extra)
            .spawn()
            .expect("spawn taskhost");
        let host = Self {
            child,
            socket: socket.to_owned(),
        };
        assert!(
            eventually(Duration::from_secs(20), || {
                std::os::unix::net::UnixStream::connect(socket).is_ok()
            }),
            "the host never listened on {}",
            socket.display()
        );
        host
    }

    /// The command [`SocketHost::start_after`] spawns: `serve --listen unix:SOCKET EXTRA...` after
    /// the shell commands `setup`, its files under `dir`.
    pub(crate) fn command_after(
        dir: &Path,
        socket: &Path,
        setup: &str,
        extra: &[&str],
    ) -> std::process::Command {
        let mut command = std::process::Command::new("sh");
        command
            .arg("-c")
            .arg(format!("{setup}; exec \"$0\" \"$@\""))
            .arg(binary())
            .args(["serve", "--listen"])
            .arg(format!("unix:{}", socket.display()))
            .args(extra)
            .env("RUST_LOG", "warn")
            // The generation and spill files, and the default state, go under the test's directory.
            .env("XDG_RUNTIME_DIR", dir)
            .env("XDG_STATE_HOME", dir.join("state-home"))
            .stdin(std::process::Stdio::null());
        command
    }

    /// Ends the host with SIGTERM and waits for it.
    pub(crate) fn stop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// Stops a host as a person would (SIGTERM: its tasks are cancelled and awaited), and kills it if
/// it has not stopped within 20 s: a SIGKILLed host's keeper would hold its running tasks for a
/// successor for the handover's grace.
pub(crate) fn stop_host(child: &mut std::process::Child) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let stopped = eventually(Duration::from_secs(20), || {
        matches!(child.try_wait(), Ok(Some(_)) | Err(_))
    });
    if !stopped {
        let _ = child.kill();
    }
    let _ = child.wait();
}

impl Drop for SocketHost {
    /// Stops the host ([`stop_host`]).
    fn drop(&mut self) {
        stop_host(&mut self.child);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_socket_sessions_are_isolated_and_a_disconnect_kills_its_tasks() {
    let dir = scratch("mcp-sessions");
    let host = SocketHost::start(&dir, &["--no-watch"]);
    let a = socket_client(&host.socket, Watcher::default()).await;
    let b = socket_client(&host.socket, Watcher::default()).await;
    let id = start(&a, "echo $$; sleep 1000").await;
    assert_eq!(
        call(&b, "task_output", json!({"task_id": id})).await,
        format!("Error: unknown task {id}")
    );
    assert_eq!(
        call(&b, "task_list", json!({})).await,
        "(no background tasks)"
    );
    let mut out = String::new();
    for _ in 0..100 {
        out.push_str(&call(&a, "task_output", json!({"task_id": id})).await);
        if out.contains('\n') && !out.starts_with("(no new output)") {
            break;
        }
        out.clear();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid: i32 = out.lines().next().unwrap().trim().parse().unwrap();
    assert!(alive(pid));
    a.cancel().await.expect("disconnect");
    assert!(
        eventually(Duration::from_secs(10), || !alive(pid)),
        "the session's process outlived it"
    );
    assert_eq!(
        call(&b, "task_list", json!({})).await,
        "(no background tasks)"
    );

    // The CLI against the same host.
    let cli = std::process::Command::new(binary())
        .args([
            "call",
            "--connect",
            &format!("unix:{}", host.socket.display()),
            "bash",
            r#"{"command":"echo via-cli"}"#,
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&cli.stdout),
        "via-cli\n[exit code: 0]\n"
    );
    let table = std::process::Command::new(binary())
        .args([
            "plugins",
            "--connect",
            &format!("unix:{}", host.socket.display()),
        ])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&table.stdout).into_owned();
    assert!(
        table.contains("bash") && table.contains("active"),
        "{table}"
    );
    b.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_rebuilt_while_a_task_runs_notifies_list_changed_and_the_task_output_is_complete()
{
    let dir = scratch("mcp-rebuild");
    let bash = dir.join("libtaskhost_plugin_bash.so");
    let tasks = dir.join("libtaskhost_plugin_tasks.so");
    for (from, to) in [
        ("taskhost_plugin_bash", &bash),
        ("taskhost_plugin_tasks", &tasks),
    ] {
        std::fs::copy(built(from), to).unwrap();
        set_mode(to, 0o755);
    }
    let host = SocketHost::start(
        &dir,
        &[
            "--plugin",
            tasks.to_str().unwrap(),
            "--plugin",
            bash.to_str().unwrap(),
        ],
    );
    let watcher = Watcher::default();
    let client = socket_client(&host.socket, watcher.clone()).await;
    let id = start(
        &client,
        "for i in $(seq 1 200); do echo line $i; sleep 0.005; done",
    )
    .await;

    // Rebuild the bash plugin the way cargo does: a new file, hardlinked over the old name.
    let staged = dir.join("deps-new.so");
    std::fs::write(&staged, rebuilt_bytes("taskhost_plugin_bash", 1)).unwrap();
    set_mode(&staged, 0o755);
    std::fs::remove_file(&bash).unwrap();
    std::fs::hard_link(&staged, &bash).unwrap();

    assert!(
        eventually(Duration::from_secs(10), || watcher
            .list_changed
            .load(Ordering::SeqCst)
            > 0),
        "no list_changed"
    );
    let table = plugins_resource(&client).await;
    let bash_gens: Vec<u64> = table["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "bash")
        .unwrap()["generations"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["state"] == "active")
        .map(|g| g["generation"].as_u64().unwrap())
        .collect();
    assert_eq!(bash_gens, [2]);
    let text = call(
        &client,
        "task_output",
        json!({"task_id": id, "wait": true, "timeout_ms": 20000}),
    )
    .await;
    assert!(
        text.ends_with("[status: completed, exit code: 0]"),
        "{text}"
    );
    let expected: String = (1..=200).map(|i| format!("line {i}\n")).collect();
    assert_eq!(
        text.trim_end_matches("[status: completed, exit code: 0]"),
        expected
    );
    client.cancel().await.expect("close");
}

/// Waits until the first logging notice arrived.
fn first_notice(watcher: &Watcher) {
    assert!(
        eventually(Duration::from_secs(10), || !watcher
            .notices
            .lock()
            .unwrap()
            .is_empty()),
        "no notice"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completion_notice_arrives_as_a_log_message_and_on_the_next_tool_result() {
    let watcher = Watcher::default();
    let client = stdio_client(&["--no-watch"], watcher.clone()).await;
    let started = answer(
        &client,
        "bash",
        json!({"command": "echo quick", "run_in_background": true}),
    )
    .await;
    let id = started_id(&started);
    let started = started.text;
    first_notice(&watcher);
    let expected = format!(
        "background task {id} (bash: echo quick) finished [status: completed, exit code: 0]. Read its output with task_output."
    );
    assert_eq!(
        *watcher.notices.lock().unwrap(),
        std::slice::from_ref(&expected)
    );
    let next = call(&client, "task_list", json!({})).await;
    let listed = format!("{id} [bash] completed — echo quick");
    // Under load the task can settle before its start is answered: the notice then rides on that
    // answer, the next result's place.
    if started.contains("\n---\n") {
        assert_eq!(
            started,
            format!("started background task {id}\n---\n{expected}")
        );
        assert_eq!(next, listed);
    } else {
        assert_eq!(next, format!("{listed}\n---\n{expected}"));
    }
    let after = call(&client, "task_list", json!({})).await;
    assert!(
        !after.contains("---"),
        "the extra block is shown once: {after}"
    );
    client.cancel().await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_of_a_task_read_before_the_next_result_is_not_repeated_on_it() {
    let watcher = Watcher::default();
    let client = stdio_client(&["--no-watch"], watcher.clone()).await;
    let id = start(&client, "echo quick").await;
    first_notice(&watcher);
    let read = call(&client, "task_output", json!({"task_id": id})).await;
    assert_eq!(
        read, "quick\n[status: completed, exit code: 0]",
        "the read that reports the task carries no notice of it"
    );
    let next = call(&client, "task_list", json!({})).await;
    assert!(!next.contains("---"), "nor does a later result: {next}");
    client.cancel().await.expect("close");
}

#[test]
fn a_bad_config_exits_with_code_two_naming_the_key() {
    let dir = scratch("bad-config");
    for (text, key) in [
        (
            "[tasks]\nmax_concurrent_tasks_per_owner = 0\n",
            "max_concurrent_tasks_per_owner",
        ),
        (
            "[tasks]\nmax_concurrent_tasks_per_owner = -1\n",
            "max_concurrent_tasks_per_owner",
        ),
        ("[tasks]\nbogus = 1\n", "bogus"),
        ("[[plugin]]\nconfig = {}\n", "path"),
        ("[env]\ninherit = \"some\"\n", "inherit"),
        ("[env]\nexclude = [1]\n", "exclude"),
        ("[env]\nunknown = true\n", "unknown"),
    ] {
        let file = dir.join("taskhost.toml");
        std::fs::write(&file, text).unwrap();
        let out = std::process::Command::new(binary())
            .args(["serve", "--no-watch", "--config", file.to_str().unwrap()])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {stderr}");
        assert!(
            stderr.contains(key) && stderr.contains("taskhost.toml"),
            "{text}: {stderr}"
        );
    }
    let out = std::process::Command::new(binary())
        .args(["serve", "--no-watch", "--allow-uid", "abc"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--allow-uid"), "{stderr}");
}

/// Proves: SIGTERM to the host ends every child, the daemons they started included (one of them
/// with its environment cleared, so nothing marks it as a task's), and leaves nothing behind: no
/// socket, no generation or spill files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_ended_by_sigterm_ends_its_children_and_leaves_nothing_behind() {
    let dir = scratch("sigterm");
    // Memory-only records: the spill files this test follows are the runtime directory's.
    let mut host = SocketHost::start(&dir, &["--no-watch", "--no-state"]);
    let client = socket_client(&host.socket, Watcher::default()).await;
    let id = start(
        &client,
        "setsid sleep 1000 & echo $!; setsid env -i /bin/sleep 1000 & echo $!; echo $$; sleep 0.5; \
         head -c 100000 /dev/zero; sleep 1000",
    )
    .await;
    let mut pids: Vec<i32> = Vec::new();
    for _ in 0..200 {
        let text = call(&client, "task_output", json!({"task_id": id})).await;
        pids.extend(text.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
        if pids.len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let [daemon, bare_daemon, pid] = pids[..] else {
        panic!("the task printed its pids: {pids:?}")
    };
    let host_pid = host.child.id() as i32;
    let own_dir = host_dir(&dir, host_pid).expect("the host made its private directory");
    assert!(
        eventually(Duration::from_secs(5), || {
            std::fs::read_dir(own_dir.join("spill")).is_ok_and(|mut d| d.next().is_some())
        }),
        "the 100 kB of output spilled beside the generations"
    );
    assert!(
        std::process::Command::new("kill")
            .args(["-TERM", &host_pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let exited = eventually(Duration::from_secs(15), || {
        matches!(host.child.try_wait(), Ok(Some(_)))
    });
    assert!(exited, "the host did not exit on SIGTERM");
    assert!(!alive(pid), "the child outlived the host");
    assert!(
        eventually(Duration::from_secs(5), || !alive(daemon)),
        "the daemon outlived the host"
    );
    assert!(
        eventually(Duration::from_secs(5), || !alive(bare_daemon)),
        "the daemon without an environment outlived the host"
    );
    assert!(!host.socket.exists(), "the socket was left behind");
    assert!(
        !own_dir.exists(),
        "generation or spill files were left behind"
    );
    drop(client);
}

/// Proves: a plugin's log record reaches the host's log (stderr, plain text on a pipe) with the
/// plugin's name and generation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_log_record_reaches_the_host_log_with_its_plugin_and_generation() {
    use tokio::io::AsyncReadExt;
    let state = scratch("log-state");
    let mut cmd = tokio::process::Command::new(binary());
    cmd.args(["serve", "--no-watch", "--plugin"])
        .arg(built("taskhost_test_probe"))
        .env("XDG_STATE_HOME", state.path())
        .env("RUST_LOG", "warn");
    let (transport, stderr) = TokioChildProcess::builder(cmd)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn taskhost");
    let client = Watcher::default()
        .serve(transport)
        .await
        .expect("MCP handshake");
    assert_eq!(
        call(&client, "probe_log", json!({"message": "probe says hello"})).await,
        "logged"
    );
    client.cancel().await.expect("close");
    let mut log = String::new();
    stderr
        .expect("stderr piped")
        .read_to_string(&mut log)
        .await
        .expect("read stderr");
    let line = log
        .lines()
        .find(|l| l.contains("probe says hello"))
        .unwrap_or_else(|| panic!("no record in {log:?}"));
    assert!(
        line.contains("WARN") && line.contains("plugin=probe") && line.contains("generation=1"),
        "{line}"
    );
    assert!(!line.contains('\x1b'), "colour codes on a pipe: {line:?}");
}

/// The open flags of descriptor `fd` of process `pid`, from its `fdinfo`.
fn fd_flags(pid: u32, fd: &str) -> u32 {
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}")).expect("fdinfo");
    let flags = info
        .lines()
        .find_map(|l| l.strip_prefix("flags:"))
        .expect("flags line");
    u32::from_str_radix(flags.trim(), 8).expect("octal flags")
}

/// The other descriptors of process `pid` open on the same pipe as its descriptor `fd`.
fn same_pipe(pid: u32, fd: &str) -> Vec<String> {
    let target = |n: &str| std::fs::read_link(format!("/proc/{pid}/fd/{n}")).ok();
    let pipe = target(fd).expect("fd link");
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd dir")
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != fd && target(n).as_ref() == Some(&pipe))
        .collect()
}

/// Asserts that process `pid` reads its stdin pipe and writes its stdout pipe on descriptions of
/// its own, non-blocking (on the reactor), and left its descriptors 0 and 1 (which a parent or a
/// child may share) as it was given them.
pub(crate) fn assert_pipes_served_without_blocking(pid: u32) {
    for fd in ["0", "1"] {
        let private = same_pipe(pid, fd);
        assert!(
            private.iter().any(|n| fd_flags(pid, n) & O_NONBLOCK != 0),
            "no non-blocking descriptor on the pipe of fd {fd}: {private:?}"
        );
    }
    assert_stdio_left_blocking(pid);
}

const O_NONBLOCK: u32 = 0o4000;

/// Asserts that process `pid` left its descriptors 0 and 1 (which a parent or a child may share)
/// blocking, as it was given them.
fn assert_stdio_left_blocking(pid: u32) {
    for fd in ["0", "1"] {
        assert_eq!(
            fd_flags(pid, fd) & O_NONBLOCK,
            0,
            "fd {fd} made non-blocking"
        );
    }
}

/// True when a thread of process `pid` waits in `read(2)` on its stdin.
fn a_thread_reads_stdin(pid: u32) -> bool {
    #[cfg(target_arch = "aarch64")]
    const READ: &str = "63";
    #[cfg(not(target_arch = "aarch64"))]
    const READ: &str = "0";
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("tasks")
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("syscall")).ok())
        .any(|s| {
            let mut fields = s.split_whitespace();
            fields.next() == Some(READ) && fields.next() == Some("0x0")
        })
}

/// Speaks MCP with a stdio host or bridge over raw lines: `initialize` answered, then a
/// `tools/call` of `task_list` answered.
fn talks_mcp(to_host: &mut impl std::io::Write, from_host: &mut impl std::io::BufRead) {
    let mut ask = |lines: &str| {
        writeln!(to_host, "{lines}").expect("write");
        let mut answer = String::new();
        from_host.read_line(&mut answer).expect("read");
        answer
    };
    let answer = ask(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert!(answer.contains(r#""id":1"#), "{answer}");
    let answer = ask(concat!(
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        "\n",
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"task_list","arguments":{}}}"#,
    ));
    assert!(answer.contains("(no background tasks)"), "{answer}");
}

/// Runs `cmd` (a stdio host or a bridge) on two socketpairs, as Node's clients launch a server,
/// and asserts that it answers there with no thread waiting in `read(2)` on its stdin and its fds 0
/// and 1 left blocking; then closes its input and expects a clean exit.
pub(crate) fn serves_socketpairs_without_blocking(mut cmd: std::process::Command) {
    use std::os::unix::net::UnixStream;
    let (mut to_host, host_in) = UnixStream::pair().expect("pair");
    let (from_host, host_out) = UnixStream::pair().expect("pair");
    let mut host = cmd
        .env("RUST_LOG", "warn")
        .stdin(std::os::fd::OwnedFd::from(host_in))
        .stdout(std::os::fd::OwnedFd::from(host_out))
        .spawn()
        .expect("spawn");
    talks_mcp(&mut to_host, &mut std::io::BufReader::new(from_host));
    let pid = host.id();
    assert!(
        !a_thread_reads_stdin(pid),
        "a thread waits in read(2) on stdin"
    );
    assert_stdio_left_blocking(pid);
    drop(to_host);
    let status = host.wait().expect("wait");
    assert!(status.success(), "{status}");
}

#[test]
fn a_stdio_host_on_sockets_reads_them_without_a_waiting_thread_and_leaves_them_blocking() {
    let state = scratch("stdio-sockets");
    let mut cmd = std::process::Command::new(binary());
    cmd.args(["serve", "--no-watch"])
        .env("XDG_STATE_HOME", state.path());
    serves_socketpairs_without_blocking(cmd);
}

#[test]
fn a_stdio_host_reads_its_pipes_without_blocking_and_leaves_its_own_streams_blocking() {
    let state = scratch("stdio-pipes");
    let mut host = std::process::Command::new(binary())
        .args(["serve", "--no-watch"])
        .env("XDG_STATE_HOME", state.path())
        .env("RUST_LOG", "warn")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn taskhost");
    let (mut to_host, from_host) = (host.stdin.take().unwrap(), host.stdout.take().unwrap());
    talks_mcp(&mut to_host, &mut std::io::BufReader::new(from_host));
    assert_pipes_served_without_blocking(host.id());
    drop(to_host);
    let status = host.wait().expect("wait");
    assert!(status.success(), "{status}");
}
