//! The cost of a policy for `scripts/bench` (issue 43, item 6), through the real process service and
//! keeper (release builds): a bounded start of `true` against an unbounded one in the same run, and
//! the time until its exit is known, without limits and with memory, process and CPU limits.
//! Figures are medians of 200 starts of each kind, interleaved so both see the same machine.

mod common;

use std::sync::Arc;
use std::time::Instant;

use taskhost::process::ProcessSpec;
use taskhost::process::bounds::Bounds;

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let dir = common::scratch("bounds");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let host = common::host(&rt, taskhost_registry::RegistryConfig::new(), &dir, true);
    let root = dir.join("work");
    std::fs::create_dir_all(&root).expect("work");
    let policy = Bounds {
        policy: "bench".into(),
        write: vec![root],
        hide: vec![dir.join("gen")],
        filesystem: true,
        ..Bounds::default()
    };
    let limited = Bounds {
        memory_max: Some(256 << 20),
        pids_max: Some(64),
        cpu_max_millis: Some(1500),
        ..policy.clone()
    };
    let kinds = [None, Some(Arc::new(policy)), Some(Arc::new(limited))];
    let mut started = vec![Vec::new(); kinds.len()];
    let mut ended = vec![Vec::new(); kinds.len()];
    for _ in 0..200 {
        for (i, kind) in kinds.iter().enumerate() {
            let mut spec = ProcessSpec::new("true");
            spec.bounds = kind.clone();
            let at = Instant::now();
            let process = host.processes().spawn(&spec, "bench").expect("spawn");
            started[i].push(at.elapsed().as_secs_f64() * 1e3);
            rt.block_on(process.wait());
            ended[i].push(at.elapsed().as_secs_f64() * 1e3);
        }
    }
    let [s0, s1, s2] = [0, 1, 2].map(|i| median(std::mem::take(&mut started[i])));
    let [e0, e1, e2] = [0, 1, 2].map(|i| median(std::mem::take(&mut ended[i])));
    let row = |name: &str, value: f64, baseline: f64, target: &str| {
        println!(
            "{{\"name\":\"{name}\",\"unit\":\"ms\",\"value\":{value:.3},\"baseline_name\":\"an unbounded start, same run\",\"baseline\":{baseline:.3},\"ratio\":{:.2},\"target\":\"{target}\"}}",
            value / baseline
        );
    };
    row(
        "bounded start of true (policy: write, hide)",
        s1,
        s0,
        "<= +2 ms",
    );
    row("  and until its exit is known", e1, e0, "");
    row(
        "bounded start with memory, pids, cpu limits",
        s2,
        s0,
        "<= +2 ms",
    );
    row("  and until its exit is known", e2, e0, "");
    rt.block_on(host.shutdown());
}
