//! Side by side with pueue for `scripts/bench`: start 200 background commands and collect all their
//! outputs. taskhost is driven as an agent drives it (its MCP server over stdio, release build, bash and
//! tasks plugins: 200 `bash` starts, then one `task_output` wait per task); pueue as a user or an agent
//! drives it (a private `pueued`, 200 `pueue add` runs, `pueue wait`, then one `pueue log --json --full`
//! for every output). The two run in alternating pairs; each pair gives a ratio, and the figure is the
//! median pair. Every output is checked byte for byte on both sides. Without `pueue` and `pueued` on
//! `PATH` (or in `~/.cargo/bin`) the row says it was skipped.
//!
//! The queue's row (issue 44): 1,000 such commands through 8 slots, taskhost with
//! `[tasks] max_running = 8` (996 of the starts answered `queued`) against pueue with `parallel 8`,
//! in alternating pairs as above. Without pueue the row gives taskhost's time alone.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

const TASKS: usize = 200;
const PAIRS: usize = 5;
/// Writes a host config at `path` with `tasks` as its `[tasks]` table and the release bash and
/// tasks plugins of `profile`.
fn write_config(path: &Path, tasks: &str, profile: &Path) {
    std::fs::write(
        path,
        format!(
            "[tasks]\n{tasks}\n\n[[plugin]]\npath = \"{}\"\n\n[[plugin]]\npath = \"{}\"\n",
            profile.join("libtaskhost_plugin_bash.so").display(),
            profile.join("libtaskhost_plugin_tasks.so").display()
        ),
    )
    .expect("taskhost config");
}

/// The queue's row: this many tasks through `SLOTS` slots, in `QUEUE_PAIRS` pairs.
const QUEUED: usize = 1_000;
const SLOTS: usize = 8;
const QUEUE_PAIRS: usize = 3;
const LINES: usize = 20;

fn command(i: usize) -> String {
    format!("for j in $(seq 1 {LINES}); do echo \"task {i} line $j\"; done")
}

fn expected(i: usize) -> String {
    (1..=LINES)
        .map(|j| format!("task {i} line {j}\n"))
        .collect()
}

fn find(program: &str) -> Option<PathBuf> {
    let home = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo/bin"));
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain(home)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

type Client = RunningService<RoleClient, ()>;

async fn call(client: &Client, tool: &str, args: Value) -> String {
    answer(client, tool, args).await.0
}

/// A call's first text and the task it started (its result's `_meta`).
async fn answer(client: &Client, tool: &str, args: Value) -> (String, Option<String>) {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let result = client
        .peer()
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .expect("call");
    let started = serde_json::to_value(&result)
        .ok()
        .and_then(|r| taskhost_tests::started_task(&r));
    (
        result.content[0].as_text().expect("text").text.clone(),
        started,
    )
}

/// One taskhost run of `tasks` commands: seconds to start all, and to start all and collect every
/// output.
async fn taskhost_run(client: &Client, tasks: usize) -> (f64, f64) {
    let t = Instant::now();
    let mut ids = Vec::with_capacity(tasks);
    for i in 0..tasks {
        let (text, started) = answer(
            client,
            "bash",
            json!({"command": command(i), "run_in_background": true}),
        )
        .await;
        ids.push(started.unwrap_or_else(|| panic!("not started: {text}")));
    }
    let started = t.elapsed().as_secs_f64();
    for (i, id) in ids.iter().enumerate() {
        let text = call(
            client,
            "task_output",
            json!({"task_id": id, "wait": true, "timeout_ms": 60000}),
        )
        .await;
        assert_eq!(
            text,
            format!("{}[status: completed, exit code: 0]", expected(i)),
            "taskhost output of task {i}"
        );
    }
    (started, t.elapsed().as_secs_f64())
}

struct Pueue {
    client: PathBuf,
    config: PathBuf,
    daemon: std::process::Child,
}

impl Pueue {
    fn start(client: PathBuf, daemon: &Path, dir: &Path) -> Self {
        let config = dir.join("pueue.yml");
        let socket = dir.join("pueue.socket");
        std::fs::write(
            &config,
            format!(
                "shared:\n  pueue_directory: {}\n  runtime_directory: {}\n  use_unix_socket: true\n  unix_socket_path: {}\n",
                dir.join("data").display(),
                dir.display(),
                socket.display()
            ),
        )
        .expect("pueue config");
        let daemon = Command::new(daemon)
            .arg("-c")
            .arg(&config)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("pueued");
        let p = Self {
            client,
            config,
            daemon,
        };
        let deadline = Instant::now() + std::time::Duration::from_secs(10);
        while !p.try_run(&["status"]) {
            assert!(Instant::now() < deadline, "pueued did not come up");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        p.run(&["parallel", &TASKS.to_string()]);
        p
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(&self.client);
        c.arg("-c").arg(&self.config).args(args);
        c
    }

    fn try_run(&self, args: &[&str]) -> bool {
        self.command(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    fn run(&self, args: &[&str]) -> String {
        let out = self.command(args).output().expect("pueue");
        assert!(
            out.status.success(),
            "pueue {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// One pueue run of `tasks` commands: seconds to start all, and to start all and collect every
    /// output.
    fn run_once(&self, tasks: usize) -> (f64, f64) {
        let t = Instant::now();
        let mut ids = Vec::with_capacity(tasks);
        for i in 0..tasks {
            let id = self.run(&["add", "--print-task-id", "--", &command(i)]);
            ids.push(id.trim().to_owned());
        }
        let started = t.elapsed().as_secs_f64();
        self.run(&["wait"]);
        let log: Value =
            serde_json::from_str(&self.run(&["log", "--json", "--full"])).expect("pueue log json");
        let elapsed = t.elapsed().as_secs_f64();
        for (i, id) in ids.iter().enumerate() {
            let output = log[id.as_str()]["output"].as_str().unwrap_or_default();
            assert_eq!(output, expected(i), "pueue output of task {id}");
        }
        self.run(&["clean"]);
        (started, elapsed)
    }
}

impl Drop for Pueue {
    fn drop(&mut self) {
        let _ = self.try_run(&["reset", "--force"]);
        let _ = self.try_run(&["shutdown"]);
        let _ = self.daemon.wait();
    }
}

fn main() {
    let name = "start 200 background commands and collect all outputs";
    let profile = common::profile_dir();
    let dir = common::scratch("pueue");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (Some(client), Some(daemon)) = (find("pueue"), find("pueued")) else {
        println!(
            "{{\"name\":\"{name} (skipped: pueue not installed; cargo install pueue)\",\"skipped\":true}}"
        );
        queue_row(&rt, &profile, &dir, None);
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    let config = dir.join("taskhost.toml");
    write_config(
        &config,
        &format!("max_concurrent_tasks_per_owner = {}", TASKS + 10),
        &profile,
    );
    let pueue = Pueue::start(client, &daemon, &dir);
    // The store on (the default: records in `state-home`, written before each start is answered)
    // and off (`--no-state`, records in memory only).
    for (store, extra) in [("store on", None), ("store off", Some("--no-state"))] {
        let pairs = compare(&rt, &profile, &config, &dir, extra, &pueue);
        report(&format!("{name}, {store}"), &pairs);
    }
    queue_row(&rt, &profile, &dir, Some(&pueue));
    drop(pueue);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Seconds per run of taskhost and of pueue, run in turns: (ours to start, ours in all, theirs to
/// start, theirs in all).
type Pair = (f64, f64, f64, f64);

fn compare(
    rt: &tokio::runtime::Runtime,
    profile: &std::path::Path,
    config: &std::path::Path,
    dir: &std::path::Path,
    extra: Option<&str>,
    pueue: &Pueue,
) -> Vec<Pair> {
    rt.block_on(async {
        let mut cmd = tokio::process::Command::new(profile.join("taskhost"));
        cmd.arg("serve")
            .arg("--no-watch")
            .arg("--config")
            .arg(config)
            .args(extra)
            .env("XDG_STATE_HOME", dir.join("state-home"))
            .env("RUST_LOG", "error");
        let host: Client =
            ().serve(TokioChildProcess::new(cmd).expect("spawn taskhost"))
                .await
                .expect("handshake");
        let mut pairs = Vec::new();
        for _ in 0..PAIRS {
            let (a_start, a) = taskhost_run(&host, TASKS).await;
            let (b_start, b) = pueue.run_once(TASKS);
            pairs.push((a_start, a, b_start, b));
        }
        let _ = host.cancel().await;
        pairs
    })
}

/// The queue's row: `QUEUED` commands through `SLOTS` slots, against pueue's `parallel 8` when
/// there is one (then the pairs alternate), else taskhost's time alone.
fn queue_row(rt: &tokio::runtime::Runtime, profile: &Path, dir: &Path, pueue: Option<&Pueue>) {
    let name = format!("{QUEUED} tasks through a queue of {SLOTS} slots");
    let config = dir.join("queue.toml");
    write_config(
        &config,
        &format!(
            "max_running = {SLOTS}\nmax_concurrent_tasks_per_owner = {}",
            QUEUED + 10
        ),
        profile,
    );
    if let Some(p) = pueue {
        p.run(&["parallel", &SLOTS.to_string()]);
    }
    let pairs: Vec<Pair> = rt.block_on(async {
        let mut cmd = tokio::process::Command::new(profile.join("taskhost"));
        cmd.args(["serve", "--no-watch", "--config"])
            .arg(&config)
            .env("XDG_STATE_HOME", dir.join("state-home"))
            .env("RUST_LOG", "error");
        let host: Client =
            ().serve(TokioChildProcess::new(cmd).expect("spawn taskhost"))
                .await
                .expect("handshake");
        let mut pairs = Vec::new();
        for _ in 0..QUEUE_PAIRS {
            let (a_start, a) = taskhost_run(&host, QUEUED).await;
            let (b_start, b) = pueue.map_or((f64::NAN, f64::NAN), |p| p.run_once(QUEUED));
            pairs.push((a_start, a, b_start, b));
        }
        let _ = host.cancel().await;
        pairs
    });
    if pueue.is_some() {
        let baseline =
            format!("pueue {QUEUED} x add with parallel {SLOTS}, wait, log --json --full");
        report_against(&name, &baseline, QUEUED, &pairs);
        return;
    }
    let mut v: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    v.sort_by(f64::total_cmp);
    println!(
        "{{\"name\":\"{name} (pueue not installed: taskhost alone)\",\"unit\":\"ms\",\"value\":{:.0}}}",
        v[v.len() / 2] * 1e3
    );
}

fn report(name: &str, pairs: &[Pair]) {
    report_against(
        name,
        "pueue 200 x add, wait, log --json --full",
        TASKS,
        pairs,
    );
}

fn report_against(name: &str, baseline: &str, tasks: usize, pairs: &[Pair]) {
    let median = |f: &dyn Fn(&Pair) -> f64| {
        let mut v: Vec<f64> = pairs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ratios: Vec<String> = pairs.iter().map(|p| format!("{:.2}", p.1 / p.3)).collect();
    let (a, b, r) = (median(&|p| p.1), median(&|p| p.3), median(&|p| p.1 / p.3));
    println!(
        "{{\"name\":\"{name}\",\"unit\":\"ms\",\"value\":{:.0},\"baseline_name\":\"{baseline} (ratios per pair: {})\",\"baseline\":{:.0},\"ratio\":{r:.2}}}",
        a * 1e3,
        ratios.join(" "),
        b * 1e3,
    );
    let (a, b) = (median(&|p| p.0), median(&|p| p.2));
    println!(
        "{{\"name\":\"  of which starting the {tasks}\",\"unit\":\"ms\",\"value\":{:.0},\"baseline_name\":\"pueue: the {tasks} adds (a client process each)\",\"baseline\":{:.0},\"ratio\":{:.2}}}",
        a * 1e3,
        b * 1e3,
        a / b
    );
}
