//! What the benchmark binaries share: where the release build they measure lives, scratch space.

// Each bench binary compiles this module and uses a part of it.
#![allow(dead_code, reason = "each bench uses a part of what the benches share")]

pub use taskhost_tests::{Scratch, profile_dir};

pub mod http;
pub mod lines;
pub mod stdio;

/// A fresh scratch directory for one benchmark run, removed when dropped.
pub fn scratch(name: &str) -> Scratch {
    Scratch::new("taskhost-bench", name)
}

/// A bench host on `rt` with no plugin loaded, its files under `dir`, without a keeper unless
/// `keeper`.
pub fn host(
    rt: &tokio::runtime::Runtime,
    config: taskhost_registry::RegistryConfig,
    dir: &std::path::Path,
    keeper: bool,
) -> taskhost::Taskhost {
    host_with_state(rt, config, dir, keeper, None)
}

/// As [`host`], with the durable state `state`.
pub fn host_with_state(
    rt: &tokio::runtime::Runtime,
    config: taskhost_registry::RegistryConfig,
    dir: &std::path::Path,
    keeper: bool,
    state: Option<std::sync::Arc<taskhost_store::Store>>,
) -> taskhost::Taskhost {
    let options = taskhost::LoadOptions {
        allow_untrusted: true,
        ..taskhost::LoadOptions::new(dir.join("gen"))
    };
    let services = taskhost::ServiceOptions {
        keeper: keeper.then(|| profile_dir().join("taskhost")),
        state,
        ..taskhost::ServiceOptions::default()
    };
    taskhost::Taskhost::new(config, rt.handle().clone(), options, services)
}

/// A runtime and a host on it with no plugin loaded and no keeper, its files under `dir`.
pub fn bare_host(dir: &std::path::Path) -> (tokio::runtime::Runtime, taskhost::Taskhost) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let host = host(&rt, taskhost_registry::RegistryConfig::new(), dir, false);
    (rt, host)
}

/// A host on `rt` with the release bash and tasks plugins loaded and the keeper running, for the
/// process benches; `max_tasks` live tasks allowed per owner.
pub fn bash_host(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    max_tasks: u64,
) -> taskhost::Taskhost {
    bash_host_with_state(rt, dir, max_tasks, None)
}

/// As [`bash_host`], with the durable state `state`.
pub fn bash_host_with_state(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    max_tasks: u64,
    state: Option<std::sync::Arc<taskhost_store::Store>>,
) -> taskhost::Taskhost {
    let config = taskhost_registry::RegistryConfig::new()
        .with_max_tasks_per_owner(max_tasks)
        .expect("config");
    with_bash(host_with_state(rt, config, dir, true, state))
}

/// As [`bash_host`], every task bounded by `bounds` (as `[policy.default]` would bound it).
pub fn bash_host_bounded(
    rt: &tokio::runtime::Runtime,
    dir: &std::path::Path,
    max_tasks: u64,
    bounds: taskhost::process::bounds::Bounds,
) -> taskhost::Taskhost {
    let config = taskhost_registry::RegistryConfig::new()
        .with_max_tasks_per_owner(max_tasks)
        .expect("config");
    let policies = taskhost::policy::Policies::new([("default".to_owned(), bounds)].into(), None);
    let options = taskhost::LoadOptions {
        allow_untrusted: true,
        ..taskhost::LoadOptions::new(dir.join("gen"))
    };
    let services = taskhost::ServiceOptions {
        keeper: Some(profile_dir().join("taskhost")),
        policies: Some(std::sync::Arc::new(policies)),
        ..taskhost::ServiceOptions::default()
    };
    with_bash(taskhost::Taskhost::new(
        config,
        rt.handle().clone(),
        options,
        services,
    ))
}

/// `host` with the release bash and tasks plugins loaded.
pub fn with_bash(host: taskhost::Taskhost) -> taskhost::Taskhost {
    let profile = profile_dir();
    for p in ["bash", "tasks"] {
        host.plugins()
            .load(
                &profile.join(format!("libtaskhost_plugin_{p}.so")),
                None,
                false,
            )
            .expect("plugin");
    }
    host
}

/// A field of `/proc/self/status` in KiB (`VmRSS:`), 0 when unreadable.
pub fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// `n` as the rows name counts: `1,000`, `10,000`.
pub fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The database's bytes (with its WAL) and those of the same records as `taskhost tasks --json`
/// lines.
pub fn state_sizes(state: &std::path::Path) -> (u64, u64) {
    let json: usize = taskhost_store::Store::open_to_read(state)
        .expect("read")
        .tasks()
        .expect("tasks")
        .iter()
        .filter_map(|r| serde_json::to_string(r).ok())
        .map(|l| l.len() + 1)
        .sum();
    let db: u64 = ["tasks.db", "tasks.db-wal"]
        .iter()
        .filter_map(|f| std::fs::metadata(state.join(f)).ok())
        .map(|m| m.len())
        .sum();
    (db, json as u64)
}

/// Seconds to spawn `n` `bash -c "sleep 60"` with `std::process::Command` (then ended).
pub fn bare_spawns(n: usize) -> f64 {
    let t = std::time::Instant::now();
    let mut children: Vec<_> = (0..n)
        .map(|_| {
            std::process::Command::new("bash")
                .args(["-c", "sleep 60"])
                .spawn()
                .expect("spawn")
        })
        .collect();
    let seconds = t.elapsed().as_secs_f64();
    for c in &mut children {
        let _ = c.kill();
        let _ = c.wait();
    }
    seconds
}

/// Seconds to start `n` background `sleep 60` through `host`'s bash plugin on `rt`, each answered
/// as started.
pub fn background_sleeps(rt: &tokio::runtime::Runtime, host: &taskhost::Taskhost, n: usize) -> f64 {
    let t = std::time::Instant::now();
    for _ in 0..n {
        let args = serde_json::json!({"command": "sleep 60", "run_in_background": true});
        let ack = rt
            .block_on(host.plugins().call_tool("bash", "", &args))
            .expect("call")
            .text;
        assert!(ack.starts_with("started background task"), "{ack}");
    }
    t.elapsed().as_secs_f64()
}
