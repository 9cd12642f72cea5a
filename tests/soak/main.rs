//! Soak: a reload storm under load, in a test binary of its own so the host's memory and threads
//! are this test's alone.
//!
//! Every plugin (bash, tasks, subagent, probe) is reloaded at random moments while four sessions
//! each keep fifty background tasks streaming output and, at the same time, kill, wait on, list and
//! leave unread other tasks. At the end it checks what the product promises: every task settled
//! exactly once, every output byte-exact, every process reaped, every notice owed delivered once to
//! its own session and no other, one generation of each plugin mapped, and the host's RSS and
//! threads back within a stated bound of the warmed-up baseline.
//!
//! The host keeps durable state (task records on SQLite, kept output), as the binary does by
//! default; `TASKHOST_SOAK_STORE=off` keeps records in memory only.
//!
//! `TASKHOST_SOAK=long` reloads each plugin 200 times (the default, for CI, is 25);
//! `TASKHOST_SOAK_SEED=<n>` replays a run's reload and operation order (every run prints its seed).

#![allow(clippy::unwrap_used, reason = "in a test, an unwrap is an assertion")]

mod checks;
#[allow(
    dead_code,
    reason = "the soak uses a part of the integration tests' fixtures"
)]
#[path = "../it/fixtures.rs"]
mod fixtures;
mod host_state;
mod ledger;
mod plan;
mod workload;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use taskhost_registry::{RegistryConfig, TaskSnapshot};

use fixtures::*;
use host_state::status_field;
use ledger::{Ledger, Settled};
use plan::{Plan, Rng};
use workload::{Soak, session_name};

const SESSIONS: usize = 4;
const STREAMING_PER_SESSION: usize = 50;
const LINES: u32 = 300;
/// RSS the host may hold above its warmed-up baseline once the storm is over and its sessions are
/// closed: a fixed part, plus a part per task run (glibc keeps what the records and reads freed in
/// per-thread arenas; runs of the long form, 10,651 to 11,806 tasks, ended 73 to 86 MiB above the
/// baseline). Before plugin loads stopped reading whole libraries into memory on fresh threads, the
/// short form (1,255 tasks) ended 190 MiB above it; since, about 24 MiB.
const RSS_BOUND_KIB: u64 = 32 * 1024;
const RSS_BOUND_KIB_PER_TASK: u64 = 8;
/// Threads the host may hold above its warmed-up baseline once the storm is over (tokio's blocking
/// pool keeps idle threads for ten seconds). Before sweeps were coalesced, one blocked thread waited
/// per settling process and the short form ended with 120 more.
const THREAD_BOUND: u64 = 32;

/// The plugins reloaded, as (unique stem of the private copy, built crate stem).
const PLUGINS: [(&str, &str); 4] = [
    ("soak_bash", "taskhost_plugin_bash"),
    ("soak_tasks", "taskhost_plugin_tasks"),
    ("soak_subagent", "taskhost_plugin_subagent"),
    ("soak_probe", "taskhost_test_probe"),
];

fn agent_bin() -> String {
    artifacts()
        .join("taskhost-test-agent")
        .display()
        .to_string()
}

#[test]
fn a_reload_storm_under_load_loses_nothing_and_leaks_nothing() {
    let plan = Plan::from_env();
    eprintln!(
        "soak: seed {} (TASKHOST_SOAK_SEED), {} reloads of each of {} plugins",
        plan.seed,
        plan.reloads_per_plugin,
        PLUGINS.len()
    );
    // Fifty streaming tasks and up to two churned ones per session, above the default limit of ten.
    let config = RegistryConfig::new()
        .with_max_tasks_per_owner(STREAMING_PER_SESSION as u64 + 8)
        .expect("limit");
    // The store on, as the binary runs by default; `TASKHOST_SOAK_STORE=off` runs with records in
    // memory only, for the figures next to it.
    let store = std::env::var("TASKHOST_SOAK_STORE").map_or(true, |v| v != "off");
    let f = if store {
        Fixture::with_state("soak", config)
    } else {
        Fixture::with_config("soak", config)
    };
    eprintln!("soak: store {}", if store { "on" } else { "off" });
    let ledger = Arc::new(Ledger::new());
    let recorder = ledger.clone();
    let _listener = f
        .host
        .registry()
        .on_task_done(Arc::new(move |snap: &TaskSnapshot, _| {
            recorder
                .settled
                .lock()
                .unwrap()
                .entry(snap.id.as_str().to_owned())
                .or_default()
                .push(Settled {
                    session: snap.owner_session.as_ref().map(|s| s.as_str().to_owned()),
                    reported: snap.reported,
                });
        }));
    let configs = [
        None,
        None,
        Some(json!({"command": [agent_bin()], "grace_ms": 500}).to_string()),
        None,
    ];
    let paths: Vec<_> = PLUGINS
        .iter()
        .zip(configs)
        .map(|((unique, stem), config)| {
            let path = plugin_copy(stem, &f.dir, unique);
            f.host
                .plugins()
                .load(&path, config, false)
                .unwrap_or_else(|e| panic!("load {stem}: {e}"));
            path
        })
        .collect();
    for s in 0..SESSIONS {
        f.host.sessions().open(&session_name(s));
    }

    let storming = AtomicBool::new(true);
    let soak = Soak {
        f: &f,
        ledger: &ledger,
        storming: &storming,
    };

    // Warm-up: one task of each kind and a reload of each plugin, so the baseline holds the
    // runtime's threads, the allocator's arenas and a mapped generation of everything.
    for s in 0..SESSIONS {
        let ids = [
            soak.bash(s, "echo warm"),
            soak.probe(s, 2),
            soak.subagent(s, "echo: warm"),
        ];
        for id in ids.into_iter().flatten() {
            soak.wait(s, &id);
        }
    }
    for path in &paths {
        f.host.plugins().load(path, None, false).expect("reload");
    }
    let base_rss = status_field("VmRSS:");
    let base_threads = status_field("Threads:");

    let mut rng = Rng::new(plan.seed);
    let mut order: Vec<usize> = (0..PLUGINS.len())
        .flat_map(|p| std::iter::repeat_n(p, plan.reloads_per_plugin))
        .collect();
    for i in (1..order.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    let began = Instant::now();
    let mut peak_rss = base_rss;
    let mut peak_threads = base_threads;
    let mut load_times = Vec::with_capacity(order.len());
    std::thread::scope(|scope| {
        for s in 0..SESSIONS {
            let soak = &soak;
            scope.spawn(move || soak.stream(s));
            let churn_rng = Rng::new(rng.next());
            scope.spawn(move || soak.churn(s, churn_rng));
        }
        for (k, &p) in order.iter().enumerate() {
            std::thread::sleep(Duration::from_millis(rng.below(30)));
            let t0 = Instant::now();
            let loaded = f.host.plugins().load(&paths[p], None, false);
            load_times.push(t0.elapsed());
            if let Err(e) = loaded {
                ledger.fail(format!("reload {k} of {}: {e}", PLUGINS[p].0));
            }
            peak_rss = peak_rss.max(status_field("VmRSS:"));
            peak_threads = peak_threads.max(status_field("Threads:"));
        }
        storming.store(false, Ordering::SeqCst);
    });
    let storm = began.elapsed();

    assert!(
        eventually(Duration::from_secs(30), || f.host.registry().stats().live
            == 0),
        "tasks still live after the storm: {:?}",
        f.host.registry().stats()
    );
    for (s, id, expected) in ledger.unread.lock().unwrap().iter() {
        let read = soak.call("task_output", *s, json!({"task_id": id}));
        soak.expect("unread task", &read, expected);
    }

    let failures = ledger.failures.lock().unwrap().clone();
    assert!(
        failures.is_empty(),
        "seed {}: {} failures, the first: {:#?}",
        plan.seed,
        failures.len(),
        &failures[..failures.len().min(10)]
    );

    let started = checks::settled_exactly_once(&ledger);
    let notices_total = checks::notices_exact(&f, &ledger);
    checks::nothing_left_behind(&f);

    // Growth is measured once the sessions are closed, so the terminal records a session keeps
    // until then (legitimately, and in proportion to the run's length) are not counted as a leak.
    let (held_rss, held_threads) = (status_field("VmRSS:"), status_field("Threads:"));
    for s in 0..SESSIONS {
        f.rt.block_on(f.host.close_session(&session_name(s)));
    }
    let end_rss = status_field("VmRSS:");
    let end_threads = status_field("Threads:");
    load_times.sort();
    eprintln!(
        "soak: {} tasks, {} reloads in {:.1} s (a reload took {:?} median, {:?} max), {notices_total} notices\n\
         soak: RSS {base_rss} kB after warm-up, {peak_rss} kB peak, {held_rss} kB holding every record, \
         {end_rss} kB after the sessions closed\n\
         soak: threads {base_threads} after warm-up, {peak_threads} peak, {held_threads} holding, {end_threads} after",
        started,
        order.len(),
        storm.as_secs_f64(),
        load_times
            .get(load_times.len() / 2)
            .copied()
            .unwrap_or_default(),
        load_times.last().copied().unwrap_or_default(),
    );
    let rss_bound = RSS_BOUND_KIB + RSS_BOUND_KIB_PER_TASK * started as u64;
    assert!(
        end_rss <= base_rss + rss_bound,
        "RSS grew from {base_rss} kB to {end_rss} kB (bound: {rss_bound} kB above)"
    );
    // Idle threads of tokio's blocking pool (sweeps, waits) exit ten seconds after their last job:
    // a count above the bound has to come back within it once they have, or it is a leak.
    let within_bound = || status_field("Threads:") <= base_threads + THREAD_BOUND;
    assert!(
        within_bound() || eventually(Duration::from_secs(15), within_bound),
        "threads grew from {base_threads} to {end_threads}, and were {} 15 s later",
        status_field("Threads:")
    );
}
