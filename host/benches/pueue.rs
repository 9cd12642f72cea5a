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

use common::stdio::{command, expected, serve, taskhost_run, write_config};
use serde_json::Value;

const TASKS: usize = 200;
const PAIRS: usize = 5;

/// The queue's row: this many tasks through `SLOTS` slots, in `QUEUE_PAIRS` pairs.
const QUEUED: usize = 1_000;
const SLOTS: usize = 8;
const QUEUE_PAIRS: usize = 3;

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
    let dir = common::scratch("pueue");
    let (Some(client), Some(daemon)) = (find("pueue"), find("pueued")) else {
        println!(
            "{{\"name\":\"{name} (skipped: pueue not installed; cargo install pueue)\",\"skipped\":true}}"
        );
        queue_row(&dir, None);
        return;
    };
    let config = dir.join("taskhost.toml");
    write_config(
        &config,
        &format!("max_concurrent_tasks_per_owner = {}", TASKS + 10),
    );
    let pueue = Pueue::start(client, &daemon, &dir);
    // The store on (the default: records in `state-home`, written before each start is answered)
    // and off (`--no-state`, records in memory only).
    for (store, extra) in [("store on", &[][..]), ("store off", &["--no-state"][..])] {
        let pairs = compare(&config, &dir, extra, &pueue);
        report(&format!("{name}, {store}"), &pairs);
    }
    queue_row(&dir, Some(&pueue));
}

/// Seconds per run of taskhost and of pueue, run in turns: (ours to start, ours in all, theirs to
/// start, theirs in all).
type Pair = (f64, f64, f64, f64);

fn compare(config: &Path, dir: &Path, extra: &[&str], pueue: &Pueue) -> Vec<Pair> {
    let mut host = serve(config, dir, extra);
    (0..PAIRS)
        .map(|_| {
            let (a_start, a) = taskhost_run(&mut host, TASKS);
            let (b_start, b) = pueue.run_once(TASKS);
            (a_start, a, b_start, b)
        })
        .collect()
}

/// The queue's row: `QUEUED` commands through `SLOTS` slots, against pueue's `parallel 8` when
/// there is one (then the pairs alternate), else taskhost's time alone.
fn queue_row(dir: &Path, pueue: Option<&Pueue>) {
    let name = format!("{QUEUED} tasks through a queue of {SLOTS} slots");
    let config = dir.join("queue.toml");
    write_config(
        &config,
        &format!(
            "max_running = {SLOTS}\nmax_concurrent_tasks_per_owner = {}",
            QUEUED + 10
        ),
    );
    if let Some(p) = pueue {
        p.run(&["parallel", &SLOTS.to_string()]);
    }
    let mut host = serve(&config, dir, &[]);
    let pairs: Vec<Pair> = (0..QUEUE_PAIRS)
        .map(|_| {
            let (a_start, a) = taskhost_run(&mut host, QUEUED);
            let (b_start, b) = pueue.map_or((f64::NAN, f64::NAN), |p| p.run_once(QUEUED));
            (a_start, a, b_start, b)
        })
        .collect();
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
