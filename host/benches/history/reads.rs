//! Retention under live reads: a client calls `task_output` back to back on a task that writes a
//! line every 10 ms while the host is upgraded in place onto a config that expires every record;
//! the calls made while the new image's retention ran against the same calls once it is done.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;

use super::common::http::Conn;
use super::{Host, config, field, row, wait_log};

/// What one retention measured.
pub struct Retention {
    /// The retention's own time, as the new image's log says it.
    pub ms: f64,
    /// The records it expired.
    pub expired: f64,
    /// The p99 of the calls made between the new image's serving and the retention's end, in µs
    /// (a call under way at its serving timed from then).
    pub p99_during: f64,
    /// How many calls those were.
    pub calls_during: usize,
    /// The p99 of the same calls over 2 s once it is done, in µs.
    pub p99_after: f64,
    /// The p99 of the same calls over 2 s before the upgrade, in µs.
    pub p99_before: f64,
}

/// One call: when it started and how long it took (across a reconnection).
type Call = (Instant, Duration);

/// Calls `task_output` on `id` as `token` back to back until `stop`; a call whose connection
/// failed (the host went away) is made again on a new one, timed from its first try.
fn poll(port: u16, token: String, id: String, stop: Arc<AtomicBool>) -> Vec<Call> {
    let mut calls = Vec::new();
    let mut conn = Conn::open(port, &token, true);
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let args = json!({"name": "task_output", "arguments": {"task_id": id}});
        loop {
            match conn.try_request("tools/call", args.clone()) {
                Ok(answer) if answer.get("result").is_some() => break,
                _ => {
                    std::thread::sleep(Duration::from_millis(1));
                    conn = Conn::open(port, &token, true);
                }
            }
        }
        calls.push((t, t.elapsed()));
    }
    calls
}

/// The p99 of `calls`' times in µs.
fn p99(calls: &[Call]) -> f64 {
    let mut times: Vec<f64> = calls.iter().map(|c| c.1.as_secs_f64() * 1e6).collect();
    times.sort_by(f64::total_cmp);
    let at = (times.len() * 99).div_ceil(100).saturating_sub(1);
    times.get(at).copied().unwrap_or(f64::NAN)
}

/// Starts polling on a thread; its stop switch and its calls.
fn start_polling(
    port: u16,
    token: &str,
    id: &str,
) -> (Arc<AtomicBool>, std::thread::JoinHandle<Vec<Call>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let (token, id, flag) = (token.to_owned(), id.to_owned(), stop.clone());
    (
        stop,
        std::thread::spawn(move || poll(port, token, id, flag)),
    )
}

/// The p99 of polling for 2 s.
fn idle_p99(port: u16, token: &str, id: &str) -> f64 {
    let (stop, poller) = start_polling(port, token, id);
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    p99(&poller.join().expect("the poller"))
}

/// Lowers `keep_days` to 1 (every record ended 3 days ago) and upgrades `host` in place while a
/// live task is read back to back.
pub fn retention_under_reads(dir: &Path, host: &Host, token: &str) -> Retention {
    let mut conn = Conn::open(host.port, token, true);
    let command = "exec perl -e '$|=1; for (my $n = 0; ; $n++) { print \"line $n\\n\"; select(undef, undef, undef, 0.01) }'";
    let id = conn.start(
        "bash",
        json!({"command": command, "run_in_background": true}),
    );
    let p99_before = idle_p99(host.port, token, &id);
    config(dir, 1);
    let (stop, poller) = start_polling(host.port, token, &id);
    std::thread::sleep(Duration::from_millis(200));
    host.signal(nix::sys::signal::Signal::SIGHUP);
    let (serving, _) = wait_log(dir, "taskhost::serve: serving", 2);
    let (done, line) = wait_log(dir, "settled tasks' output expired", 1);
    stop.store(true, Ordering::Relaxed);
    let calls = poller.join().expect("the poller");
    let during: Vec<Call> = calls
        .into_iter()
        .filter(|c| c.0 + c.1 >= serving && c.0 <= done)
        .map(|(at, took)| {
            let from = at.max(serving);
            (from, at + took - from)
        })
        .collect();
    let p99_after = idle_p99(host.port, token, &id);
    let mut conn = Conn::open(host.port, token, true);
    conn.call("task_kill", json!({"task_id": id}));
    Retention {
        ms: field(&line, "ms"),
        expired: field(&line, "expired"),
        p99_during: p99(&during),
        calls_during: during.len(),
        p99_after,
        p99_before,
    }
}

/// Prints the retention's rows: `big`'s beside `base`'s (named `on`), the records `n`.
pub fn report(n: &str, base: &Retention, big: &Retention, on: &str) {
    row(
        &format!(
            "{n} records: retention expiring them after an upgrade onto a lower keep_days ({} expired)",
            big.expired
        ),
        "ms",
        big.ms,
        on,
        base.ms,
        "< 5000 ms",
    );
    row(
        &format!(
            "{n} records: task_output p99 on a live task while retention expires them ({} calls; p99 before the upgrade {:.0} us)",
            big.calls_during, big.p99_before
        ),
        "us",
        big.p99_during,
        "the same once it is done",
        big.p99_after,
        "ratio <= 2",
    );
    row(
        &format!(
            "{} records: task_output p99 on a live task while retention expires them ({} calls)",
            base.expired, base.calls_during
        ),
        "us",
        base.p99_during,
        "the same once it is done",
        base.p99_after,
        "",
    );
}
