//! Fault injection: each test names the fault and what the host proves under it. Plugin faults use
//! the probe fixture; process faults use the real bash plugin; host-level faults the real binary.

use std::time::{Duration, Instant};

use serde_json::json;
use taskhost_registry::{RegistryConfig, TaskStatus};

use crate::bash;
use crate::fixtures::*;
use crate::mcp;

/// A host whose teardown waits 200 ms for a cancelled task, with the probe and the test surface.
fn probe_host(name: &str) -> Fixture {
    let config = RegistryConfig::new()
        .with_teardown_grace(Duration::from_millis(200))
        .unwrap();
    let f = Fixture::with_config(name, config);
    f.load("taskhost_test_probe", &format!("probe_{name}"));
    f.load("taskhost_test_surface", &format!("surface_{name}"));
    f.host.sessions().open("s");
    f
}

/// Proves: a producer thread that panics mid-task cannot leave its task running forever or take the
/// host down; the task fails with a detail saying the producer never settled it, its output so far
/// is kept, and the plugin keeps serving.
#[test]
fn a_worker_that_panics_mid_task_fails_its_task_and_the_plugin_keeps_serving() {
    let f = probe_host("worker-panic");
    let id = f.start_probe(
        "s",
        json!({"lines": 50, "interval_ms": 1, "panic_after": 5}),
    );
    let (output, status) = f.drain("s", &id);
    assert_eq!(
        status,
        "[status: failed, producer dropped the task's completion without settling it]"
    );
    assert_eq!(output, probe_lines(5));
    let next = f.start_probe("s", json!({"lines": 2}));
    assert_eq!(f.drain("s", &next).1, "[status: completed, exit code: 0]");
}

/// Proves: a task whose cancel is accepted but which never stops does not hold a closing session
/// hostage; the close finishes after the teardown grace and the record says work may be orphaned.
/// The generation running the task stays loaded while its code still runs.
#[test]
fn a_task_that_never_settles_is_force_failed_when_its_session_closes() {
    let f = probe_host("never-settles");
    let (_l, rx) = outcomes(&f);
    let id = f.start_probe(
        "s",
        json!({"lines": 300, "interval_ms": 5, "cancel": "hang"}),
    );
    assert_eq!(
        f.call("s_kill", "s", json!({"task_id": id})),
        format!("requested cancellation of task {id}")
    );
    let started = Instant::now();
    f.rt.block_on(f.host.close_session("s"));
    let closed_in = started.elapsed();
    let (status, detail) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(status, TaskStatus::Failed);
    assert_eq!(
        detail.as_deref(),
        Some("did not stop within 200 ms of cancel; work may be orphaned")
    );
    assert!(
        closed_in < Duration::from_millis(1500),
        "the close waited {closed_in:?} for a task that never stops (grace 200 ms, the task runs 1.5 s)"
    );
    assert!(!mapped_generations("probe_never-settles").is_empty());
}

/// Proves: a cancel that fails during a session's teardown force-fails the task with the plugin's
/// error instead of hanging the close or losing the record's outcome.
#[test]
fn a_cancel_that_fails_during_teardown_force_fails_the_task_with_the_error() {
    let f = probe_host("cancel-fails");
    let (_l, rx) = outcomes(&f);
    let id = f.start_probe(
        "s",
        json!({"lines": 100, "interval_ms": 5, "cancel": "fail"}),
    );
    assert_eq!(
        f.call("s_kill", "s", json!({"task_id": id})),
        "Error: probe cancel refused"
    );
    f.rt.block_on(f.host.close_session("s"));
    let (status, detail) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(status, TaskStatus::Failed);
    assert_eq!(
        detail.as_deref(),
        Some("cancel threw during teardown; work may be orphaned: probe cancel refused")
    );
}

/// Runs `f` on a thread of its own and gives up after `timeout`, so a deadlock fails the test
/// instead of hanging it.
fn within<T: Send + 'static>(timeout: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(timeout)
        .unwrap_or_else(|_| panic!("no answer within {timeout:?}: deadlocked"))
}

/// Proves: a producer hook that calls back into the host for its own task (a cancel that kills it,
/// a reader that reads it, here also at settlement) is refused at once with an error naming the
/// task, where it used to wait forever on the task's own lock; the kill, the reads and the
/// settlement go through, and other tasks stay usable.
#[test]
fn a_hook_that_kills_or_reads_its_own_task_is_refused_instead_of_deadlocking() {
    let f = std::sync::Arc::new(probe_host("reenter"));
    let id = f.start_probe(
        "s",
        json!({"lines": 1000, "interval_ms": 5, "cancel": "reenter"}),
    );
    let refusal = format!("task {id} cannot be killed or read from its own cancel or reader");
    let (g, task) = (f.clone(), id.clone());
    let kill = within(Duration::from_secs(10), move || {
        g.call("s_kill", "s", json!({"task_id": task}))
    });
    assert_eq!(kill, format!("requested cancellation of task {id}"));
    let (g, task) = (f.clone(), id.clone());
    let (output, status) = within(Duration::from_secs(20), move || g.drain("s", &task));
    assert_eq!(status, "[status: killed, signal: SIGTERM]");
    assert!(
        output.contains(&format!("kill of itself: {refusal}\n")),
        "{output}"
    );
    assert!(
        output.contains(&format!("read of itself: {refusal}\n")),
        "{output}"
    );
    let next = f.start_probe("s", json!({"lines": 2}));
    assert_eq!(f.drain("s", &next).1, "[status: completed, exit code: 0]");
}

/// The pids a task printed, one per line, once it has printed `n` of them.
fn printed_pids(f: &Fixture, id: &str, n: usize) -> Vec<i32> {
    let mut text = String::new();
    assert!(eventually(Duration::from_secs(5), || {
        text.push_str(bash::new_output(&f.call(
            "task_output",
            "s",
            json!({"task_id": id}),
        )));
        text.lines().count() >= n
    }));
    text.lines()
        .map(|l| l.trim().parse().expect("a pid"))
        .collect()
}

fn gone(pid: i32) -> bool {
    !std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// A command that starts two daemons outside its process group and prints their pids: `setsid
/// sleep`, and a `setsid sh` that has a child of its own.
const DAEMONS: &str =
    "setsid sleep 300 & echo $!; setsid sh -c 'sleep 300 & echo $!; sleep 300' & echo $!";

/// Proves: a daemon that leaves its task's process group (`setsid`, with children of its own) is
/// ended and reaped by the time the task reads as settled; nothing of it is left, not even a zombie.
/// The daemons hold the task's output pipe, yet the task settles without waiting out the grace.
#[test]
fn daemons_forked_by_a_command_are_ended_and_reaped_when_it_completes() {
    let f = bash::host("daemon", r#"{"grace_ms": 5000}"#);
    let id = bash::start(&f, "s", &format!("{DAEMONS}; sleep 0.3"));
    let pids = printed_pids(&f, &id, 3);
    assert!(
        pids.iter().all(|&p| bash::alive(p)),
        "daemons not running: {pids:?}"
    );
    let started = Instant::now();
    let done = bash::wait(&f, "s", &id);
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the task waited out the 5 s grace for daemons holding its pipe"
    );
    assert!(
        done.ends_with("[status: completed, exit code: 0]"),
        "{done}"
    );
    let left: Vec<i32> = pids.iter().copied().filter(|&p| !gone(p)).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert_eq!(f.host.processes().adopted(), 0);
}

/// Proves: killing a task ends the daemons it started too, and a live task's daemons are left alone.
#[test]
fn daemons_of_a_killed_task_are_ended_with_it_and_a_running_tasks_are_not() {
    let f = bash::host("daemon-kill", r#"{"grace_ms": 300}"#);
    let killed = bash::start(&f, "s", &format!("{DAEMONS}; sleep 300"));
    let running = bash::start(&f, "s", "setsid sleep 300 & echo $!; sleep 300");
    let pids = printed_pids(&f, &killed, 3);
    let other = printed_pids(&f, &running, 1)[0];
    f.call("task_kill", "s", json!({"task_id": killed}));
    let done = bash::wait(&f, "s", &killed);
    assert!(
        done.ends_with("[status: killed, signal: SIGTERM]"),
        "{done}"
    );
    let left: Vec<i32> = pids.iter().copied().filter(|&p| !gone(p)).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(bash::alive(other), "a running task's daemon was ended");
    f.call("task_kill", "s", json!({"task_id": running}));
    bash::wait(&f, "s", &running);
    assert!(gone(other));
}

/// The pid of the host behind `client`: the parent of a command it runs.
pub(crate) async fn host_pid(client: &mcp::Client) -> i32 {
    let text = mcp::call(client, "bash", json!({"command": "echo $PPID"})).await;
    let keeper = text
        .lines()
        .next()
        .unwrap_or_default()
        .parse()
        .expect("a pid");
    parent_of(keeper)
}

/// A status field of `/proc/<pid>/status` in KiB (`VmHWM`, `VmRSS`).
pub(crate) fn status_kib(pid: i32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("field")
}

/// Bytes in the files of `dir`.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |d| {
        d.flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum()
    })
}

fn config_with_spill_dir(dir: &std::path::Path, spill: &std::path::Path) -> std::path::PathBuf {
    let config = dir.join("taskhost.toml");
    std::fs::write(
        &config,
        format!("[tasks]\nspill_dir = {:?}\n", spill.display().to_string()),
    )
    .unwrap();
    config
}

/// Proves: 10 GB of output from one task neither fills memory nor disk: the host's peak RSS stays
/// under 256 MiB, the spill file stays within its 64 MiB cap holding the head and the latest output
/// (the read says so), and the last bytes and the exit status arrive intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_gigabytes_of_output_stay_within_the_memory_and_spill_bounds() {
    let dir = scratch("ten-gb");
    let spill = dir.join("spill");
    let config = config_with_spill_dir(&dir, &spill);
    let client = mcp::stdio_client(
        &["--no-watch", "--config", config.to_str().unwrap()],
        mcp::Watcher::default(),
    )
    .await;
    let pid = host_pid(&client).await;
    let id = mcp::start(&client, "head -c 10000000000 /dev/zero; echo end").await;
    let mut peak_spill = 0;
    // The last bytes and the settlement may come in one read or in two (the read after the last
    // bytes then has no new output).
    let mut last_output = String::new();
    let text = loop {
        peak_spill = peak_spill.max(dir_bytes(&spill));
        let text = mcp::read_waiting(&client, &id, 1000).await;
        let (body, _) = text.rsplit_once("[status: ").expect("status line");
        if body != "(no new output)\n" {
            last_output = body.to_owned();
        }
        if !text.ends_with("[status: running]") {
            break text;
        }
    };
    assert!(
        text.ends_with("[status: completed, exit code: 0]")
            && last_output
                .ends_with(" (its head and its latest output; the middle was skipped)]\n")
            && last_output.contains("end\n[some output was dropped from memory; full output: "),
        "{}\n---\n{text}",
        &last_output[last_output.len().saturating_sub(300)..]
    );
    let peak_kib = status_kib(pid, "VmHWM");
    assert!(peak_kib < 256 * 1024, "host peak RSS {peak_kib} KiB");
    assert!(
        peak_spill <= 2 * (64 << 20),
        "spill dir peaked at {peak_spill} bytes"
    );
    assert!(
        dir_bytes(&spill) <= 64 << 20,
        "the spill file is within its cap"
    );
    client.cancel().await.expect("close");
}

/// Every settlement's status and detail, as the registry's completion listeners see them (in force
/// while the registration is held).
fn outcomes(
    f: &Fixture,
) -> (
    taskhost_registry::Registration,
    std::sync::mpsc::Receiver<(TaskStatus, Option<String>)>,
) {
    let (tx, rx) = std::sync::mpsc::channel();
    let registration = f
        .host
        .registry()
        .on_task_done(std::sync::Arc::new(move |s, _| {
            let _ = tx.send((s.status, s.detail.clone()));
        }));
    (registration, rx)
}

/// Waits for a task of `client` to settle and returns everything its last read showed.
async fn settled(client: &mcp::Client, id: &str) -> String {
    loop {
        let text = mcp::read_waiting(client, id, 1000).await;
        if !text.ends_with("[status: running]") {
            return text;
        }
    }
}

/// Proves: a spill directory on a full disk (a 1 MiB tmpfs in a private mount namespace) costs only
/// the spilled copy: the task completes with its tail and exit status, the read says the full output
/// is unavailable, the failed file's space is given back (a later task spills again), and the host
/// keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_spill_disk_loses_only_the_spilled_copy_and_the_host_keeps_serving() {
    let dir = scratch("disk-full");
    let spill = dir.join("full");
    std::fs::create_dir_all(&spill).unwrap();
    let config = config_with_spill_dir(&dir, &spill);
    let mut cmd = tokio::process::Command::new("unshare");
    cmd.args(["-rm", "sh", "-c"])
        .arg(r#"mount -t tmpfs -o size=1m,mode=0700 taskhost-full "$0" && exec "$1" serve --no-watch --no-state --config "$2""#)
        .arg(&spill)
        .arg(mcp::binary())
        .arg(&config);
    let client = mcp::command_client(cmd, mcp::Watcher::default()).await;

    let big = mcp::start(&client, r"head -c 3000000 /dev/zero | tr '\0' a; echo end").await;
    let text = settled(&client, &big).await;
    let tail = format!(
        "{}end\n[some output was dropped from memory; full output: (unavailable)]\n[status: completed, exit code: 0]",
        "a".repeat(64_000 - 4)
    );
    assert!(text == tail, "{}", &text[text.len().saturating_sub(300)..]);

    let ok = mcp::start(&client, "echo ok").await;
    assert_eq!(
        settled(&client, &ok).await,
        "ok\n[status: completed, exit code: 0]"
    );

    let again = mcp::start(&client, r"head -c 500000 /dev/zero | tr '\0' b; echo end").await;
    let text = settled(&client, &again).await;
    let notice = format!(
        "[some output was dropped from memory; full output: {}",
        spill.display()
    );
    assert!(
        text.contains(&notice),
        "{}",
        &text[text.len().saturating_sub(300)..]
    );
    client.cancel().await.expect("close");
}
