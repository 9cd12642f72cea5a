//! Process figures for `scripts/bench`, through the real bash and tasks plugins (release builds):
//! 1 GiB of output through one background task read by polling `task_output`, against
//! `head -c 1G /dev/zero | cat > /dev/null` in the same run, with the host's RSS growth; 1 GiB of
//! lines through a task under a terminal (`tty: true`) against the same through a pipe task; and
//! 1,000 concurrent background `sleep` tasks: time to start all, host threads, RSS per task.
//! `cargo bench -p taskhost --bench process -- starts` runs only the named figures (`output`,
//! `tty`, `starts`).

mod common;

use std::time::Instant;

use common::status_kib;
use serde_json::json;

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

fn main() {
    let dir = common::scratch("process");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let host = common::bash_host(&rt, &dir, 10_000);
    let call = |tool: &str, args: serde_json::Value| -> String {
        rt.block_on(host.plugins().call_tool(tool, "", &args))
            .expect("call")
            .text
    };
    // A background start: the task its result names as data.
    let start = |args: serde_json::Value| -> String {
        let out = rt
            .block_on(host.plugins().call_tool("bash", "", &args))
            .expect("call");
        out.started
            .unwrap_or_else(|| panic!("not started: {}", out.text))
    };
    // `cargo bench --bench process -- starts` (or `output`, `tty`) runs only those figures.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let wanted = |figure: &str| only.is_empty() || only.iter().any(|o| o == figure);
    if wanted("output") {
        output_figures(&call, &start);
    }
    if wanted("tty") {
        tty_figures(&call, &start);
    }
    if wanted("starts") {
        let starts = start_figures(&call);
        rt.block_on(host.shutdown());
        report_starts(starts);
    } else {
        rt.block_on(host.shutdown());
    }
}

/// 1 GiB through one polled background task, against the same bytes through a plain pipe.
fn output_figures(call: &Call<'_>, start: &Start<'_>) {
    // Baseline: the same bytes through a plain pipe.
    let t = Instant::now();
    let ok = std::process::Command::new("bash")
        .args(["-c", "head -c 1G /dev/zero | cat > /dev/null"])
        .status()
        .expect("pipe")
        .success();
    assert!(ok);
    let pipe_s = t.elapsed().as_secs_f64();

    let zeros = polled(
        call,
        start,
        json!({"command": "head -c 1G /dev/zero", "run_in_background": true}),
    );
    let gib = (1u64 << 30) as f64;
    let (ours, base) = (gib / zeros.seconds / 1e6, gib / pipe_s / 1e6);
    println!(
        "{{\"name\":\"1 GiB through a polled bash task\",\"unit\":\"MB/s\",\"value\":{ours:.0},\"baseline_name\":\"head -c 1G | cat\",\"baseline\":{base:.0},\"ratio\":{:.2},\"target\":\">= 0.5\"}}",
        ours / base
    );
    report_growth("", &zeros);
}

/// 1 GiB of lines through a polled tty task, against a pipe task and `script(1)`.
fn tty_figures(call: &Call<'_>, start: &Start<'_>) {
    let gib = (1u64 << 30) as f64;
    // Lines, so a terminal has something to draw: 64-byte lines, 1 GiB in all.
    let lines = "yes 0123456789abcdef0123456789abcdef0123456789abcdef012345678901 | head -c 1G";
    let pipe = polled(
        call,
        start,
        json!({"command": lines, "run_in_background": true}),
    );
    let tty = polled(
        call,
        start,
        json!({"command": lines, "run_in_background": true, "tty": true}),
    );
    let (tty_mb, pipe_mb) = (gib / tty.seconds / 1e6, gib / pipe.seconds / 1e6);
    println!(
        "{{\"name\":\"1 GiB of lines through a polled tty task\",\"unit\":\"MB/s\",\"value\":{tty_mb:.0},\"baseline_name\":\"the same through a pipe task\",\"baseline\":{pipe_mb:.0},\"ratio\":{:.2}}}",
        tty_mb / pipe_mb
    );
    // What the kernel's pseudo-terminal itself carries: script(1) reading the same command's terminal.
    let t = Instant::now();
    let ok = std::process::Command::new("script")
        .args(["-qc", lines, "/dev/null"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        let script_mb = gib / t.elapsed().as_secs_f64() / 1e6;
        println!(
            "{{\"name\":\"  the same tty task\",\"unit\":\"MB/s\",\"value\":{tty_mb:.0},\"baseline_name\":\"script(1) through a pty\",\"baseline\":{script_mb:.0},\"ratio\":{:.2}}}",
            tty_mb / script_mb
        );
    }
    report_growth("tty ", &tty);
}

/// A tool call: its text.
type Call<'a> = dyn Fn(&str, serde_json::Value) -> String + 'a;
/// A background start of `bash`: the task it started.
type Start<'a> = dyn Fn(serde_json::Value) -> String + 'a;

/// One polled task's run: seconds to settle, text delivered to the reader, RSS before and at peak.
struct Polled {
    seconds: f64,
    delivered: usize,
    rss_before: u64,
    rss_peak: u64,
}

/// Starts a background task with `args` and reads it without waiting until it settles.
fn polled(call: &Call<'_>, start: &Start<'_>, args: serde_json::Value) -> Polled {
    let rss_before = status_kib("VmRSS:");
    let mut rss_peak = rss_before;
    let t = Instant::now();
    let id = start(args);
    let mut delivered = 0usize;
    loop {
        let text = call("task_output", json!({"task_id": id}));
        let (body, status) = text.rsplit_once("[status: ").expect("status line");
        if body != "(no new output)\n" {
            delivered += body.len();
        }
        rss_peak = rss_peak.max(status_kib("VmRSS:"));
        if !status.starts_with("running") {
            break;
        }
    }
    Polled {
        seconds: t.elapsed().as_secs_f64(),
        delivered,
        rss_before,
        rss_peak,
    }
}

/// The host's RSS growth during a polled run.
fn report_growth(what: &str, run: &Polled) {
    let growth = run.rss_peak.saturating_sub(run.rss_before);
    println!(
        "{{\"name\":\"  host RSS growth during the {what}run (delivered {} bytes to the reader)\",\"unit\":\"MiB\",\"value\":{:.1},\"baseline_name\":\"RSS before\",\"baseline\":{:.1},\"ratio\":{:.2},\"target\":\"< 64 MiB\"}}",
        run.delivered,
        growth as f64 / 1024.0,
        run.rss_before as f64 / 1024.0,
        growth as f64 / run.rss_before.max(1) as f64
    );
}

/// What 1,000 concurrent sleeps cost: seconds to start them all, threads with them alive, and RSS
/// (KiB) before and after.
struct Starts {
    seconds: f64,
    threads: usize,
    rss_before: u64,
    rss_after: u64,
}

fn start_figures(call: &dyn Fn(&str, serde_json::Value) -> String) -> Starts {
    let rss0 = status_kib("VmRSS:");
    let t = Instant::now();
    for _ in 0..1000 {
        let ack = call(
            "bash",
            json!({"command": "sleep 60", "run_in_background": true}),
        );
        assert!(ack.starts_with("started background task"), "{ack}");
    }
    let start_s = t.elapsed().as_secs_f64();
    std::thread::sleep(std::time::Duration::from_millis(500));
    Starts {
        seconds: start_s,
        threads: threads(),
        rss_before: rss0,
        rss_after: status_kib("VmRSS:"),
    }
}

/// The start figures next to their baseline: the same 1,000 commands spawned directly with
/// std::process (then ended), measured after the host shut down.
fn report_starts(starts: Starts) {
    let Starts {
        seconds: start_s,
        threads: threads_now,
        rss_before: rss0,
        rss_after: rss1,
    } = starts;
    let spawn_s = common::bare_spawns(1000);
    println!(
        "{{\"name\":\"1,000 background sleeps: time to start all\",\"unit\":\"ms\",\"value\":{:.0},\"baseline_name\":\"1,000 std::process spawns of the same command\",\"baseline\":{:.0},\"ratio\":{:.2}}}",
        start_s * 1e3,
        spawn_s * 1e3,
        start_s / spawn_s
    );
    println!(
        "{{\"name\":\"  host threads with 1,000 live tasks\",\"unit\":\"threads\",\"value\":{threads_now},\"baseline_name\":\"target\",\"baseline\":32,\"ratio\":{:.2},\"target\":\"<= 32\"}}",
        threads_now as f64 / 32.0
    );
    println!(
        "{{\"name\":\"  host RSS per live task\",\"unit\":\"KiB\",\"value\":{:.1},\"baseline_name\":\"RSS before\",\"baseline\":{rss0},\"ratio\":{:.4}}}",
        (rss1.saturating_sub(rss0)) as f64 / 1000.0,
        (rss1.saturating_sub(rss0)) as f64 / 1000.0 / rss0.max(1) as f64
    );
}
