//! Scale figures for `scripts/bench` (release builds): 10,000 live background `sleep` tasks in one
//! session on one host, through the real bash and tasks plugins. The cost of one start with 100
//! tasks alive against the cost with 10,000 alive (target: within 1.5x), every start working or
//! failing loudly, the host's threads (target: under 32) and RSS per task (target: under 64 KiB).

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
    let dir = common::scratch("scale");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let host = common::bash_host(&rt, &dir, TASKS as u64 + 10);
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
    let mut failed = 0;
    let mut window_ms = Vec::new();
    let mut t = Instant::now();
    for i in 0..tasks {
        if i % WINDOW == 0 {
            t = Instant::now();
        }
        let ack = call(json!({"command": "sleep 600", "run_in_background": true}));
        if !ack.starts_with("started background task") {
            failed += 1;
            if failed < 5 {
                eprintln!("start {i}: {ack}");
            }
        }
        if i % WINDOW == WINDOW - 1 {
            window_ms.push(t.elapsed().as_secs_f64() * 1e3 / WINDOW as f64);
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let threads = std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count());
    let fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
    eprintln!("descriptors with {TASKS} tasks: {fds}");
    let rss = status_kib("VmRSS:").saturating_sub(rss0) as f64 / TASKS as f64;
    rt.block_on(host.close_session("s"));
    rt.block_on(host.shutdown());
    let (first, last) = (window_ms[0], window_ms[window_ms.len() - 1]);
    eprintln!("per-start ms by window of {WINDOW}: {window_ms:.2?}");
    println!(
        "{{\"name\":\"10,000 live tasks: one start with 10,000 alive\",\"unit\":\"ms\",\"value\":{last:.3},\"baseline_name\":\"one start with 100 alive\",\"baseline\":{first:.3},\"ratio\":{:.2},\"target_ratio\":1.5}}",
        last / first
    );
    println!(
        "{{\"name\":\"  starts that failed (each loudly)\",\"unit\":\"starts\",\"value\":{failed},\"baseline_name\":\"starts\",\"baseline\":{TASKS},\"ratio\":{:.4},\"target\":\"0\"}}",
        failed as f64 / TASKS as f64
    );
    println!(
        "{{\"name\":\"  host threads with 10,000 live tasks\",\"unit\":\"threads\",\"value\":{threads},\"baseline_name\":\"target\",\"baseline\":32,\"ratio\":{:.2},\"target\":\"< 32\"}}",
        threads as f64 / 32.0
    );
    println!(
        "{{\"name\":\"  host RSS per live task\",\"unit\":\"KiB\",\"value\":{rss:.1},\"baseline_name\":\"target\",\"baseline\":64,\"ratio\":{:.2},\"target\":\"< 64\"}}",
        rss / 64.0
    );
}
