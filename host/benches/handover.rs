//! The handover's figures for `scripts/bench` (release builds, the real binary on a socket), for
//! 1,000 and 10,000 live `sleep` tasks (issue 47, item 2; `TASKHOST_HANDOVER_TASKS=N[,M...]` sets
//! the counts):
//! - the host SIGKILLed, then a new host on the same state and socket: the time from the new
//!   process's start until `task_list` (through the client's `taskhost connect` bridge) shows every
//!   task running, against a fresh host's start to serving with none (targets: 200 ms for 1,000,
//!   1 s for 10,000); and the part of it until the new host's log says it serves;
//! - the same from a `SIGHUP` (an upgrade in place) until the new image's `task_list` shows every
//!   task running;
//! - with 1,000, a client polling `task_list` while the host is upgraded: its longest wait for an
//!   answer, against its longest wait over the same time without one.

mod common;

#[path = "../../tests/soak_restarts/bridge.rs"]
mod bridge;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

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

/// Waits until the log says `host` serves for the `n`th time; when that was seen.
fn serving(dir: &Path, host: &mut Child, n: usize) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let log = std::fs::read_to_string(dir.join("host.log")).unwrap_or_default();
        if log.matches("taskhost::serve: serving").count() >= n {
            return Instant::now();
        }
        let ended = host.try_wait().ok().flatten();
        let tail: String = log.lines().rev().take(20).collect::<Vec<_>>().join("\n");
        assert!(
            ended.is_none(),
            "the host ended ({ended:?}) before serving: {tail}"
        );
        assert!(Instant::now() < deadline, "the host never served: {tail}");
        // Polling the log: 1 ms is the figure's resolution.
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Calls `task_list` until it shows `n` running tasks; when it did.
fn all_running(client: &mut bridge::Bridge, n: usize) -> Instant {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let listed = client.call("task_list", json!({})).expect("task_list");
        let running = listed
            .lines()
            .filter(|l| l.contains(" [bash] running "))
            .count();
        if running >= n {
            return Instant::now();
        }
        assert!(Instant::now() < deadline, "{running} of {n} tasks running");
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

/// Starts `n` background sleeps through `client`: how many started (a refusal is loud, and counted).
fn start_sleeps(client: &mut bridge::Bridge, n: usize) -> usize {
    let mut failed = 0;
    for i in 0..n {
        let started = client.start(
            "bash",
            json!({"command": "sleep 600", "run_in_background": true}),
        );
        if let Err(e) = started {
            failed += 1;
            if failed < 5 {
                eprintln!("start {i}: {e}");
            }
        }
    }
    n - failed
}

fn main() {
    let counts: Vec<usize> = std::env::var("TASKHOST_HANDOVER_TASKS")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![1000, 10_000]);
    for n in counts {
        handover(n);
    }
}

/// How many of `asked` live tasks a host can hold here: each holds two descriptors (its output's
/// read ends) in the host and two in its keeper, so the open-file hard limit (which only a
/// privileged user raises) bounds them, less room for the host's own.
fn fitting(asked: usize) -> usize {
    let hard = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(u64::MAX, |(_, hard)| hard);
    let room = usize::try_from(hard.saturating_sub(1000) / 2).unwrap_or(usize::MAX);
    if room < asked {
        eprintln!(
            "{asked} tasks need more than the open-file hard limit of {hard} descriptors: {room} are measured"
        );
    }
    asked.min(room)
}

/// The figures of one count of live tasks.
fn handover(asked: usize) {
    // As root the hard limit can be raised too (refused without CAP_SYS_RESOURCE); it is never
    // lowered, since a lower hard limit could not be raised again for the next count.
    let wanted = 2 * asked as u64 + 1000;
    let (soft, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .unwrap_or((0, 0));
    let _ = nix::sys::resource::setrlimit(
        nix::sys::resource::Resource::RLIMIT_NOFILE,
        soft.max(wanted),
        hard.max(wanted),
    );
    let n = fitting(asked);
    let count = match n == asked {
        true => common::thousands(n),
        false => format!(
            "{} ({} live: the open-file hard limit holds no more)",
            common::thousands(asked),
            common::thousands(n)
        ),
    };
    let target = if asked <= 1000 { "< 200 ms" } else { "< 1 s" };
    let dir = common::scratch(&format!("handover-{n}"));
    let config = format!("[tasks]\nmax_concurrent_tasks_per_owner = {}\n", n + 10);
    std::fs::write(dir.join("taskhost.toml"), config).expect("the config");
    // A fresh host's start to serving, with nothing to take over.
    let started = Instant::now();
    let mut host = spawn_host(&dir);
    let fresh = serving(&dir, &mut host, 1) - started;

    let binary = common::profile_dir().join("taskhost");
    let mut client = bridge::Bridge::connect(&binary, &dir.join("s.sock"));
    let live = start_sleeps(&mut client, n);
    if live < n {
        println!(
            "{{\"name\":\"handover {count}: starts that failed (each loudly)\",\"unit\":\"starts\",\"value\":{},\"baseline_name\":\"starts asked\",\"baseline\":{n},\"ratio\":{:.4},\"target\":\"0\"}}",
            n - live,
            (n - live) as f64 / n as f64
        );
    }
    all_running(&mut client, live);

    host.kill().expect("SIGKILL the host");
    host.wait().expect("reap it");
    let started = Instant::now();
    host = spawn_host(&dir);
    let served = serving(&dir, &mut host, 2) - started;
    let listed = all_running(&mut client, live) - started;
    row(
        &format!(
            "handover {count}: SIGKILL, new host's start until task_list shows every task running"
        ),
        listed.as_secs_f64() * 1e3,
        "a fresh host's start to serving",
        fresh.as_secs_f64() * 1e3,
        target,
    );
    row(
        "  of which until the new host serves",
        served.as_secs_f64() * 1e3,
        "a fresh host's start to serving",
        fresh.as_secs_f64() * 1e3,
        "",
    );

    let pid = nix::unistd::Pid::from_raw(host.id() as i32);
    let hup = Instant::now();
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    let served = serving(&dir, &mut host, 3) - hup;
    let listed = all_running(&mut client, live) - hup;
    row(
        &format!(
            "handover {count}: SIGHUP upgrade until the new image's task_list shows every task running"
        ),
        listed.as_secs_f64() * 1e3,
        "a fresh host's start to serving",
        fresh.as_secs_f64() * 1e3,
        target,
    );
    row(
        "  of which until the new image serves",
        served.as_secs_f64() * 1e3,
        "a fresh host's start to serving",
        fresh.as_secs_f64() * 1e3,
        "",
    );
    if asked == 1000 {
        upgrade_wait(&mut client, &mut host, &dir, &count);
    }
    drop(client);
    stop(&mut host);
    // For a look at the phases (the log's timestamps): TASKHOST_HANDOVER_LOG=DIR keeps the log.
    if let Some(keep) = std::env::var_os("TASKHOST_HANDOVER_LOG") {
        let _ = std::fs::copy(
            dir.join("host.log"),
            Path::new(&keep).join(format!("host-{n}.log")),
        );
    }
}

/// The client's longest wait across an upgrade (the host's fourth image to serve), against the
/// same span without one.
fn upgrade_wait(client: &mut bridge::Bridge, host: &mut Child, dir: &Path, count: &str) {
    let quiet = longest_wait(client, Duration::from_secs(2));
    let pid = nix::unistd::Pid::from_raw(host.id() as i32);
    let upgrader = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGHUP).expect("SIGHUP");
    });
    let across = longest_wait(client, Duration::from_secs(2));
    upgrader.join().expect("the upgrade");
    serving(dir, host, 4);
    row(
        &format!("upgrade (SIGHUP) with {count} tasks: a polling client's longest wait"),
        across.as_secs_f64() * 1e3,
        "its longest wait without an upgrade",
        quiet.as_secs_f64() * 1e3,
        "",
    );
}
