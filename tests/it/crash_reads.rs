//! Reads across a crash, with the real binary: a handed-over task's reads continue from the
//! owner's cursor in the kept output, byte exact, however much was written while no host ran; a
//! lost task's read continues from that cursor too.

use std::time::Duration;

use serde_json::json;

use crate::clients::bridged;
use crate::fixtures::*;
use crate::handover::state_host;
use crate::mcp::{self, Client, Watcher, try_call};

/// One numbered line of the fast writer: `L` and eight digits, padded to 64 bytes with its newline
/// (so every write and every read of the task's output ends on a line's end).
const LINE: &str = "L%08.0f xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";

/// A command writing `bursts` bursts of 500 numbered lines (32,000 bytes, half a read's tail in
/// memory), one every 0.2 s, then sleeping a second: its pid first, on a line of its own.
fn fast_writer(bursts: u32) -> String {
    format!(
        "echo pid $$; for b in $(seq 0 {}); do seq -f '{LINE}' $((b*500+1)) $((b*500+500)); sleep 0.2; done; sleep 1",
        bursts - 1
    )
}

/// What the reads of one task returned, gathered across calls.
#[derive(Default)]
struct Gathered {
    /// Every numbered line read, in order.
    numbers: Vec<u32>,
    /// Lines read that are neither numbered lines whole nor the pid line nor a status.
    odd: Vec<String>,
    /// A read's note pointing at a file instead of giving the output.
    notes: Vec<String>,
    status: String,
}

impl Gathered {
    fn take(&mut self, answer: &str) {
        let read = answer.split("\n---\n").next().unwrap_or_default();
        for line in read.lines() {
            if let Some(n) = line
                .strip_prefix('L')
                .filter(|_| line.len() == 63)
                .and_then(|l| l.get(..8)?.parse().ok())
            {
                self.numbers.push(n);
            } else if line.starts_with("[status: ") {
                self.status = line.to_owned();
            } else if line.contains("dropped from memory") {
                self.notes
                    .push(format!("after line {}: {line}", self.numbers.len()));
            } else if !line.starts_with("pid ")
                && line != "(no new output)"
                && !line.contains("more bytes of output are unread")
            {
                self.odd.push(line.chars().take(80).collect());
            }
        }
    }
}

/// Reads `id` until its status is no longer running, or until `stop` says so (failed calls are
/// tried again).
async fn read_while(
    client: &Client,
    id: &str,
    seen: &mut Gathered,
    stop: impl Fn(&Gathered) -> bool,
) {
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        assert!(
            std::time::Instant::now() < deadline,
            "the reads never ended"
        );
        if let Ok(answer) = try_call(client, "task_output", json!({"task_id": id})).await {
            seen.take(&answer);
            if stop(seen) || (!seen.status.is_empty() && seen.status != "[status: running]") {
                return;
            }
        }
        // Polling pace of a client that reads now and then.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Bytes in the state directory's kept files.
fn kept_bytes(state: &std::path::Path) -> u64 {
    std::fs::read_dir(state.join("output"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Proves (issue 41, 3): a writer of 32,000 bytes every 0.2 s, its host SIGKILLed and the next
/// started only once more than 256 KiB was kept meanwhile: every line is read once through
/// `task_output`, in order, whole, and no read points at a file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_writer_across_a_host_sigkill_is_read_whole_with_every_line_once() {
    fast_writer_across_kills("crash-fast-writer", 1).await;
}

/// The same across two crashes in a row: the keeper holds on to what it handed the second host
/// (which does not hold the task again), drains it a second time from where that host's writes
/// stood, and nothing it had handed over comes back twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_writer_across_two_host_sigkills_is_read_whole_with_every_line_once() {
    fast_writer_across_kills("crash-fast-writer-twice", 2).await;
}

/// Starts the fast writer, SIGKILLs its host `kills` times (each time once more than 1,000 new
/// lines were read and the host wrote 64 KiB to the kept files, and the next host started once
/// 256 KiB more were kept), then reads it to its end: every line once, in order, whole.
async fn fast_writer_across_kills(name: &str, kills: usize) {
    let dir = scratch(name);
    let state = dir.join("state");
    let mut host = state_host(&dir);
    let (a, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let id = mcp::start(&a, &fast_writer(60)).await;
    let mut seen = Gathered::default();
    for _ in 0..kills {
        // The host itself writes to the kept file before it dies, past where a keeper left it.
        let (read, written) = (seen.numbers.len() + 1000, kept_bytes(&state) + (64 << 10));
        read_while(&a, &id, &mut seen, |s| {
            s.numbers.len() >= read && kept_bytes(&state) > written
        })
        .await;
        host.child.kill().unwrap();
        host.child.wait().unwrap();
        let at_kill = kept_bytes(&state);
        assert!(
            eventually(Duration::from_secs(30), || kept_bytes(&state)
                > at_kill + (256 << 10)),
            "the keeper kept what the task wrote while no host ran"
        );
        host = state_host(&dir);
    }
    read_while(&a, &id, &mut seen, |_| false).await;
    assert_eq!(seen.status, "[status: completed, exit code: 0]");
    assert!(seen.notes.is_empty(), "{:?}", seen.notes);
    assert!(
        seen.odd.is_empty(),
        "lines cut or foreign: {:?}",
        &seen.odd[..seen.odd.len().min(5)]
    );
    let want: Vec<u32> = (1..=30_000).collect();
    if seen.numbers != want {
        let first_bad = seen.numbers.iter().zip(&want).position(|(a, b)| a != b);
        panic!(
            "{} lines read of {}; first difference at {first_bad:?}",
            seen.numbers.len(),
            want.len()
        );
    }
    a.cancel().await.expect("close");
}

/// A command printing its pid, five lines `a1`..`a5`, then after two seconds `while no host ran`,
/// then sleeping.
const READ_THEN_WAIT: &str = "echo pid $$; for i in 1 2 3 4 5; do echo a$i; done; sleep 2; echo while no host ran; exec sleep 1000";

/// Reads `id` until a read holds `until`; every answer so far, joined.
pub(crate) async fn read_until(client: &Client, id: &str, until: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut all = String::new();
    while !all.contains(until) {
        assert!(
            std::time::Instant::now() < deadline,
            "{until} never read: {all}"
        );
        if let Ok(answer) = try_call(
            client,
            "task_output",
            json!({"task_id": id, "wait": true, "timeout_ms": 500}),
        )
        .await
        {
            all.push_str(&answer);
            all.push('\n');
        }
    }
    all
}

/// The pid a read's `pid N` line names.
fn pid_in(read: &str) -> i32 {
    read.lines()
        .find_map(|l| l.strip_prefix("pid ")?.parse().ok())
        .unwrap_or_else(|| panic!("no pid line: {read}"))
}

/// Proves (issue 41, 4): a task whose owner read its first lines, its host SIGKILLed and no
/// successor within the grace, is ended and recorded lost; the owner's read from the next host
/// continues from its cursor: the lines written while no host ran, none it had read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_tasks_read_after_the_grace_continues_from_the_owners_cursor() {
    let dir = scratch("crash-lost-cursor");
    let mut host = crate::handover::grace_host(&dir, 3000);
    let (a, _) = bridged(
        &host.socket,
        Watcher::default(),
        &["--reconnect-for-ms", "60000"],
    )
    .await;
    let id = mcp::start(&a, READ_THEN_WAIT).await;
    let pid = pid_in(&read_until(&a, &id, "a5").await);
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    assert!(
        eventually(Duration::from_secs(30), || !crate::mcp::alive(pid)),
        "the task ended after the grace"
    );
    let _next = crate::handover::grace_host(&dir, 3000);
    let read = read_until(&a, &id, "[status: ").await;
    assert!(read.contains("while no host ran"), "{read}");
    assert!(
        !read.contains("a1") && !read.contains("pid "),
        "a line read again: {read}"
    );
    assert!(read.contains("[status: lost"), "{read}");
    a.cancel().await.ok();
}

/// Answers of `client`'s `task_list` calls until one carries a notice holding `text`, then three
/// more: the notices holding `text` among them all.
async fn notices_of(client: &Client, text: &str, wait: bool) -> usize {
    let deadline = std::time::Instant::now() + Duration::from_secs(if wait { 30 } else { 2 });
    let mut seen = 0;
    let mut after = 0;
    while after < 3 && std::time::Instant::now() < deadline {
        if let Ok(answer) = try_call(client, "task_list", json!({})).await {
            seen += answer.split("\n---\n").filter(|b| b.contains(text)).count();
        }
        if seen > 0 || !wait {
            after += 1;
        }
        // Polling pace of a client that looks now and then.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    seen
}

/// Proves (issue 40, 6): the keeper SIGKILLed under a live host costs its running task nothing:
/// the keeper that replaces it carries the task, so no owner is told it lost its crash protection;
/// the host SIGKILLed after, the next host takes the task back running, the owner's read repeats
/// nothing it had read, and the task's end settles it with its exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_keepers_tasks_are_carried_by_the_next_keeper_through_a_crash() {
    let dir = scratch("crash-keeper-death");
    let mut host = state_host(&dir);
    let (a, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let id = mcp::start(&a, "echo pid $$; echo one; exec sleep 1000").await;
    let pid = pid_in(&read_until(&a, &id, "one").await);
    let host_pid = host.child.id();
    let keeper = crate::handover::keeper_of(host_pid).expect("the host's keeper");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(keeper),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(
        eventually(Duration::from_secs(20), || crate::handover::keeper_of(
            host_pid
        )
        .is_some_and(|k| k != keeper)),
        "no keeper took the dead one's place"
    );
    assert_eq!(
        notices_of(&a, "lost their crash protection", false).await,
        0,
        "a carried task is no loss"
    );
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    let _next = state_host(&dir);
    assert!(
        crate::mcp::alive(pid),
        "the task was carried through the crash"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let read = read_until(&a, &id, "[status: ").await;
    assert!(!read.contains("lost"), "{read}");
    assert!(!read.contains("one\n"), "a line read again: {read}");
    a.cancel().await.ok();
}
