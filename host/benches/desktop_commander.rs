//! Side by side with Desktop Commander for `scripts/bench`: start 200 background commands and
//! collect all their outputs, both driven as an agent drives them over MCP on stdio. taskhost (release
//! build, bash and tasks plugins, its store on): 200 `bash` starts, then one `task_output` wait per task.
//! Desktop Commander (the npm package, under node): 200 `start_process` calls that return at once
//! (`timeout_ms` 1), then `read_process_output` per process until it says the process completed.
//! Both speak through one plain line client ([`common::lines`]).
//! The two run in alternating pairs; the figure is the median pair. Every output is checked byte for
//! byte on both sides. Without the package in `target/dc` (`scripts/bench` installs it) the row says
//! it was skipped.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use common::lines::LineClient;
use common::stdio::{command, expected, serve, taskhost_run, write_config};
use serde_json::json;

const PAIRS: usize = 5;

/// Where `scripts/bench` installs Desktop Commander.
fn entry() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../target/dc/node_modules/@wonderwhy-er/desktop-commander/dist/index.js")
}

/// Desktop Commander on stdio, its home (where it keeps its config and logs) in `dir`.
fn desktop_commander(dir: &Path) -> LineClient {
    let home = dir.join("dc-home");
    std::fs::create_dir_all(&home).expect("its home");
    let mut cmd = Command::new("node");
    cmd.arg(entry()).env("HOME", &home).current_dir(&home);
    LineClient::start(cmd)
}

/// The process id a `start_process` answer names.
fn pid(text: &str) -> u64 {
    text.split("PID ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no PID in {text:?}"))
}

/// One Desktop Commander run of `tasks` commands: seconds to start all and collect every output,
/// and how many outputs were not what the command printed. (Desktop Commander sometimes reports
/// a fast command completed with none of its lines, `total: 0 lines`, or has forgotten it.)
fn desktop_commander_run(client: &mut LineClient, tasks: usize) -> (f64, usize) {
    let t = Instant::now();
    let pids: Vec<u64> = (0..tasks)
        .map(|i| {
            let args = json!({"command": command(i), "timeout_ms": 1});
            pid(&client.call("start_process", args).0)
        })
        .collect();
    let mut wrong = 0;
    for (i, pid) in pids.iter().enumerate() {
        let mut output = String::new();
        loop {
            let args = json!({"pid": pid, "timeout_ms": 60000});
            let (text, _) = client.call("read_process_output", args);
            let (lines, done) = read_lines(&text);
            output.push_str(lines);
            if done {
                break;
            }
        }
        if output != expected(i) {
            wrong += 1;
        }
    }
    (t.elapsed().as_secs_f64(), wrong)
}

/// The output lines of one `read_process_output` answer, and whether it says the process completed.
/// The answer is a `[Reading N new lines ...]` header, a blank line, the lines, and (once the
/// process ended) a blank line and a completion line. An answer that is no read (`No session
/// found for PID ...`: Desktop Commander keeps a bounded list of ended processes, and forgot this
/// one) ends the reading too.
fn read_lines(text: &str) -> (&str, bool) {
    if !text.starts_with("[Reading") {
        return ("", true);
    }
    let body = text.split_once("]\n\n").map_or("", |(_, b)| b);
    let lines = body
        .split_once("\n✅ Process completed")
        .map_or(body, |(l, _)| l);
    (lines, text.contains("✅ Process completed"))
}

fn main() {
    // `TASKHOST_BENCH_TASKS` makes a quick run.
    let tasks: usize = std::env::var("TASKHOST_BENCH_TASKS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(200);
    if !entry().is_file() {
        println!(
            "{{\"name\":\"start {tasks} background commands and collect all outputs, store on, against Desktop Commander (skipped: Desktop Commander not in target/dc; scripts/bench installs it)\",\"skipped\":true}}"
        );
        return;
    }
    let dir = common::scratch("desktop-commander");
    let config = dir.join("taskhost.toml");
    write_config(
        &config,
        &format!("max_concurrent_tasks_per_owner = {}", tasks + 10),
    );
    let mut wrong = 0;
    let mut ours = serve(&config, &dir, &[]);
    let mut theirs = desktop_commander(&dir);
    let pairs: Vec<(f64, f64)> = (0..PAIRS)
        .map(|_| {
            let (_, a) = taskhost_run(&mut ours, tasks);
            let (b, w) = desktop_commander_run(&mut theirs, tasks);
            wrong += w;
            (a, b)
        })
        .collect();
    let median = |f: &dyn Fn(&(f64, f64)) -> f64| {
        let mut v: Vec<f64> = pairs.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ratios: Vec<String> = pairs.iter().map(|p| format!("{:.3}", p.0 / p.1)).collect();
    println!(
        "{{\"name\":\"start {tasks} background commands and collect all outputs, store on, against Desktop Commander\",\"unit\":\"ms\",\"value\":{:.0},\"baseline_name\":\"Desktop Commander 0.2.52: {tasks} x start_process, read_process_output to each end, {wrong} of {} outputs wrong (ratios per pair: {})\",\"baseline\":{:.0},\"ratio\":{:.3},\"target\":\"ratio <= 0.033 (30x faster)\"}}",
        median(&|p| p.0) * 1e3,
        tasks * PAIRS,
        ratios.join(" "),
        median(&|p| p.1) * 1e3,
        median(&|p| p.0 / p.1),
    );
}
