//! The handover's figures for `scripts/bench` (release builds, the real binary on a socket):
//! - a SIGKILLed host with 1,000 live tasks, then a new host on the same state and socket: the time
//!   from the new process's start to its serving the 1,000 adopted tasks, against a fresh host's
//!   start to serving with none (target: under 200 ms past the new process's start);
//! - a client polling `task_list` through `taskhost connect` while the host is upgraded (`SIGHUP`):
//!   its longest wait for an answer, against its longest wait over the same time without one.

mod common;

#[path = "../../tests/soak_restarts/bridge.rs"]
mod bridge;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

const TASKS: usize = 1000;

/// Starts the release host on `dir`'s socket and state, logging to `dir/host.log`.
fn spawn_host(dir: &Path) -> Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("host.log"))
        .expect("the log");
    Command::new(common::profile_dir().join("taskhost"))
        .args(["serve", "--no-watch", "--listen"])
        .arg(format!("unix:{}", dir.join("s.sock").display()))
        .arg("--state")
        .arg(dir.join("state"))
        .arg("--config")
        .arg(dir.join("taskhost.toml"))
        .env("RUST_LOG", "info,rmcp=warn")
        .env("XDG_RUNTIME_DIR", dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn taskhost")
}

/// Waits until the log says the host serves for the `n`th time; when that was seen.
fn serving(dir: &Path, n: usize) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let log = std::fs::read_to_string(dir.join("host.log")).unwrap_or_default();
        if log.matches("taskhost::serve: serving").count() >= n {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "the host never served");
        // Polling the log: 1 ms is the figure's resolution.
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn stop(child: &mut Child) {
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
    let _ = child.wait();
}

fn row(name: &str, value: f64, baseline_name: &str, baseline: f64, target: &str) {
    println!(
        "{{\"name\":\"{name}\",\"unit\":\"ms\",\"value\":{value:.1},\"baseline_name\":\"{baseline_name}\",\"baseline\":{baseline:.1},\"ratio\":{:.2},\"target\":\"{target}\"}}",
        value / baseline
    );
}

/// The longest wait for an answer to `task_list` over `span`, calling it back to back.
fn longest_wait(client: &mut bridge::Bridge, span: Duration) -> Duration {
    let end = Instant::now() + span;
    let mut longest = Duration::ZERO;
    while Instant::now() < end {
        let t = Instant::now();
        client.call("task_list", json!({})).expect("task_list");
        longest = longest.max(t.elapsed());
    }
    longest
}

fn main() {
    let dir = common::scratch("handover");
    std::fs::write(
        dir.join("taskhost.toml"),
        "[tasks]\nmax_concurrent_tasks_per_owner = 2000\n",
    )
    .expect("the config");
    // A fresh host's start to serving, with nothing to take over.
    let started = Instant::now();
    let mut host = spawn_host(&dir);
    let fresh = serving(&dir, 1) - started;

    let mut client =
        bridge::Bridge::connect(&common::profile_dir().join("taskhost"), &dir.join("s.sock"));
    for _ in 0..TASKS {
        client
            .start(
                "bash",
                json!({"command": "sleep 600", "run_in_background": true}),
            )
            .unwrap_or_else(|e| panic!("{e}"));
    }
    host.kill().expect("SIGKILL the host");
    host.wait().expect("reap it");
    let started = Instant::now();
    host = spawn_host(&dir);
    let adopted = serving(&dir, 2) - started;
    let listed = client.call("task_list", json!({})).expect("task_list");
    let running = listed
        .lines()
        .filter(|l| l.contains(" [bash] running "))
        .count();
    assert_eq!(running, TASKS, "every task taken over: {listed}");
    row(
        &format!("handover: new host's start to serving {TASKS} adopted tasks"),
        adopted.as_secs_f64() * 1e3,
        "a fresh host's start to serving",
        fresh.as_secs_f64() * 1e3,
        "< 200 ms",
    );

    // The client's longest wait across an upgrade, against the same span without one.
    let quiet = longest_wait(&mut client, Duration::from_secs(2));
    let pid = nix::unistd::Pid::from_raw(host.id() as i32);
    let upgrader = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    });
    let across = longest_wait(&mut client, Duration::from_secs(2));
    upgrader.join().expect("the upgrade");
    serving(&dir, 3);
    row(
        &format!("upgrade (SIGHUP) with {TASKS} tasks: a polling client's longest wait"),
        across.as_secs_f64() * 1e3,
        "its longest wait without an upgrade",
        quiet.as_secs_f64() * 1e3,
        "",
    );
    drop(client);
    stop(&mut host);
}
