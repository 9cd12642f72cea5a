//! Hot reload: tasks outlive their generation, the fence holds across surface reloads, old
//! generations unload for real.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;

use crate::fixtures::*;

#[test]
fn a_task_started_by_generation_one_survives_fifty_reloads_and_settles_once_with_complete_output() {
    let f = Fixture::new("survive");
    let probe = f.load("taskhost_test_probe", "probe_survive");
    f.load("taskhost_test_surface", "surface_survive");
    f.host.sessions().open("s");
    let settled = Arc::new(Mutex::new(Vec::new()));
    let seen = settled.clone();
    let _l = f.host.registry().on_task_done(Arc::new(move |s, _| {
        seen.lock().unwrap().push(s.id.to_string())
    }));

    let id = f.start_probe("s", json!({"lines": 200, "interval_ms": 5}));
    let mut output = String::new();
    for _ in 0..50 {
        f.host.plugins().load(&probe, None, false).expect("reload");
        let text = f.call("s_read", "s", json!({"task_id": id}));
        output.push_str(split_status(&text).0);
    }
    let gens = &f.host.plugins().info()[0].generations;
    assert_eq!(
        gens.last().map(|g| (g.generation, g.state.as_str())),
        Some((51, "active"))
    );
    // New calls are served by the new generation: its statics start afresh.
    assert_eq!(f.call("probe_calls", "s", json!({})), "0");
    let tool = f
        .host
        .plugins()
        .tools()
        .into_iter()
        .find(|t| t.name == "probe_start")
        .unwrap();
    assert_eq!(tool.generation(), 51);

    let waited = f.call("s_wait", "s", json!({"task_id": id, "timeout_ms": 20000}));
    assert_eq!(waited, "[status: completed, exit code: 0]");
    let (rest, status) = f.drain("s", &id);
    output.push_str(&rest);
    assert_eq!(status, "[status: completed, exit code: 0]");
    assert_eq!(output, probe_lines(200));
    assert!(eventually(Duration::from_secs(2), || !settled
        .lock()
        .unwrap()
        .is_empty()));
    assert_eq!(*settled.lock().unwrap(), vec![id]);
}

#[test]
fn a_task_of_a_retired_generation_stays_killable_and_waitable() {
    let f = Fixture::new("kill-old");
    let probe = f.load("taskhost_test_probe", "probe_kill_old");
    f.load("taskhost_test_surface", "surface_kill_old");
    f.host.sessions().open("s");
    let id = f.start_probe("s", json!({"lines": 100000, "interval_ms": 5}));
    for _ in 0..3 {
        f.host.plugins().load(&probe, None, false).expect("reload");
    }
    assert_eq!(
        f.call("s_kill", "s", json!({"task_id": id})),
        format!("requested cancellation of task {id}")
    );
    assert_eq!(
        f.call("s_wait", "s", json!({"task_id": id})),
        "[status: killed, signal: SIGTERM]"
    );
}

#[test]
fn start_fails_loud_without_a_surface_and_the_producer_never_runs() {
    let f = Fixture::new("fence");
    f.load("taskhost_test_probe", "probe_fence");
    f.host.sessions().open("s");
    let text = f.call("probe_start", "s", json!({}));
    assert_eq!(
        text,
        "Error: background tasks unavailable: no control surface is attached (load the tasks plugin)"
    );
    assert_eq!(f.host.registry().stats().records, 0);

    let surface = f.load("taskhost_test_surface", "surface_fence");
    let id = f.start_probe("s", json!({"lines": 1}));
    assert_eq!(id, "probe-1");

    f.host.plugins().unload(&surface);
    assert!(
        f.call("probe_start", "s", json!({}))
            .starts_with("Error: background tasks unavailable")
    );
}

#[test]
fn reloading_the_surface_never_lets_a_start_fail_or_slip_through() {
    let config = taskhost_registry::RegistryConfig::new()
        .with_max_tasks_per_owner(1 << 30)
        .unwrap();
    let f = Fixture::with_config("flap", config);
    f.load("taskhost_test_probe", "probe_flap");
    let surface = f.load("taskhost_test_surface", "surface_flap");
    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(AtomicUsize::new(0));
    let starts = Arc::new(AtomicUsize::new(0));
    let (host, handle) = (f.host.clone(), f.rt.handle().clone());
    let hammer = {
        let (stop, failures, starts) = (stop.clone(), failures.clone(), starts.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let out = handle.block_on(host.plugins().call_tool(
                    "probe_start",
                    "",
                    &json!({"lines": 0}),
                ));
                match out {
                    Ok(o) if o.text.starts_with("started background task") => {
                        starts.fetch_add(1, Ordering::Relaxed)
                    }
                    other => {
                        eprintln!("start failed: {other:?}");
                        failures.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
        })
    };
    for _ in 0..20 {
        f.host
            .plugins()
            .load(&surface, None, false)
            .expect("reload surface");
        std::thread::sleep(Duration::from_millis(2));
    }
    stop.store(true, Ordering::Relaxed);
    hammer.join().unwrap();
    assert!(starts.load(Ordering::Relaxed) > 0);
    assert_eq!(failures.load(Ordering::Relaxed), 0);
}

#[test]
fn after_a_hundred_reloads_with_no_live_task_one_generation_is_mapped() {
    let f = Fixture::new("unmap");
    let probe = f.load("taskhost_test_probe", "probe_unmap");
    for _ in 0..100 {
        f.host.plugins().load(&probe, None, false).expect("reload");
        assert_eq!(f.call("probe_calls", "", json!({})), "0");
    }
    let one = eventually(Duration::from_secs(10), || {
        mapped_generations("probe_unmap").len() == 1
    });
    assert!(one, "mapped: {:?}", mapped_generations("probe_unmap"));
    assert!(mapped_generations("probe_unmap")[0].contains(".g101.so"));
    assert_eq!(f.host.plugins().info()[0].generations.len(), 1);
}

#[test]
fn a_retiring_generation_with_a_live_task_stays_mapped_until_the_task_settles() {
    let f = Fixture::new("pinned");
    let probe = f.load("taskhost_test_probe", "probe_pinned");
    f.load("taskhost_test_surface", "surface_pinned");
    f.host.sessions().open("s");
    let id = f.start_probe("s", json!({"lines": 1_000_000, "interval_ms": 5}));
    for _ in 0..5 {
        f.host.plugins().load(&probe, None, false).expect("reload");
    }
    let mapped = mapped_generations("probe_pinned");
    assert!(
        mapped.iter().any(|m| m.contains(".g1.so")),
        "generation 1 unmapped early: {mapped:?}"
    );
    let info = &f.host.plugins().info()[0];
    assert_eq!(info.generations[0].generation, 1);
    assert_eq!(
        (info.generations[0].state, info.generations[0].live_tasks),
        (taskhost::plugin::GenerationState::Retiring, 1)
    );
    let killed = f.call("s_kill", "s", json!({"task_id": id}));
    assert_eq!(killed, format!("requested cancellation of task {id}"));
    let waited = f.call("s_wait", "s", json!({"task_id": id, "timeout_ms": 20000}));
    assert_eq!(waited, "[status: killed, signal: SIGTERM]");
    let gone = eventually(Duration::from_secs(10), || {
        mapped_generations("probe_pinned").len() == 1
    });
    assert!(
        gone,
        "still mapped: {:?}",
        mapped_generations("probe_pinned")
    );
    assert_eq!(f.host.plugins().info()[0].generations.len(), 1);
}
