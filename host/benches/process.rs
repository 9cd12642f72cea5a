//! Process figures for `scripts/bench`, through the real bash and tasks plugins (release builds):
//! 1 GiB of output through one background task read by polling `task_output`, against
//! `head -c 1G /dev/zero | cat > /dev/null` in the same run, with the host's RSS growth; and 1,000
//! concurrent background `sleep` tasks: time to start all, host threads, RSS per task.

mod common;

use std::time::Instant;

use serde_json::json;
use taskhost::{LoadOptions, Taskhost};
use taskhost_registry::RegistryConfig;

fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(0, |d| d.count())
}

fn main() {
    let profile = common::profile_dir();
    let dir = common::scratch("process");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let config = RegistryConfig::new()
        .with_max_tasks_per_owner(10_000)
        .expect("config");
    let options = LoadOptions {
        generation_dir: dir.join("gen"),
        allow_untrusted: true,
        spill_dir: None,
        env: Default::default(),
        keeper: Some(profile.join("taskhost")),
        max_foreground_per_owner: 16,
    };
    let host = Taskhost::new(config, rt.handle().clone(), options);
    for p in ["bash", "tasks"] {
        host.plugins()
            .load(
                &profile.join(format!("libtaskhost_plugin_{p}.so")),
                None,
                false,
            )
            .expect("plugin");
    }
    let call = |tool: &str, args: serde_json::Value| -> String {
        rt.block_on(host.plugins().call_tool(tool, "", &args))
            .expect("call")
            .text
    };

    // Baseline: the same bytes through a plain pipe.
    let t = Instant::now();
    let ok = std::process::Command::new("bash")
        .args(["-c", "head -c 1G /dev/zero | cat > /dev/null"])
        .status()
        .expect("pipe")
        .success();
    assert!(ok);
    let pipe_s = t.elapsed().as_secs_f64();

    let rss0 = status_kib("VmRSS:");
    let mut peak = rss0;
    let t = Instant::now();
    let ack = call(
        "bash",
        json!({"command": "head -c 1G /dev/zero", "run_in_background": true}),
    );
    let id = ack
        .trim_start_matches("started background task ")
        .to_owned();
    let mut delivered = 0usize;
    loop {
        let text = call("task_output", json!({"task_id": id}));
        let (body, status) = text.rsplit_once("[status: ").expect("status line");
        if body != "(no new output)\n" {
            delivered += body.len();
        }
        peak = peak.max(status_kib("VmRSS:"));
        if !status.starts_with("running") {
            break;
        }
    }
    let ours_s = t.elapsed().as_secs_f64();
    let gib = (1u64 << 30) as f64;
    let (ours, base) = (gib / ours_s / 1e6, gib / pipe_s / 1e6);
    println!(
        "{{\"name\":\"1 GiB through a polled bash task\",\"unit\":\"MB/s\",\"value\":{ours:.0},\"baseline_name\":\"head -c 1G | cat\",\"baseline\":{base:.0},\"ratio\":{:.2},\"target\":\">= 0.5\"}}",
        ours / base
    );
    println!(
        "{{\"name\":\"  host RSS growth during it (delivered {delivered} bytes to the reader)\",\"unit\":\"MiB\",\"value\":{:.1},\"baseline_name\":\"RSS before\",\"baseline\":{:.1},\"ratio\":{:.2},\"target\":\"< 64 MiB\"}}",
        (peak - rss0) as f64 / 1024.0,
        rss0 as f64 / 1024.0,
        (peak - rss0) as f64 / rss0.max(1) as f64
    );

    // 1,000 concurrent sleeps.
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
    let (threads_now, rss1) = (threads(), status_kib("VmRSS:"));
    rt.block_on(host.shutdown());
    // Baseline: the same 1,000 commands spawned directly with std::process (then ended).
    let t = Instant::now();
    let mut children: Vec<_> = (0..1000)
        .map(|_| {
            std::process::Command::new("bash")
                .args(["-c", "sleep 60"])
                .spawn()
                .expect("spawn")
        })
        .collect();
    let spawn_s = t.elapsed().as_secs_f64();
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
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
    let _ = std::fs::remove_dir_all(&dir);
}
