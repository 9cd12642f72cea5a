//! The cost of waiting on output, for `scripts/bench`: eight `task_output` calls with a `wait_for`
//! that never matches, each on a task holding 1.2 MB of unread output, for 15 s, through the real
//! release bash and tasks plugins in this process; the figure is this process's CPU time over the
//! wait (the tasks are other processes). Before the host matched only new output and slept until
//! more arrived, the plugin copied and matched the whole unread output every 25 ms (10.5 CPU-seconds
//! measured on this machine for this load).

mod common;

use std::time::{Duration, Instant};

use serde_json::json;

/// User and system CPU time of this process so far.
fn cpu_seconds() -> f64 {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .expect("getrusage");
    let secs = |t: nix::sys::time::TimeVal| t.tv_sec() as f64 + t.tv_usec() as f64 / 1e6;
    secs(usage.user_time()) + secs(usage.system_time())
}

fn main() {
    const WAITERS: usize = 8;
    const WAIT: Duration = Duration::from_secs(15);
    let dir = common::scratch("waits");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let host = common::bash_host(&rt, &dir, 100);
    let call = |tool: &str, args: serde_json::Value| -> String {
        rt.block_on(host.plugins().call_tool(tool, "", &args))
            .expect("call")
            .text
    };
    // 1.2 MB of 60-byte lines each, then quiet.
    let ids: Vec<String> = (0..WAITERS)
        .map(|_| {
            let args = json!({"command": "yes 0123456789012345678901234567890123456789012345678901234 | head -c 1200000; echo; echo written; sleep 600", "run_in_background": true});
            let out = rt
                .block_on(host.plugins().call_tool("bash", "", &args))
                .expect("call");
            out.started
                .unwrap_or_else(|| panic!("not started: {}", out.text))
        })
        .collect();
    for id in &ids {
        // A wait that matches: the output is all there before the measured waits start.
        call(
            "task_output",
            json!({"task_id": id, "wait_for": "(?m)^written$", "timeout_ms": 60_000}),
        );
    }
    let before = cpu_seconds();
    let started = Instant::now();
    std::thread::scope(|s| {
        for id in &ids {
            let call = &call;
            s.spawn(move || {
                call(
                    "task_output",
                    json!({"task_id": id, "wait_for": "never printed", "timeout_ms": WAIT.as_millis() as u64}),
                )
            });
        }
    });
    let wall = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - before;
    println!(
        "{{\"name\":\"host CPU of {WAITERS} wait_for waiters over 1.2 MB unread each\",\"unit\":\"s\",\"value\":{cpu:.3},\"baseline_name\":\"the wait's wall time\",\"baseline\":{wall:.3},\"ratio\":{:.4},\"target\":\"< 0.2 s CPU (was 10.5)\"}}",
        cpu / wall
    );
    rt.block_on(host.shutdown());
}
