//! Scale figures for `scripts/bench` (release builds): 10,000 live background `sleep` tasks in one
//! session on one host, through the real bash and tasks plugins and the keeper. The cost of one
//! start with 100 tasks alive against the cost with the most alive (target: within 1.5x; a window
//! with a failed start is not a start's cost), every start working or failing loudly, the host's
//! descriptors per task, threads (target: under 32) and RSS per task (target: under 64 KiB).
//! With `TASKHOST_SCALE_BOUNDED=1` every task is bounded by a policy (a write root, a hidden path,
//! the network off, a process limit), and the rows are named for live bounded tasks (issue 43, item 6).

mod common;

use std::time::Instant;

use common::status_kib;
use serde_json::json;

const TASKS: usize = 10_000;
/// Starts timed in each window.
const WINDOW: usize = 200;

fn main() {
    // Room for 10,000 tasks' descriptors: as root, the hard limit can be raised too.
    let _ =
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, 65_536, 65_536);
    taskhost::process::raise_file_limit();
    let limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(0, |(soft, _)| soft);
    let dir = common::scratch("scale");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let bounded = std::env::var_os("TASKHOST_SCALE_BOUNDED").is_some();
    let host = if bounded {
        let work = dir.join("work");
        std::fs::create_dir_all(&work).expect("work");
        let bounds = taskhost::process::bounds::Bounds {
            policy: "scale".into(),
            write: vec![work],
            hide: vec![dir.join("gen")],
            pids_max: Some(16),
            filesystem: true,
            ..Default::default()
        };
        common::bash_host_bounded(&rt, &dir, TASKS as u64 + 10, bounds)
    } else {
        common::bash_host(&rt, &dir, TASKS as u64 + 10)
    };
    let kind = if bounded { "bounded tasks" } else { "tasks" };
    host.sessions().open("s");
    let call = |args: serde_json::Value| {
        rt.block_on(host.plugins().call_tool("bash", "s", &args))
            .map(|o| o.text)
            .unwrap_or_else(|e| e.to_string())
    };
    // Diagnosis: TASKHOST_SCALE_PREOPEN=N opens N descriptors first, to tell a cost that grows with
    // the host's descriptors from one that grows with its tasks.
    let preopen: usize = std::env::var("TASKHOST_SCALE_PREOPEN")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let _held: Vec<std::fs::File> = (0..preopen)
        .filter_map(|_| std::fs::File::open("/dev/null").ok())
        .collect();
    let tasks = std::env::var("TASKHOST_SCALE_TASKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(TASKS);
    let rss0 = status_kib("VmRSS:");
    let fds0 = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    let mut failed = 0;
    // Per-start cost of each window of WINDOW starts that all worked, with the tasks alive at its end.
    let mut windows: Vec<(usize, f64)> = Vec::new();
    let mut window_failed = false;
    let mut t = Instant::now();
    for i in 0..tasks {
        if i % WINDOW == 0 {
            t = Instant::now();
            window_failed = false;
        }
        let ack = call(json!({"command": "sleep 600", "run_in_background": true}));
        if !ack.starts_with("started background task") {
            failed += 1;
            window_failed = true;
            if failed < 5 {
                eprintln!("start {i}: {ack}");
            }
        }
        if i % WINDOW == WINDOW - 1 && !window_failed {
            let ms = t.elapsed().as_secs_f64() * 1e3 / WINDOW as f64;
            windows.push((i + 1 - failed, ms));
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let started = tasks - failed;
    let threads = std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count());
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    let per_task = fds.saturating_sub(fds0) as f64 / started.max(1) as f64;
    eprintln!("descriptors with {started} tasks: {fds} ({per_task:.2} per task)");
    let rss = status_kib("VmRSS:").saturating_sub(rss0) as f64 / started.max(1) as f64;
    rt.block_on(host.close_session("s"));
    rt.block_on(host.shutdown());
    eprintln!("per-start ms by window of {WINDOW} (tasks alive at its end): {windows:.2?}");
    let (Some(&(_, first)), Some(&(alive, last))) = (windows.first(), windows.last()) else {
        eprintln!("no window of {WINDOW} starts all worked");
        return;
    };
    println!(
        "{{\"name\":\"10,000 live {kind}: one start with {} to {alive} alive\",\"unit\":\"ms\",\"value\":{last:.3},\"baseline_name\":\"one start with 0 to {WINDOW} alive\",\"baseline\":{first:.3},\"ratio\":{:.2},\"target_ratio\":1.5}}",
        alive - WINDOW,
        last / first
    );
    println!(
        "{{\"name\":\"  starts that failed (each loudly)\",\"unit\":\"starts\",\"value\":{failed},\"baseline_name\":\"starts\",\"baseline\":{tasks},\"ratio\":{:.4},\"target\":\"0\"}}",
        failed as f64 / tasks as f64
    );
    println!(
        "{{\"name\":\"  host descriptors per live task\",\"unit\":\"fds\",\"value\":{per_task:.2},\"baseline_name\":\"open-file limit / 10,000\",\"baseline\":{:.2},\"ratio\":{:.2}}}",
        limit as f64 / TASKS as f64,
        per_task / (limit as f64 / TASKS as f64)
    );
    println!(
        "{{\"name\":\"  host threads with {started} live tasks\",\"unit\":\"threads\",\"value\":{threads},\"baseline_name\":\"target\",\"baseline\":32,\"ratio\":{:.2},\"target\":\"< 32\"}}",
        threads as f64 / 32.0
    );
    println!(
        "{{\"name\":\"  host RSS per live task\",\"unit\":\"KiB\",\"value\":{rss:.1},\"baseline_name\":\"target\",\"baseline\":64,\"ratio\":{:.2},\"target\":\"< 64\"}}",
        rss / 64.0
    );
}
