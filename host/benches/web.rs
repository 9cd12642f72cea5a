//! Web view figures for `scripts/bench`, against the real release `taskhost` serving
//! `--listen http://127.0.0.1:0` with `tasks`, `bash` and `web`, looked at by a real headless
//! Chromium (`taskhost_tests::webdriver`; skipped, saying so, when none is installed):
//! - from a task's write to its text in the page: the task prints numbered lines, each with the
//!   time it wrote it (`date +%s%N`), every 200 ms; the page notes when each first shows (a
//!   `MutationObserver` on the output); median and worst of 40 lines;
//! - a page load with 10,000 tasks: from the navigation to the page counting them all, and the
//!   host's part of it (the stream's first `tasks` event, read without a browser);
//! - `task_output` round trips (2026-07-28, non-blocking) while 100 tasks stream output and a page
//!   follows one of them, and while 100 viewers (event streams without a browser) each follow one,
//!   against the same round trip on the idle host.

mod common;

use std::time::{Duration, Instant};

use common::http::{Conn, start_with, token};
use serde_json::json;
use taskhost_tests::webdriver::Browser;

/// The median and the largest of `values`.
fn median_max(mut values: Vec<f64>) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let median = values.get(values.len() / 2).copied().unwrap_or(f64::NAN);
    (median, values.last().copied().unwrap_or(f64::NAN))
}

/// The mean `task_output` round trip in microseconds, best of three rounds of 500.
fn read_round_trip(conn: &mut Conn, id: &str) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        for _ in 0..500 {
            conn.call("task_output", json!({"task_id": id}));
        }
        best = best.min(t.elapsed().as_secs_f64() * 1e6 / 500.0);
    }
    best
}

/// Loads the page afresh, signed in with the link `/#token=TOKEN` (from `about:blank`: a link that
/// differs from the page shown only in its fragment would not load it again).
fn load(browser: &Browser, origin: &str, token: &str) {
    browser.open("about:blank");
    browser.open(&format!("{origin}/#token={token}"));
}

fn write_to_page(browser: &Browser, port: u16, origin: &str, token: &str) {
    let conn = &mut Conn::open(port, token, true);
    let id = conn.start("bash", json!({"command":
        "sleep 1; for i in $(seq 1 40); do echo \"mark $i $(date +%s%N)\"; sleep 0.2; done; sleep 5",
        "run_in_background": true}));
    load(browser, origin, token);
    browser.wait_for(
        Duration::from_secs(20),
        "return document.querySelector('tr[data-id=\"' + arguments[0] + '\"]') !== null;",
        &[json!(id)],
    );
    browser.click(&format!("tr[data-id=\"{id}\"]"));
    browser.run(
        "window.seen = {}; const pre = document.getElementById('tail');
         new MutationObserver(() => { const now = performance.timeOrigin + performance.now();
           for (const m of pre.textContent.matchAll(/mark (\\d+) (\\d+)/g)) {
             if (!(m[1] in window.seen)) window.seen[m[1]] = now - Number(m[2]) / 1e6; } })
           .observe(pre, {childList: true, characterData: true, subtree: true}); return true;",
        &[],
    );
    let all = browser.wait_for(
        Duration::from_secs(60),
        "return Object.keys(window.seen).length >= 38 ? window.seen : null;",
        &[],
    );
    let latencies: Vec<f64> = all
        .and_then(|v| v.as_object().cloned())
        .map(|o| o.values().filter_map(serde_json::Value::as_f64).collect())
        .unwrap_or_default();
    let n = latencies.len();
    let (median, max) = median_max(latencies);
    println!(
        "{{\"name\":\"a task's write to its text in the page, through Chromium (median of {n} lines; worst {max:.0} ms)\",\"unit\":\"ms\",\"value\":{median:.1},\"baseline_name\":\"(target 100 ms)\",\"baseline\":100,\"ratio\":{:.2}}}",
        median / 100.0
    );
}

fn page_with_many(browser: &Browser, port: u16, origin: &str, token: &str, n: usize) {
    let conn = &mut Conn::open(port, token, true);
    for _ in 0..n {
        conn.call(
            "bash",
            json!({"command": "true", "run_in_background": true}),
        );
    }
    let shows = "const c = document.getElementById('counts'); const m = c && /of (\\d+) tasks/.exec(c.textContent); return m !== null && Number(m[1]) >= arguments[0] && document.querySelectorAll('#tasks tbody tr').length > 0;";
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        load(browser, origin, token);
        browser.wait_for(Duration::from_secs(60), shows, &[json!(n)]);
        best = best.min(t.elapsed().as_secs_f64() * 1e3);
    }
    // The host's part of it: the stream's whole first `tasks` event, without a browser.
    let mut firsts: Vec<f64> = (0..3)
        .map(|_| common::http::first_page(port, token).0 * 1e3)
        .collect();
    firsts.sort_by(f64::total_cmp);
    let host_ms = firsts[1];
    println!(
        "{{\"name\":\"the page loaded with {n} tasks, navigation to every task counted and the first page drawn (best of 3)\",\"unit\":\"ms\",\"value\":{best:.0},\"baseline_name\":\"(target 1000 ms)\",\"baseline\":1000,\"ratio\":{:.2}}}",
        best / 1000.0
    );
    println!(
        "{{\"name\":\"of which the host's first tasks event with {n} tasks, GET /api/events to its end (median of 3)\",\"unit\":\"ms\",\"value\":{host_ms:.0},\"baseline_name\":\"the page load\",\"baseline\":{best:.0},\"ratio\":{:.2}}}",
        host_ms / best
    );
}

fn reads_under_streaming(browser: &Browser, port: u16, origin: &str, token: &str) {
    let conn = &mut Conn::open(port, token, true);
    let quiet = conn.start(
        "bash",
        json!({"command": "sleep 600", "run_in_background": true}),
    );
    let idle = read_round_trip(conn, &quiet);
    // One process per task writing a line every 10 ms (perl: a shell loop would spawn processes
    // for each line, and measure the machine's fork rate instead of the host).
    let streams: Vec<String> = (0..100)
        .map(|i| {
            let command = format!(
                "exec perl -e '$|=1; for (my $n = 0; ; $n++) {{ print \"stream {i} line $n\\n\"; select(undef, undef, undef, 0.01) }}'"
            );
            conn.start(
                "bash",
                json!({"command": command, "run_in_background": true}),
            )
        })
        .collect();
    let streaming = read_round_trip(conn, &quiet);
    load(browser, origin, token);
    browser.wait_for(
        Duration::from_secs(20),
        "return document.querySelector('tr[data-id=\"' + arguments[0] + '\"]') !== null;",
        &[json!(streams[0])],
    );
    browser.click(&format!("tr[data-id=\"{}\"]", streams[0]));
    // A keep-alive connection idle for the host's header timeout (10 s) is closed: a fresh one.
    let mut conn = Conn::open(port, token, true);
    let watched = read_round_trip(&mut conn, &quiet);
    for id in streams.iter().chain([&quiet]) {
        conn.call("task_kill", json!({"task_id": id}));
    }
    println!(
        "{{\"name\":\"task_output round trip over HTTP while 100 tasks stream output (a line every 10 ms each) and a page follows one (without the page: {streaming:.0} us)\",\"unit\":\"us\",\"value\":{watched:.1},\"baseline_name\":\"the same on the idle host\",\"baseline\":{idle:.1},\"ratio\":{:.2}}}",
        watched / idle
    );
}

/// A viewer that follows task `id`'s output on the page's event stream as `token`, without a
/// browser: a thread reading the stream until `stop`, counted in `tailing` once the task's output
/// reached it; the bytes it got.
fn follow(
    port: u16,
    token: &str,
    id: &str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    tailing: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> std::thread::JoinHandle<usize> {
    use std::io::{Read, Write};
    let head = format!(
        "GET /api/events?watch={id} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\nAuthorization: Bearer {token}\r\n\r\n"
    );
    std::thread::spawn(move || {
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
            return 0;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
        if stream.write_all(head.as_bytes()).is_err() {
            return 0;
        }
        let (mut got, mut buf, mut counted) = (0, [0u8; 16384], false);
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    got += n;
                    if !counted && buf[..n].windows(11).any(|w| w == b"event: tail") {
                        counted = true;
                        tailing.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    }
                }
                Err(_) => {}
            }
        }
        got
    })
}

/// `task_output` round trips while 100 viewers (10 principals, 10 each: a principal holds at most
/// 16 streams) each follow a task that writes a line every 10 ms, against the idle host.
fn reads_under_viewers(port: u16, host: &common::http::Host) {
    let quiet_token = token(host, "bench-quiet");
    let conn = &mut Conn::open(port, &quiet_token, true);
    let quiet = conn.start(
        "bash",
        json!({"command": "sleep 600", "run_in_background": true}),
    );
    let idle = read_round_trip(conn, &quiet);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let tailing = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut viewers = Vec::new();
    let mut tasks = Vec::new();
    for p in 0..10 {
        let principal = token(host, &format!("bench-viewer-{p}"));
        let mut own = Conn::open(port, &principal, true);
        for i in 0..10 {
            let command = format!(
                "exec perl -e '$|=1; for (my $n = 0; ; $n++) {{ print \"viewer {p}.{i} line $n\\n\"; select(undef, undef, undef, 0.01) }}'"
            );
            let id = own.start(
                "bash",
                json!({"command": command, "run_in_background": true}),
            );
            viewers.push(follow(port, &principal, &id, stop.clone(), tailing.clone()));
            tasks.push((principal.clone(), id));
        }
    }
    // Measured once every viewer is following its task's output.
    let deadline = Instant::now() + Duration::from_secs(60);
    while tailing.load(std::sync::atomic::Ordering::Relaxed) < viewers.len()
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let conn = &mut Conn::open(port, &quiet_token, true);
    let watched = read_round_trip(conn, &quiet);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let bytes: usize = viewers.into_iter().map(|v| v.join().unwrap_or(0)).sum();
    for (principal, id) in &tasks {
        Conn::open(port, principal, true).call("task_kill", json!({"task_id": id}));
    }
    conn.call("task_kill", json!({"task_id": quiet}));
    println!(
        "{{\"name\":\"task_output round trip over HTTP while 100 viewers follow 100 tasks writing a line every 10 ms each ({} KiB of events streamed)\",\"unit\":\"us\",\"value\":{watched:.1},\"baseline_name\":\"the same on the idle host\",\"baseline\":{idle:.1},\"ratio\":{:.2}}}",
        bytes / 1024,
        watched / idle
    );
}

fn main() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let dir = common::scratch("web");
    let plugins = [
        "taskhost_plugin_tasks",
        "taskhost_plugin_bash",
        "taskhost_plugin_web",
    ]
    .map(|p| common::profile_dir().join(format!("lib{p}.so")));
    let mut args = vec![];
    for p in &plugins {
        args.push("--plugin".to_owned());
        args.push(p.display().to_string());
    }
    let host = start_with(
        dir.path(),
        "[tasks]\nmax_concurrent_tasks_per_owner = 20000\n",
        &args,
    );
    let origin = format!("http://127.0.0.1:{}", host.port);
    let token = token(&host, "bench-web");
    // `TASKHOST_WEB_ONLY=page-load` measures the page load alone.
    if std::env::var("TASKHOST_WEB_ONLY").as_deref() != Ok("page-load") {
        write_to_page(&browser, host.port, &origin, &token);
        reads_under_streaming(&browser, host.port, &origin, &token);
        reads_under_viewers(host.port, &host);
    }
    page_with_many(&browser, host.port, &origin, &token, 10_000);
}
