//! A long history's figures for `scripts/bench` (issue 47, "100,000 records"; release builds, the
//! real binary serving HTTP with `tasks`, `bash` and `web`). A state directory holds 100,000
//! settled task records of one principal (`TASKHOST_HISTORY_RECORDS` sets another count), each with
//! a small kept stdout, written straight through the store's journal; each figure stands beside
//! the same on a state of 1,000 records, in the same run:
//! - `taskhost tasks --all --json`'s wall time (median of 3);
//! - the view's first page: `GET /api/events` (the page's request for its task list) to its whole
//!   first `tasks` event (median of 3);
//! - a new host's start to serving on that state;
//! - the database's size per 10,000 settled tasks;
//! - retention expiring every record's output as a deployment applies it (`[state] keep_days`
//!   lowered in the config, then the host upgraded in place with `SIGHUP`): the time the new
//!   image's log gives, and meanwhile the p99 of `task_output` on a live task that writes a line
//!   every 10 ms, against the same p99 once it is done.

mod common;

#[path = "history/reads.rs"]
mod reads;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use taskhost_registry::{JournalStart, TaskId, TaskSnapshot, TaskStatus};
use taskhost_store::{Store, Sync};

const DAY_MS: u64 = 24 * 3600 * 1000;

/// The records of the baseline's state.
const BASELINE: usize = 1000;

/// The records of the measured state: `TASKHOST_HISTORY_RECORDS`, else 100,000.
fn records() -> usize {
    std::env::var("TASKHOST_HISTORY_RECORDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(100_000)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Fills the state directory `state` with `n` settled records of principal `history`, each ended
/// three days ago with a kept stdout of two lines; the principal's token.
fn fill(state: &Path, n: usize) -> String {
    let store = Store::open(state, Sync::Normal).expect("store");
    let token = store.create_principal("history").expect("principal");
    let (_, owner) = store
        .principal_of(&token)
        .expect("read")
        .expect("the principal");
    let journal = store.journal().expect("journal");
    let base = now_ms() - 3 * DAY_MS;
    // 16 threads start at once, so group commit batches the starts.
    let numbers: Vec<u64> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..16)
            .map(|t| {
                let (journal, owner) = (journal.clone(), owner.as_str());
                s.spawn(move || {
                    (t..n)
                        .step_by(16)
                        .map(|i| {
                            let label = format!("cargo test -p crate-{i}");
                            let start = JournalStart {
                                kind: "bash",
                                label: &label,
                                owner_session: Some(owner),
                                started_at_ms: base + i as u64,
                            };
                            journal.begin(&start).expect("begin")
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().expect("a filler"))
            .collect()
    });
    let output = store.output_dir();
    for number in numbers {
        let id = format!("bash-{number}");
        let file = output.path().join(format!("{id}.out"));
        let text = format!("running {id}\ntest result: ok. 12 passed; 0 failed\n");
        std::fs::write(&file, text).expect("a kept output");
        store.set_output(&id, [Some(file), None]);
        let snapshot = TaskSnapshot {
            id: TaskId::new(id),
            kind: "bash".into(),
            label: String::new(),
            output_limit_bytes: None,
            owner_session: None,
            status: TaskStatus::Completed,
            detail: Some("exit code: 0".into()),
            started_at_ms: base,
            finished_at_ms: Some(base + number + 1000),
            reported: true,
        };
        journal.settled(&snapshot, Box::new(|| {}));
    }
    drop(journal);
    store.close();
    token.reveal()
}

/// `taskhost tasks --all --json` on `state`: its wall time (median of 3) and the lines it printed.
fn tasks_json(state: &Path) -> (f64, usize) {
    let mut runs: Vec<(f64, usize)> = (0..3)
        .map(|_| {
            let t = Instant::now();
            let out = Command::new(common::profile_dir().join("taskhost"))
                .args(["tasks", "--all", "--json", "--state"])
                .arg(state)
                .output()
                .expect("taskhost tasks");
            let seconds = t.elapsed().as_secs_f64();
            assert!(out.status.success(), "{out:?}");
            (seconds, out.stdout.split(|b| *b == b'\n').count())
        })
        .collect();
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    runs[1]
}

/// Writes the host's config in `dir`: settled tasks' output kept `keep_days`.
fn config(dir: &Path, keep_days: u64) {
    let text = format!(
        "[tasks]\nmax_concurrent_tasks_per_owner = 64\n\n[state]\nkeep_days = {keep_days}\n"
    );
    std::fs::write(dir.join("taskhost.toml"), text).expect("the config");
}

/// A release host serving `http://127.0.0.1:0` on `dir`'s state and config, logging to
/// `dir/host.log`; stopped with SIGTERM when dropped.
struct Host {
    child: Child,
    port: u16,
}

impl Host {
    fn spawn(dir: &Path) -> Self {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("host.log"))
            .expect("the log");
        let mut command = Command::new(common::profile_dir().join("taskhost"));
        command
            .args(["serve", "--no-watch", "--listen", "http://127.0.0.1:0"])
            .arg("--state")
            .arg(dir.join("state"))
            .arg("--config")
            .arg(dir.join("taskhost.toml"));
        for p in ["tasks", "bash", "web"] {
            let library = format!("libtaskhost_plugin_{p}.so");
            command
                .arg("--plugin")
                .arg(common::profile_dir().join(library));
        }
        let child = command
            .env("RUST_LOG", "info,rmcp=warn,taskhost::serve::state=debug")
            .env("XDG_RUNTIME_DIR", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn taskhost");
        let (_, line) = wait_log(dir, "MCP over HTTP at ", 1);
        let port = line
            .trim_end()
            .trim_end_matches("/mcp")
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("a port");
        Self { child, port }
    }

    fn signal(&self, signal: nix::sys::signal::Signal) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        nix::sys::signal::kill(pid, signal).expect("signal the host");
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        self.signal(nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait();
    }
}

/// Waits until `dir/host.log` holds `pattern` `n` times; when that was seen and the line of the
/// `n`th.
fn wait_log(dir: &Path, pattern: &str, n: usize) -> (Instant, String) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let log = std::fs::read_to_string(dir.join("host.log")).unwrap_or_default();
        if let Some(line) = log.lines().filter(|l| l.contains(pattern)).nth(n - 1) {
            return (Instant::now(), line.to_owned());
        }
        assert!(Instant::now() < deadline, "the log never said {pattern:?}");
        // Polling the log: 1 ms is the figures' resolution.
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The number after `field=` in a log line.
fn field(line: &str, name: &str) -> f64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

/// What one state's run measured.
struct Run {
    records: usize,
    db_bytes: u64,
    json_bytes: u64,
    tasks_json: (f64, usize),
    serving: f64,
    idle_retention_ms: f64,
    first_page: (f64, usize),
    retention: reads::Retention,
}

/// Every figure on a state of `n` records, in `dir`.
fn run(dir: &Path, n: usize) -> Run {
    let state: PathBuf = dir.join("state");
    let t = Instant::now();
    let token = fill(&state, n);
    eprintln!("{n} records written in {:.1} s", t.elapsed().as_secs_f64());
    let (db_bytes, json_bytes) = common::state_sizes(&state);
    let tasks_json = tasks_json(&state);
    config(dir, 30);
    let started = Instant::now();
    let host = Host::spawn(dir);
    let serving = (wait_log(dir, "taskhost::serve: serving", 1).0 - started).as_secs_f64();
    // The start's retention, with nothing to expire (each record ended 3 days ago).
    let (_, line) = wait_log(dir, "retention: nothing expired", 1);
    let idle_retention_ms = field(&line, "ms");
    let mut pages: Vec<(f64, usize)> = (0..3)
        .map(|_| common::http::first_page(host.port, &token))
        .collect();
    pages.sort_by(|a, b| a.0.total_cmp(&b.0));
    let retention = reads::retention_under_reads(dir, &host, &token);
    drop(host);
    Run {
        records: n,
        db_bytes,
        json_bytes,
        tasks_json,
        serving,
        idle_retention_ms,
        first_page: pages[1],
        retention,
    }
}

fn row(name: &str, unit: &str, value: f64, baseline_name: &str, baseline: f64, target: &str) {
    println!(
        "{{\"name\":\"{name}\",\"unit\":\"{unit}\",\"value\":{value:.1},\"baseline_name\":\"{baseline_name}\",\"baseline\":{baseline:.1},\"ratio\":{:.2},\"target\":\"{target}\"}}",
        value / baseline
    );
}

fn main() {
    let scratch = common::scratch("history");
    let (small, big) = (scratch.join("small"), scratch.join("big"));
    for d in [&small, &big] {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(d)
            .expect("a private directory");
    }
    let base = run(&small, BASELINE);
    let big = run(&big, records());
    report(&base, &big);
}

/// Prints the rows: each figure of `big` beside the same of `base`.
fn report(base: &Run, big: &Run) {
    let n = big.records.to_string();
    let n = match n.len() {
        4.. => format!("{},{}", &n[..n.len() - 3], &n[n.len() - 3..]),
        _ => n,
    };
    let on = |r: &Run| format!("the same on {} records", r.records);
    row(
        &format!(
            "{n} records: taskhost tasks --all --json ({} lines)",
            big.tasks_json.1
        ),
        "ms",
        big.tasks_json.0 * 1e3,
        &on(base),
        base.tasks_json.0 * 1e3,
        "< 1000 ms",
    );
    row(
        &format!(
            "{n} records: the view's first page, GET /api/events to its first tasks event ({} rows)",
            big.first_page.1
        ),
        "ms",
        big.first_page.0 * 1e3,
        &on(base),
        base.first_page.0 * 1e3,
        "< 1000 ms",
    );
    row(
        &format!("{n} records: a new host's start to serving"),
        "ms",
        big.serving * 1e3,
        &on(base),
        base.serving * 1e3,
        "< 1000 ms",
    );
    let per = |bytes: u64, r: &Run| bytes as f64 * 10_000.0 / r.records as f64 / 1024.0;
    row(
        &format!("{n} records: database size per 10,000 settled tasks (with its WAL)"),
        "KiB",
        per(big.db_bytes, big),
        "the same records as `taskhost tasks --json` lines",
        per(big.json_bytes, big),
        "",
    );
    row(
        &format!("{n} records: retention at a host's start with nothing to expire"),
        "ms",
        big.idle_retention_ms,
        &on(base),
        base.idle_retention_ms,
        "",
    );
    reads::report(&n, &base.retention, &big.retention, &on(base));
}
