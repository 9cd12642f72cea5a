//! "200 principals" (issue 47, item 1) for `scripts/bench`, against the real release `taskhost`
//! serving `--listen http://127.0.0.1:0`: 200 clients, each its own principal (token) and
//! connection in a legacy session, each with its own chatty background task (a line every 10 ms),
//! each calling ten times a second:
//! - a span of no calls (what the tasks alone cost the host's CPU), then a span of `ping`s only (two
//!   a tick), the baseline of the host's CPU per 1,000 calls beyond the tasks' own;
//! - then the span of the issue: a non-blocking `task_output` and a `ping` each tick, each call's
//!   latency kept: p50 and p99 of `task_output` against those of `ping` (the framework's floor),
//!   and every read checked to hold its own task's lines, in order, and nothing else;
//! - before both, the resident memory an idle legacy session costs: 1,000 sessions initialized,
//!   then left idle, the host's RSS growth over them.
//!
//! `TASKHOST_PRINCIPALS_CLIENTS` (200), `TASKHOST_PRINCIPALS_SECS` (60, the `ping` span a quarter of
//! it), `TASKHOST_PRINCIPALS_SESSIONS` (1,000) and `TASKHOST_PRINCIPALS_PARK_MS` (the host's
//! `[http] session_park_ms`, its default of 30 s unless set) make a quick run.

mod common;

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use common::http::{Conn, Host, cpu_ms, start_with, threads_and_rss, token};
use serde_json::json;

/// How many calls a client makes a second.
const TICKS_PER_SEC: u32 = 10;

/// The run's size, from the environment.
#[derive(Clone, Copy)]
struct Load {
    clients: usize,
    span: Duration,
    ping_span: Duration,
    sessions: usize,
    /// `[http] session_park_ms`, the host's default unless set.
    park: Duration,
    park_set: bool,
}

impl Load {
    fn from_env() -> Self {
        let var = |name: &str, default: u64| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        let secs = var("TASKHOST_PRINCIPALS_SECS", 60);
        Self {
            clients: var("TASKHOST_PRINCIPALS_CLIENTS", 200) as usize,
            span: Duration::from_secs(secs),
            ping_span: Duration::from_secs(secs.div_ceil(4)),
            sessions: var("TASKHOST_PRINCIPALS_SESSIONS", 1_000) as usize,
            park: Duration::from_millis(var("TASKHOST_PRINCIPALS_PARK_MS", 30_000)),
            park_set: std::env::var_os("TASKHOST_PRINCIPALS_PARK_MS").is_some(),
        }
    }
}

/// What one client saw in the span of the issue, and the calls it made in each span.
#[derive(Default)]
struct Seen {
    reads: usize,
    wrong: usize,
    /// Reads that skipped lines and said output was dropped from memory.
    lossy: usize,
    output_us: Vec<f64>,
    ping_us: Vec<f64>,
    ping_span_calls: usize,
    span_calls: usize,
    failed: bool,
}

/// A line every 10 ms, numbered, tagged with its client, with no fork per line (a `read` with a
/// timeout on a pipe nobody writes is the sleep); it stops by itself well after the run.
fn chatty(client: usize, stop_after: Duration) -> String {
    format!(
        "exec 3<> <(:); n=0; while [ $SECONDS -lt {} ]; do echo \"c{client} $n\"; n=$((n+1)); read -t 0.01 -u 3; done",
        stop_after.as_secs()
    )
}

/// How a read compares with what its client's task wrote.
#[derive(PartialEq)]
enum Read {
    /// The task's lines, numbered on from the last read's.
    Exact,
    /// The task's lines with some skipped, and the read says output was dropped from memory.
    Lossy,
    /// Anything else: another task's lines, a line out of order or cut, a loss not stated.
    Wrong,
}

/// How `read` compares with client `client`'s lines numbered on from `next` (which it advances),
/// besides what the host adds (its status and a notice of a loss, bracketed; `(no new output)`).
fn own_lines(read: &str, client: usize, next: &mut u64) -> Read {
    let tag = format!("c{client} ");
    let said_lossy = read.contains("[some output was dropped from memory");
    let mut seen = Read::Exact;
    let written = read
        .lines()
        .filter(|l| !l.starts_with('[') && *l != "(no new output)");
    for (i, line) in written.enumerate() {
        let n = line.strip_prefix(&tag).and_then(|n| n.parse::<u64>().ok());
        match n {
            Some(n) if n == *next => {}
            Some(n) if n > *next && said_lossy => seen = Read::Lossy,
            // What is kept in memory is a number of bytes: after a loss, the first line may be
            // the end of one whose start was dropped.
            None if i == 0 && said_lossy => {
                seen = Read::Lossy;
                continue;
            }
            _ => return Read::Wrong,
        }
        *next = n.map_or(*next, |n| n + 1);
    }
    seen
}

/// Calls `f` on tick `k` of a span, each tick `TICKS_PER_SEC`-th of a second from `start` plus
/// `offset`, until `span` passes.
fn each_tick(start: Instant, offset: Duration, span: Duration, mut f: impl FnMut(u32)) {
    let tick = Duration::from_secs(1) / TICKS_PER_SEC;
    let mut k = 0;
    while offset + tick * k < span {
        let at = start + offset + tick * k;
        std::thread::sleep(at.saturating_duration_since(Instant::now()));
        f(k);
        k += 1;
    }
}

/// Times one call, in microseconds.
fn timed(f: impl FnOnce() -> String) -> (f64, String) {
    let t = Instant::now();
    let out = f();
    (t.elapsed().as_secs_f64() * 1e6, out)
}

/// One client: its session and task, then three spans between the barriers (the main thread
/// reads the host's CPU at each): no calls, pings only, `task_output` and `ping`.
fn client(i: usize, port: u16, token: &str, load: Load, gate: &Barrier) -> Seen {
    let mut seen = Seen::default();
    let started = catch_unwind(AssertUnwindSafe(|| {
        let mut conn = Conn::legacy(port, token);
        let stop_after = (load.span + load.ping_span) * 2 + Duration::from_secs(120);
        let id = conn.start(
            "bash",
            json!({"command": chatty(i, stop_after), "run_in_background": true}),
        );
        (conn, id)
    }));
    gate.wait();
    let Ok((mut conn, id)) = started else {
        seen.failed = true;
        for _ in 0..3 {
            gate.wait();
        }
        return seen;
    };
    // A span of no calls: what the chatty tasks alone cost the host.
    std::thread::sleep(load.ping_span);
    gate.wait();
    let offset = Duration::from_secs(1) / TICKS_PER_SEC * i as u32 / load.clients as u32;
    let pinged = catch_unwind(AssertUnwindSafe(|| {
        each_tick(Instant::now(), offset, load.ping_span, |_| {
            conn.request("ping", json!({}));
            conn.request("ping", json!({}));
            seen.ping_span_calls += 2;
        });
    }));
    gate.wait();
    let mut next = 0;
    let polled = catch_unwind(AssertUnwindSafe(|| {
        each_tick(Instant::now(), offset, load.span, |k| {
            let read = |conn: &mut Conn| timed(|| conn.call("task_output", json!({"task_id": id})));
            let ping = |conn: &mut Conn| timed(|| conn.request("ping", json!({})).to_string()).0;
            let ((read_us, text), ping_us) = if k % 2 == 0 {
                let r = read(&mut conn);
                (r, ping(&mut conn))
            } else {
                let p = ping(&mut conn);
                (read(&mut conn), p)
            };
            seen.reads += 1;
            match own_lines(&text, i, &mut next) {
                Read::Exact => {}
                Read::Lossy => seen.lossy += 1,
                Read::Wrong => {
                    if seen.wrong == 0 {
                        eprintln!("client {i}: a read not its task's lines in order: {text:?}");
                    }
                    seen.wrong += 1;
                }
            }
            seen.output_us.push(read_us);
            seen.ping_us.push(ping_us);
            seen.span_calls += 2;
        });
    }));
    gate.wait();
    seen.failed = pinged.is_err() || polled.is_err();
    let _ = catch_unwind(AssertUnwindSafe(|| {
        conn.call("task_kill", json!({"task_id": id}))
    }));
    seen
}

/// The value at percentile `p` of `v`, sorted in place.
fn percentile(v: &mut [f64], p: usize) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get((v.len() * p / 100).min(v.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0.0)
}

/// Prints one row of `scripts/bench`; `extra` is more of its JSON fields (`"target_ratio":2,`).
fn row(name: &str, unit: &str, value: f64, baseline_name: &str, baseline: f64, extra: &str) {
    println!(
        "{{\"name\":\"{name}\",\"unit\":\"{unit}\",\"value\":{value:.2},\"baseline_name\":\"{baseline_name}\",\"baseline\":{baseline:.2},{extra}\"ratio\":{:.2}}}",
        value / baseline
    );
}

/// Opens `load.sessions` legacy sessions across the principals, each initialized and then left
/// idle (its connection closed), and prints the host's RSS growth per session right after, and
/// once they are parked and the host gave the memory back.
fn idle_sessions(host: &Host, tokens: &[String], load: Load) {
    let pid = host.child.id();
    let open = |n: usize| {
        for k in 0..n {
            drop(Conn::legacy(host.port, &tokens[k % tokens.len()]));
        }
    };
    // The first sessions grow the runtime's pools and the allocator's arenas, once; they are
    // parked and trimmed before the count starts.
    open(tokens.len().min(50));
    std::thread::sleep(load.park + Duration::from_secs(13));
    let (_, before) = threads_and_rss(pid);
    open(load.sessions);
    let (_, live) = threads_and_rss(pid);
    // Parked after `park` (checked every quarter of it), the memory trimmed every 10 s.
    std::thread::sleep(load.park + Duration::from_secs(13));
    let (_, idle) = threads_and_rss(pid);
    let per = |rss: u64| rss.saturating_sub(before) as f64 / load.sessions.max(1) as f64;
    row(
        &format!(
            "200 principals: host RSS per idle legacy session ({} sessions initialized, then idle {} s; RSS {} -> {} MiB, {} MiB right after opening them)",
            load.sessions,
            (load.park + Duration::from_secs(13)).as_secs(),
            before / 1024,
            idle / 1024,
            live / 1024
        ),
        "KiB",
        per(idle),
        "the same right after opening them",
        per(live),
        "\"target\":\"<= 16 KiB\",",
    );
}

/// The host's CPU time (ms) in a span, with the span's length.
#[derive(Clone, Copy)]
struct Cpu {
    ms: f64,
    secs: f64,
}

impl Cpu {
    /// What is left of this span's CPU once `quiet`'s rate (the tasks' own cost) is taken out.
    fn beyond(self, quiet: Cpu) -> f64 {
        self.ms - quiet.ms / quiet.secs.max(1e-9) * self.secs
    }
}

/// Runs the clients through the three spans; what they saw, the host's CPU in each span and its
/// RSS (KiB) at the end of the last.
fn run_clients(host: &Host, tokens: Vec<String>, load: Load) -> (Vec<Seen>, [Cpu; 3], u64) {
    let pid = host.child.id();
    let gate = Arc::new(Barrier::new(load.clients + 1));
    let handles: Vec<_> = tokens
        .into_iter()
        .enumerate()
        .map(|(i, token)| {
            let (port, gate) = (host.port, gate.clone());
            std::thread::spawn(move || client(i, port, &token, load, &gate))
        })
        .collect();
    gate.wait();
    let mut mark = (cpu_ms(pid), Instant::now());
    let spans = [(); 3].map(|()| {
        gate.wait();
        let now = (cpu_ms(pid), Instant::now());
        let span = Cpu {
            ms: now.0 - mark.0,
            secs: now.1.duration_since(mark.1).as_secs_f64(),
        };
        mark = now;
        span
    });
    let (_, rss) = threads_and_rss(pid);
    let seen = handles
        .into_iter()
        .map(|h| {
            h.join().unwrap_or_else(|_| Seen {
                failed: true,
                ..Seen::default()
            })
        })
        .collect();
    (seen, spans, rss)
}

fn report(load: Load, seen: Vec<Seen>, [quiet, pings, span]: [Cpu; 3], rss: (u64, u64)) {
    let sum = |f: fn(&Seen) -> usize| seen.iter().map(f).sum::<usize>();
    let (reads, wrong, failed) = (sum(|s| s.reads), sum(|s| s.wrong), sum(|s| s.failed.into()));
    let lossy = sum(|s| s.lossy);
    let (mut output_us, mut ping_us): (Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new());
    for s in &seen {
        output_us.extend(&s.output_us);
        ping_us.extend(&s.ping_us);
    }
    let what = format!(
        "{} clients, each its own token and chatty task, {TICKS_PER_SEC} polls/s for {} s; {reads} reads, {wrong} wrong, {lossy} with a loss they state; {failed} clients failed",
        load.clients,
        load.span.as_secs()
    );
    for (p, extra) in [(50, ""), (99, "\"target_ratio\":2,")] {
        let read = percentile(&mut output_us, p);
        let ping = percentile(&mut ping_us, p);
        row(
            &format!("200 principals: task_output p{p} over HTTP, non-blocking ({what})"),
            "us",
            read,
            &format!("MCP ping p{p}, the same clients in the same span"),
            ping,
            extra,
        );
    }
    let per_k = |cpu: f64, calls: usize| cpu * 1000.0 / calls.max(1) as f64;
    row(
        &format!(
            "200 principals: host CPU per 1,000 calls, task_output + ping, beyond the tasks' own {:.0} ms/s ({what}; {:.0} ms with it)",
            quiet.ms / quiet.secs.max(1e-9),
            per_k(span.ms, sum(|s| s.span_calls))
        ),
        "ms",
        per_k(span.beyond(quiet), sum(|s| s.span_calls)),
        &format!(
            "the same per 1,000 pings, {} s of pings only ({:.0} ms with the tasks' own)",
            pings.secs.round(),
            per_k(pings.ms, sum(|s| s.ping_span_calls))
        ),
        per_k(pings.beyond(quiet), sum(|s| s.ping_span_calls)),
        "",
    );
    row(
        &format!("200 principals: host RSS at the end of the span ({what})"),
        "MiB",
        rss.1 as f64 / 1024.0,
        "host RSS before the clients started their tasks",
        rss.0 as f64 / 1024.0,
        "",
    );
}

fn main() {
    let load = Load::from_env();
    let dir = common::scratch("principals");
    // The clients keep their connections through the span of no calls (no header timeout).
    let mut config = format!(
        "[tasks]\nmax_concurrent_tasks_per_owner = 4\n\n[http]\nmax_sessions_per_principal = {}\nheader_timeout_ms = 600000\n",
        load.sessions + 64
    );
    if load.park_set {
        config.push_str(&format!("session_park_ms = {}\n", load.park.as_millis()));
    }
    let host = start_with(dir.path(), &config, &[]);
    let tokens: Vec<String> = (0..load.clients)
        .map(|i| token(&host, &format!("bench-principal-{i}")))
        .collect();
    idle_sessions(&host, &tokens, load);
    let (_, rss_before) = threads_and_rss(host.child.id());
    let (seen, cpu, rss_after) = run_clients(&host, tokens, load);
    report(load, seen, cpu, (rss_before, rss_after));
}
