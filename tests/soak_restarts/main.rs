//! Soak of host restarts: a `--listen` host is SIGKILLed and upgraded with SIGHUP, again and again,
//! among reloads of its plugins, while two `taskhost connect` sessions keep tasks streaming
//! numbered lines and read them. At the end it checks what the handover promises: every task's
//! output byte-exact (every line once, in order), every task's end told once (by a read or by a
//! notice), and nothing left behind once the host is stopped (no task, no keeper).
//!
//! The readers go on reading through every upgrade (a bridge's session answers what it took before
//! the host re-executes itself, so none of their calls fails). Before a SIGKILL they pause between
//! two calls: a read in flight at the instant of a SIGKILL is lost to its client (README, Limits).
//!
//! `TASKHOST_SOAK_RESTARTS=<n>` sets the number of rounds (a round is a reload, a SIGKILL, a reload
//! and a SIGHUP; default 2).

#![allow(clippy::unwrap_used, reason = "in a test, an unwrap is an assertion")]

mod bridge;
#[allow(
    dead_code,
    reason = "the soak uses a part of the integration tests' fixtures"
)]
#[path = "../it/fixtures.rs"]
mod fixtures;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use bridge::Bridge;
use fixtures::*;

const SESSIONS: usize = 2;
const TASKS_PER_SESSION: usize = 4;
const LINES: u32 = 400;

/// The host under test: its process, and where everything it needs is. Dropped (a failed run
/// included), it is stopped and its keeper's tasks with it.
struct Host {
    child: Child,
    dir: PathBuf,
    /// Every pid the host ran as (a SIGKILL and restart makes a new one).
    pids: Vec<u32>,
}

impl Host {
    fn socket(dir: &Path) -> PathBuf {
        dir.join("taskhost.sock")
    }

    fn start(dir: &Path) -> Self {
        let mut host = Self {
            child: spawn_host(dir),
            dir: dir.to_owned(),
            pids: Vec::new(),
        };
        host.pids.push(host.child.id());
        host.wait_serving(1);
        host
    }

    /// Waits until the host's log says it is serving for the `n`th time.
    fn wait_serving(&self, n: usize) {
        let log = self.dir.join("host.log");
        assert!(
            eventually(Duration::from_secs(60), || {
                std::fs::read_to_string(&log)
                    .is_ok_and(|l| l.matches("taskhost::serve: serving").count() >= n)
            }),
            "the host did not serve a {n}th time: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        if !eventually(Duration::from_secs(20), || {
            matches!(self.child.try_wait(), Ok(Some(_)) | Err(_))
        }) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

fn spawn_host(dir: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("host.log"))
        .unwrap();
    let plugins = dir.join("plugins");
    Command::new(artifacts().join("taskhost"))
        .args(["serve", "--listen"])
        .arg(format!("unix:{}", Host::socket(dir).display()))
        .arg("--state")
        .arg(dir.join("state"))
        .arg("--plugin")
        .arg(plugins.join("libtaskhost_plugin_tasks.so"))
        .arg("--plugin")
        .arg(plugins.join("libtaskhost_plugin_bash.so"))
        .env("RUST_LOG", "info,rmcp=warn")
        .env("XDG_RUNTIME_DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn taskhost")
}

/// Rebuilds plugin `name` as cargo does: a new file renamed over the old one.
fn reload(dir: &Path, name: &str) {
    let file = format!("libtaskhost_plugin_{name}.so");
    let staged = dir.join("plugins").join(format!("{file}.new"));
    std::fs::copy(artifacts().join(&file), &staged).unwrap();
    std::fs::rename(&staged, dir.join("plugins").join(&file)).unwrap();
}

/// What the readers share with the restarts: a pause between two calls, and their progress.
#[derive(Default)]
struct Readers {
    pause: AtomicBool,
    parked: AtomicUsize,
    reads: AtomicUsize,
}

impl Readers {
    /// Parks the calling reader while a pause is asked.
    fn park_if_asked(&self) {
        if !self.pause.load(Ordering::Acquire) {
            return;
        }
        self.parked.fetch_add(1, Ordering::AcqRel);
        while self.pause.load(Ordering::Acquire) {
            // Waiting for the restart to finish; the flag is the event.
            std::thread::sleep(Duration::from_millis(5));
        }
        self.parked.fetch_sub(1, Ordering::AcqRel);
    }

    /// Waits until the readers made `more` reads past now.
    fn wait_progress(&self, more: usize) {
        let target = self.reads.load(Ordering::Acquire) + more;
        assert!(
            eventually(Duration::from_secs(60), || self
                .reads
                .load(Ordering::Acquire)
                >= target),
            "the readers stopped making progress"
        );
    }
}

/// What one session saw of one task.
#[derive(Debug, Default)]
struct Seen {
    lines: Vec<String>,
    read_end: bool,
    notices: usize,
    /// The notices' texts, and the read that showed the end, for a failure's message.
    told: Vec<String>,
    /// The number of the answer whose read first showed the end.
    end_shown_at: Option<usize>,
    /// Notices that came after an earlier answer had shown the end (told twice).
    late_notices: usize,
}

/// One session's life: starts its tasks, reads each until its last line (half of them until
/// their end), then waits for the notices of the rest. Returns what it saw, and the calls that
/// failed.
fn session(dir: &Path, s: usize, readers: &Readers) -> (Vec<(String, Seen)>, Vec<String>) {
    let mut bridge = Bridge::connect(&artifacts().join("taskhost"), &Host::socket(dir));
    let mut tasks: Vec<(String, Seen)> = (0..TASKS_PER_SESSION)
        .map(|t| {
            let tag = format!("s{s}t{t}");
            let command =
                format!("for i in $(seq 1 {LINES}); do echo {tag}-$i; sleep 0.005; done; sleep 1");
            let id = bridge
                .start(
                    "bash",
                    json!({"command": command, "run_in_background": true}),
                )
                .unwrap_or_else(|e| panic!("{e}"));
            (id, Seen::default())
        })
        .collect();
    let mut failed = Vec::new();
    let mut answers = 0;
    let last = |t: usize| format!("s{s}t{t}-{LINES}");
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let pending: Vec<usize> = (0..tasks.len())
            .filter(|&t| {
                let seen = &tasks[t].1;
                // Even tasks are read to their end; odd ones until their last line.
                !(seen.read_end || (t % 2 == 1 && seen.lines.last() == Some(&last(t))))
            })
            .collect();
        if pending.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the tasks never ended: {:?}",
            summary(&tasks)
        );
        for t in pending {
            readers.park_if_asked();
            let id = tasks[t].0.clone();
            match bridge.call("task_output", json!({"task_id": id})) {
                Ok(answer) => {
                    answers += 1;
                    take_read(&answer, answers, &mut tasks[t].1);
                    // A notice rides on whichever answer comes next, whatever it answers.
                    for (id, seen) in &mut tasks {
                        take_notices(id, &answer, answers, seen);
                    }
                }
                Err(e) => failed.push(e),
            }
            readers.reads.fetch_add(1, Ordering::AcqRel);
        }
        // Polling pace.
        std::thread::sleep(Duration::from_millis(5));
    }
    // The odd tasks' ends are told as notices (one each) on later answers.
    let deadline = Instant::now() + Duration::from_secs(120);
    while tasks.iter().any(|(_, s)| !s.read_end && s.notices == 0) {
        assert!(
            Instant::now() < deadline,
            "notices never came: {:?}",
            summary(&tasks)
        );
        readers.park_if_asked();
        match bridge.call("task_list", json!({})) {
            Ok(answer) => {
                answers += 1;
                for (id, seen) in &mut tasks {
                    take_notices(id, &answer, answers, seen);
                }
            }
            Err(e) => failed.push(e),
        }
        // Polling pace for the tasks' last second.
        std::thread::sleep(Duration::from_millis(50));
    }
    if let Ok(answer) = bridge.call("task_list", json!({})) {
        answers += 1;
        for (id, seen) in &mut tasks {
            take_notices(id, &answer, answers, seen);
        }
    }
    (tasks, failed)
}

fn take_read(answer: &str, number: usize, seen: &mut Seen) {
    if let Some(read) = answer.split("\n---\n").next() {
        if read.contains("[status: completed") {
            seen.read_end = true;
            seen.end_shown_at.get_or_insert(number);
            seen.told
                .push(format!("read: {}", read.lines().last().unwrap_or_default()));
        }
        seen.lines.extend(
            read.lines()
                .filter(|l| l.starts_with('s') && l.contains('-'))
                .map(str::to_owned),
        );
    }
}

/// Each task's id, lines read, last line, whether its end was read and its notices.
fn summary(tasks: &[(String, Seen)]) -> Vec<(String, usize, Option<String>, bool, usize)> {
    tasks
        .iter()
        .map(|(id, s)| {
            (
                id.clone(),
                s.lines.len(),
                s.lines.last().cloned(),
                s.read_end,
                s.notices,
            )
        })
        .collect()
}

fn take_notices(id: &str, answer: &str, number: usize, seen: &mut Seen) {
    // An end shown by an earlier answer's read was told then; one shown by this answer's read
    // came with this notice.
    let shown_before = seen.end_shown_at.is_some_and(|n| n < number);
    for notice in answer
        .split("\n---\n")
        .skip(1)
        .filter(|b| b.contains(&format!("background task {id} ")))
    {
        seen.notices += 1;
        seen.late_notices += usize::from(shown_before);
        seen.told.push(format!("notice: {notice}"));
    }
}

/// Processes left of the hosts that ran as `pids`: their keepers and their tasks.
fn leftovers(pids: &[u32]) -> Vec<String> {
    let mut left = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let path = entry.path();
        let cmdline = std::fs::read(path.join("cmdline")).unwrap_or_default();
        let environ = std::fs::read(path.join("environ")).unwrap_or_default();
        let cmd = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        for pid in pids {
            let marker = format!("TASKHOST_PROCESS={pid}:");
            let keeper = format!("keeper --marker {pid}:");
            if cmd.contains(&keeper)
                || environ
                    .split(|b| *b == 0)
                    .any(|v| v.starts_with(marker.as_bytes()))
            {
                left.push(format!("{}: {cmd}", entry.file_name().to_string_lossy()));
            }
        }
    }
    left
}

#[test]
fn host_restarts_and_upgrades_among_reloads_lose_nothing() {
    let rounds: usize = std::env::var("TASKHOST_SOAK_RESTARTS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2);
    let dir = scratch("soak-restarts");
    std::fs::create_dir(dir.join("plugins")).unwrap();
    reload(&dir, "tasks");
    reload(&dir, "bash");
    let mut host = Host::start(&dir);
    let readers = Arc::new(Readers::default());
    let sessions: Vec<_> = (0..SESSIONS)
        .map(|s| {
            let (dir, readers) = (dir.to_path_buf(), readers.clone());
            std::thread::spawn(move || session(&dir, s, &readers))
        })
        .collect();
    let mut servings = 1;
    for _ in 0..rounds {
        readers.wait_progress(20);
        reload(&dir, "bash");
        readers.wait_progress(20);
        // SIGKILL between two calls of each reader, and a new host on the same state and socket.
        readers.pause.store(true, Ordering::Release);
        assert!(eventually(Duration::from_secs(60), || readers
            .parked
            .load(Ordering::Acquire)
            == SESSIONS));
        host.child.kill().unwrap();
        host.child.wait().unwrap();
        host.child = spawn_host(&dir);
        host.pids.push(host.child.id());
        servings += 1;
        host.wait_serving(servings);
        readers.pause.store(false, Ordering::Release);
        readers.wait_progress(20);
        reload(&dir, "tasks");
        readers.wait_progress(20);
        // An upgrade while the readers read on.
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(host.child.id() as i32),
            nix::sys::signal::Signal::SIGHUP,
        )
        .unwrap();
        servings += 1;
        host.wait_serving(servings);
    }
    let mut failed = Vec::new();
    for (s, handle) in sessions.into_iter().enumerate() {
        let (tasks, errors) = handle.join().expect("a session panicked");
        failed.extend(errors);
        for (t, (id, seen)) in tasks.iter().enumerate() {
            let expected: Vec<String> = (1..=LINES).map(|i| format!("s{s}t{t}-{i}")).collect();
            let missing: Vec<&String> = expected
                .iter()
                .filter(|l| !seen.lines.contains(l))
                .collect();
            assert!(
                seen.lines == expected,
                "{id}: output not byte-exact ({} lines read; missing {missing:?}; around them {:?})",
                seen.lines.len(),
                missing
                    .first()
                    .and_then(|m| expected.iter().position(|l| l == *m))
                    .map(|i| &seen.lines[i.saturating_sub(3)..(i + 3).min(seen.lines.len())])
            );
            assert!(
                seen.notices <= 1 && seen.late_notices == 0 && (seen.read_end || seen.notices == 1),
                "{id}: its end told by a read: {}, by {} notice(s), {} after a read had shown it: {:?}",
                seen.read_end,
                seen.notices,
                seen.late_notices,
                seen.told
            );
        }
    }
    assert!(failed.is_empty(), "calls failed: {failed:?}");
    let pids = host.pids.clone();
    drop(host);
    assert!(
        eventually(Duration::from_secs(20), || leftovers(&pids).is_empty()),
        "left behind: {:?}",
        leftovers(&pids)
    );
    println!(
        "soak-restarts: {rounds} rounds (a SIGKILL and a SIGHUP each), {} tasks byte-exact",
        SESSIONS * TASKS_PER_SESSION
    );
}
