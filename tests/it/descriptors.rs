//! What a live task costs the host in descriptors with a state directory (issue 41, item 6): its
//! two output pipes' read ends, nothing for its kept files (open only while a batch is written),
//! counted in `/proc/PID/fd` of the real binary; and, by hand, 10,000 live tasks with a state under
//! a 20,000-descriptor limit.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use crate::fixtures::*;
use crate::mcp::{self, SocketHost, Watcher, call};

/// How many descriptors process `pid` has open.
fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// The descriptors the host's children (the keeper) have open, for the record.
fn children_fds(pid: u32) -> Vec<(String, usize)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .filter_map(Result::ok)
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| c.split_whitespace().map(str::to_owned).collect::<Vec<_>>())
        .filter_map(|child| {
            let n: u32 = child.parse().ok()?;
            let cmd = std::fs::read_to_string(format!("/proc/{n}/cmdline")).ok()?;
            let cmd = cmd.replace('\0', " ");
            (!cmd.contains("sleep") && !cmd.starts_with("bash")).then(|| (cmd, open_fds(n)))
        })
        .collect()
}

/// A socket host on a state directory that lets one session have `tasks` live tasks, started
/// after the shell commands `setup` (a `ulimit`).
fn state_host(dir: &Path, tasks: usize, setup: &str) -> SocketHost {
    let config = dir.join("tasks.toml");
    std::fs::write(
        &config,
        format!("[tasks]\nmax_concurrent_tasks_per_owner = {}\n", tasks + 10),
    )
    .unwrap();
    let state = dir.join("state").display().to_string();
    let config = config.display().to_string();
    let args = ["--no-watch", "--state", &state, "--config", &config];
    SocketHost::start_after(dir, &dir.join("taskhost.sock"), setup, &args)
}

/// Starts `n` tasks that each print `ready N` then sleep; their ids, and the starts refused.
async fn start_ready(client: &mcp::Client, n: usize) -> (Vec<String>, Vec<String>) {
    let (mut ids, mut refused) = (Vec::new(), Vec::new());
    for i in 0..n {
        let command = format!("echo ready {i}; exec sleep 600");
        let args = json!({"command": command, "run_in_background": true});
        let answer = mcp::answer(client, "bash", args).await;
        match answer.started {
            Some(id) => ids.push(id),
            None => refused.push(answer.text),
        }
    }
    (ids, refused)
}

/// Reads every task in `ids` (waiting for its line where it has not come yet): the tasks whose
/// output is not `ready N` of its own start and running.
async fn not_ready(client: &mcp::Client, ids: &[String]) -> Vec<String> {
    let mut bad = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        let args = json!({"task_id": id, "wait": true, "wait_for": "ready", "timeout_ms": 20000});
        let read = call(client, "task_output", args).await;
        if read != format!("ready {i}\n[status: running]") {
            bad.push(format!("{id}: {read}"));
        }
    }
    bad
}

/// One `ready N` line (a task's stdout); its stderr is empty.
fn is_ready_line(bytes: &[u8]) -> bool {
    bytes.starts_with(b"ready ") && bytes.ends_with(b"\n")
}

/// The kept files in the state's output directory that do not hold exactly one `ready` line.
fn kept_not_exact(state: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(state.join("output")) else {
        return usize::MAX;
    };
    entries
        .filter_map(Result::ok)
        .map(|e| std::fs::read(e.path()).unwrap_or_default())
        .filter(|bytes| !(bytes.is_empty() || is_ready_line(bytes)))
        .count()
}

/// Proves (issue 41, item 6): with a state directory, a live task holds two of the host's
/// descriptors (its output pipes), not four: its kept files are closed between writes, and still
/// hold its output byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_state_a_live_task_holds_two_of_the_hosts_descriptors() {
    const TASKS: usize = 40;
    let dir = scratch("fds-per-task");
    let mut host = state_host(&dir, TASKS, "true");
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    // One task first, so what the host makes once (the database, its threads) is there before.
    let (first, _) = start_ready(&client, 1).await;
    assert!(not_ready(&client, &first).await.is_empty());
    let before = open_fds(host.child.id());
    let (ids, refused) = start_ready(&client, TASKS).await;
    assert!(refused.is_empty(), "{refused:?}");
    let bad = not_ready(&client, &ids).await;
    assert!(bad.is_empty(), "{bad:?}");
    let after = open_fds(host.child.id());
    let per_task = (after.saturating_sub(before)) as f64 / TASKS as f64;
    assert!(
        per_task <= 2.0,
        "{per_task} descriptors per live task ({before} before, {after} with {TASKS} tasks)"
    );
    assert_eq!(kept_not_exact(&dir.join("state")), 0);
    client.cancel().await.ok();
    host.stop();
}

/// By hand (`cargo test -p taskhost-tests --test it -- --ignored descriptors:: --nocapture`, about
/// a minute in release, longer here): 10,000 live tasks (`TASKHOST_LIVE_TASKS` to change it) on a
/// host with a state directory under `ulimit -n 20000`, the scale bench's set-up through the real
/// binary. Prints the starts refused, the host's descriptors per live task, and checks that every
/// started task is alive and readable, its kept file exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "10,000 processes: run by hand"]
async fn ten_thousand_live_tasks_with_a_state_under_a_20000_descriptor_limit() {
    let tasks: usize = std::env::var("TASKHOST_LIVE_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let dir = scratch("fds-10k");
    let mut host = state_host(&dir, tasks, "ulimit -n 20000");
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let before = open_fds(host.child.id());
    let t = Instant::now();
    let (ids, refused) = start_ready(&client, tasks).await;
    let started_in = t.elapsed();
    let after = open_fds(host.child.id());
    let bad = not_ready(&client, &ids).await;
    let per_task = (after.saturating_sub(before)) as f64 / ids.len().max(1) as f64;
    eprintln!(
        "the host's other processes' descriptors: {:?}",
        children_fds(host.child.id())
    );
    eprintln!(
        "{} of {tasks} started in {:.1} s ({} refused, first: {:?}); host descriptors {before} -> {after}, {per_task:.2} per live task; {} not alive and readable; read all in {:.1} s",
        ids.len(),
        started_in.as_secs_f64(),
        refused.len(),
        refused.first(),
        bad.len(),
        (t.elapsed() - started_in).as_secs_f64()
    );
    assert!(bad.is_empty(), "{:?}", &bad[..bad.len().min(5)]);
    assert_eq!(kept_not_exact(&dir.join("state")), 0);
    assert!(per_task <= 2.0, "{per_task}");
    client.cancel().await.ok();
    host.stop();
}
