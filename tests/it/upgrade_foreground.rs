//! A foreground command in flight when its host goes on as a background task of its
//! caller's: at an upgrade (`SIGHUP`) the call answers at once, naming the task, and the task is
//! carried to the new image; at a crash (SIGKILL) the keeper holds it for the next host, which
//! makes it the task, and the caller's bridge answers the call with an error naming it.

use std::time::Duration;

use serde_json::json;

use crate::clients::bridged;
use crate::fixtures::*;
use crate::handover::{replace_binary, running_inode, state_host, upgradable_host};
use crate::mcp::{SocketHost, Watcher, alive, call, read_waiting, try_call};

/// A command that says `before`, writes its pid to `started`, waits for `release` to exist, then
/// says `after`.
fn held_command(started: &std::path::Path, release: &std::path::Path) -> String {
    format!(
        "echo before; echo $$ > {started}; while [ ! -e {release} ]; do sleep 0.05; done; echo after",
        started = started.display(),
        release = release.display()
    )
}

/// The pid `started` holds, once the command wrote it.
fn started_pid(started: &std::path::Path) -> i32 {
    assert!(
        eventually(Duration::from_secs(20), || std::fs::read_to_string(started)
            .is_ok_and(|p| p.ends_with('\n'))),
        "the command started"
    );
    std::fs::read_to_string(started)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// The task an answer says the command continues as.
fn continued_task(answer: &str) -> String {
    answer
        .split("continues as background task ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("the answer names the task: {answer}"))
        .to_owned()
}

/// SIGKILLs `host` and starts the next one on the same socket and state.
fn crash(host: &mut SocketHost, dir: &std::path::Path) -> SocketHost {
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    state_host(dir)
}

/// A socket host on a state directory, a client bridged to it, and the held command's files.
struct Crashable {
    dir: Scratch,
    host: SocketHost,
    client: crate::mcp::Client,
    started: std::path::PathBuf,
    release: std::path::PathBuf,
}

impl Crashable {
    async fn start(name: &str) -> Self {
        let dir = scratch(name);
        let host = state_host(&dir);
        let (client, _) = bridged(&host.socket, Watcher::default(), &[]).await;
        let (started, release) = (dir.join("started"), dir.join("release"));
        Self {
            dir,
            host,
            client,
            started,
            release,
        }
    }

    fn command(&self) -> String {
        held_command(&self.started, &self.release)
    }

    /// Calls `bash` with `command` (one that writes `started`) in the foreground and crashes the
    /// host once it started, starting the next: the call's answer, the command's pid, the next
    /// host.
    async fn call_through_a_crash(
        &mut self,
        command: &str,
    ) -> (Result<String, String>, i32, SocketHost) {
        let Self {
            dir,
            host,
            client,
            started,
            ..
        } = self;
        let calling = try_call(
            client,
            "bash",
            json!({"command": command, "timeout_ms": 300000}),
        );
        let crashing = async {
            let pid = started_pid(started);
            (pid, crash(host, dir))
        };
        let (answer, (pid, next)) = tokio::join!(calling, crashing);
        (answer, pid, next)
    }

    /// Lets task `id` (the command) run to its end under the next host: its output from `first`,
    /// exit 0.
    async fn released_to_its_end(&self, id: &str, first: &str) {
        let list = call(&self.client, "task_list", json!({})).await;
        assert!(list.contains(&format!("{id} [bash] running")), "{list}");
        std::fs::write(&self.release, "").unwrap();
        let read = read_waiting(&self.client, id, 30_000).await;
        assert!(
            read.starts_with(first) && read.contains("after\n"),
            "its output from {first:?} on is the task's: {read}"
        );
        assert!(read.contains("exit code: 0"), "{read}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_command_in_flight_at_a_crash_continues_as_a_task_the_error_names() {
    let mut c = Crashable::start("crash-foreground").await;
    let command = c.command();
    let called = now_ms();
    let (answer, pid, _next) = c.call_through_a_crash(&command).await;
    let error = answer.expect_err("the call of a crashed host answers an error");
    assert!(error.contains("restarted"), "{error}");
    let id = continued_task(&error);
    // It shows as started when the command did (before it wrote its pid), not at the next host.
    let wrote = std::fs::metadata(&c.started).unwrap().modified().unwrap();
    let wrote = u64::try_from(
        wrote
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    );
    let started = crate::state::records(&c.dir.join("state"))[&id]["started_at_ms"].as_u64();
    let started = started.expect("a start");
    assert!(
        started + 20 >= called && started <= wrote.unwrap() + 20,
        "started at {started}: called at {called}, the command wrote its pid at {wrote:?}"
    );
    assert!(alive(pid), "the same process runs on under the next host");
    c.released_to_its_end(&id, "before\n").await;
    c.client.cancel().await.ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_command_in_flight_at_an_upgrade_continues_as_a_background_task() {
    let dir = scratch("upgrade-foreground");
    let (host, exe) = upgradable_host(&dir);
    let host_pid = host.child.id();
    let (a, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let (started, release) = (dir.join("started"), dir.join("release"));
    let command = held_command(&started, &release);
    let calling = call(
        &a,
        "bash",
        json!({"command": command, "timeout_ms": 300000}),
    );
    let upgrading = async {
        started_pid(&started);
        let new_inode = replace_binary(&exe);
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(host_pid as i32),
            nix::sys::signal::Signal::SIGHUP,
        )
        .unwrap();
        new_inode
    };
    let (answer, new_inode) = tokio::join!(calling, upgrading);
    assert!(answer.starts_with("before\n"), "{answer}");
    let id = continued_task(&answer);
    let pid = started_pid(&started);
    assert!(
        eventually(Duration::from_secs(20), || running_inode(host_pid)
            == Some(new_inode)),
        "the same process runs the new binary"
    );
    assert!(alive(pid), "the command runs on under the new image");
    std::fs::write(&release, "").unwrap();
    let read = read_waiting(&a, &id, 30_000).await;
    assert!(
        read.contains("after\n"),
        "the rest of its output is the task's: {read}"
    );
    assert!(read.contains("exit code: 0"), "{read}");
    drop(host);
    a.cancel().await.ok();
}

/// The hold travels with the start: a command whose first act has its host SIGKILLed (before
/// the host could have said anything more to its keeper) is still carried to the next host; and
/// again under that host, whose keeper it adopted (the keeper said its protocol at the handover).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_that_kills_its_host_as_it_starts_is_carried_to_the_next_host() {
    let mut c = Crashable::start("crash-at-start").await;
    for round in 1..=2 {
        c.started = c.dir.join(format!("started-{round}"));
        c.release = c.dir.join(format!("release-{round}"));
        let fifo = c.dir.join(format!("kill-host-{round}"));
        kill_on_write(&fifo, c.host.child.id() as i32);
        let command = format!("echo > {}; {}", fifo.display(), c.command());
        let (answer, pid, next) = c.call_through_a_crash(&command).await;
        let error = answer.expect_err("the call of a crashed host answers an error");
        let id = continued_task(&error);
        assert!(
            alive(pid),
            "round {round}: the same process runs on under the next host"
        );
        c.host = next;
        c.released_to_its_end(&id, "before\n").await;
    }
    c.client.cancel().await.ok();
}

/// A foreground command held for a crash under its call's name, then promoted at its timeout: the
/// keeper renames it, so the next host after a crash serves it as the same task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_promoted_at_its_timeout_is_the_same_task_after_a_crash() {
    let mut c = Crashable::start("crash-promoted").await;
    let answer = crate::mcp::answer(
        &c.client,
        "bash",
        json!({"command": c.command(), "timeout_ms": 200}),
    )
    .await;
    let id = continued_task(&answer.text);
    assert_eq!(
        answer.started.as_ref(),
        Some(&id),
        "the result's _meta names it"
    );
    let pid = started_pid(&c.started);
    let _next = crash(&mut c.host, &c.dir);
    assert!(alive(pid), "the same process runs on under the next host");
    c.released_to_its_end(&id, "after\n").await;
    c.client.cancel().await.ok();
}

/// Milliseconds since the epoch.
fn now_ms() -> u64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    u64::try_from(since.unwrap().as_millis()).unwrap()
}

/// Proves (issue 41, item 6): a foreground command carried past its timeout as a background task
/// shows as started when its command started, not when it became a task: its record's start is
/// within the call, well before its timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_command_carried_past_its_timeout_shows_its_commands_start() {
    let dir = scratch("foreground-start");
    let host = state_host(&dir);
    let (client, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let timeout_ms = 3000;
    let called = now_ms();
    let answer = call(
        &client,
        "bash",
        json!({"command": "sleep 60", "timeout_ms": timeout_ms}),
    )
    .await;
    let id = continued_task(&answer);
    let records = crate::state::records(&dir.join("state"));
    let started = records[&id]["started_at_ms"].as_u64().expect("a start");
    assert!(
        started >= called && started < called + timeout_ms / 2,
        "started at {started}: the call began at {called}, its timeout passed at {}",
        called + timeout_ms
    );
    let killed = call(&client, "task_kill", json!({"task_id": id})).await;
    assert!(!killed.starts_with("Error"), "{killed}");
    client.cancel().await.ok();
    drop(host);
}
