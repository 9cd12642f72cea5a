//! Loading: panics contained, bad files refused with one clear error, the old generation serving on.

use serde_json::json;

use crate::fixtures::*;

#[test]
fn a_panicking_tool_call_is_an_error_result_and_the_host_lives_on() {
    let f = Fixture::new("tool-panic");
    f.load("taskhost_test_probe", "probe_tool_panic");
    assert_eq!(
        f.call("probe_panic", "", json!({})),
        "Error: tool call panicked: probe tool panicked"
    );
    assert_eq!(f.call("probe_calls", "", json!({})), "0");
}

#[test]
fn a_panicking_or_failing_init_is_a_load_failure_naming_the_plugin() {
    let f = Fixture::new("init-panic");
    let path = plugin_copy("taskhost_test_probe", &f.dir, "probe_init_panic");
    let err = f.load_error(&path, Some(r#"{"panic_in_init": true}"#));
    assert!(
        err.contains("plugin probe") && err.contains("init panicked: probe init panicked"),
        "{err}"
    );
    let err = f.load_error(&path, Some(r#"{"fail_in_init": true}"#));
    assert!(
        err.ends_with("failed to initialize: probe init refused"),
        "{err}"
    );
    assert!(f.host.plugins().tools().is_empty());
}

#[test]
fn a_panicking_cancel_fails_the_kill_and_leaves_the_task_running() {
    let f = Fixture::new("cancel-panic");
    f.load("taskhost_test_probe", "probe_cancel_panic");
    f.load("taskhost_test_surface", "surface_cancel_panic");
    f.host.sessions().open("s");
    let id = f.start_probe(
        "s",
        json!({"lines": 20, "interval_ms": 5, "cancel": "panic"}),
    );
    assert_eq!(
        f.call("s_kill", "s", json!({"task_id": id})),
        "Error: cancel panicked: probe cancel panicked"
    );
    let (_, status) = f.drain("s", &id);
    assert_eq!(status, "[status: completed, exit code: 0]");
}

#[test]
fn a_panicking_listener_is_contained() {
    let f = Fixture::new("listener-panic");
    f.load("taskhost_test_probe", "probe_listener_panic");
    f.load("taskhost_test_surface", "surface_listener_panic");
    f.host.sessions().open("s");
    assert_eq!(f.call("probe_listen", "s", json!({})), "listening");
    let id = f.start_probe("s", json!({"lines": 1}));
    let (_, status) = f.drain("s", &id);
    assert_eq!(status, "[status: completed, exit code: 0]");
    assert_eq!(f.call("probe_calls", "s", json!({})), "1");
}

#[test]
fn bad_plugin_files_are_refused_with_one_clear_error_and_the_old_generation_keeps_serving() {
    let f = Fixture::new("bad-files");
    let path = f.load("taskhost_test_probe", "probe_bad");
    let good = std::fs::read(&path).unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "truncated library",
            good[..4096].to_vec(),
            "is not a loadable library",
        ),
        (
            "not a library",
            b"#!/bin/sh\necho hi\n".to_vec(),
            "is not a loadable library",
        ),
        (
            "library without our root module",
            std::fs::read(libm()).unwrap(),
            "exports no root module",
        ),
    ];
    for (what, bytes, expected) in cases {
        // Replace the file the way a build does (a new inode), never in place.
        let tmp = f.dir.join("incoming.so");
        std::fs::write(&tmp, &bytes).unwrap();
        set_mode(&tmp, 0o755);
        std::fs::rename(&tmp, &path).unwrap();
        let err = f.load_error(&path, None);
        assert!(err.contains(&path.display().to_string()), "{what}: {err}");
        assert!(err.contains(expected), "{what}: {err}");
        assert!(
            f.call("probe_calls", "", json!({})).parse::<u64>().is_ok(),
            "{what}"
        );
    }
    let tools = f.host.plugins().tools();
    assert!(tools.iter().all(|t| t.generation() == 1));
}

#[test]
fn a_world_writable_plugin_file_or_directory_is_refused_unless_allowed() {
    let f = Fixture::new("untrusted");
    let path = plugin_copy("taskhost_test_probe", &f.dir, "probe_untrusted");
    set_mode(&path, 0o757);
    let err = f.load_error(&path, None);
    assert!(
        err.starts_with(&format!("refusing plugin {}", path.display())),
        "{err}"
    );
    assert!(err.contains("writable by group or others"), "{err}");
    set_mode(&path, 0o755);
    set_mode(&f.dir, 0o777);
    let err = f.load_error(&path, None);
    assert!(
        err.contains(&format!(
            "{} is writable by group or others (and not sticky)",
            f.dir.display()
        )),
        "{err}"
    );
    set_mode(&f.dir, 0o700);
    assert!(f.host.plugins().load(&path, None, false).is_ok());
}

fn libm() -> std::path::PathBuf {
    [
        "/lib/x86_64-linux-gnu/libm.so.6",
        "/usr/lib/x86_64-linux-gnu/libm.so.6",
        "/lib64/libm.so.6",
    ]
    .iter()
    .map(std::path::PathBuf::from)
    .find(|p| p.exists())
    .expect("libm for the no-root-module case")
}

#[test]
fn a_plugin_built_against_another_interface_is_refused_naming_the_mismatch() {
    let f = Fixture::new("mismatch");
    let path = plugin_copy("taskhost_test_mismatch", &f.dir, "mismatch_plugin");
    let err = f.load_error(&path, None);
    assert!(
        err.starts_with(&format!(
            "plugin {} has an incompatible ABI:",
            path.display()
        )),
        "{err}"
    );
    // abi_stable reports the first difference it meets: here the package defining the root module.
    assert!(
        err.contains("mismatched package") && err.contains("taskhost-test-mismatch"),
        "{err}"
    );
    assert!(f.host.plugins().tools().is_empty());
}

#[test]
fn a_tool_call_that_blocks_does_not_hold_up_other_calls_or_a_reload() {
    let f = Fixture::new("blocking");
    let path = f.load("taskhost_test_probe", "probe_blocking");
    let (host, handle) = (f.host.clone(), f.rt.handle().clone());
    let blocked = std::thread::spawn(move || {
        handle
            .block_on(
                host.plugins()
                    .call_tool("probe_block", "", &json!({"ms": 3000})),
            )
            .map(|o| o.text)
    });
    assert!(
        eventually(std::time::Duration::from_secs(10), || {
            f.call("probe_blocking", "", json!({})) == "1"
        }),
        "the blocking call started"
    );
    let t = std::time::Instant::now();
    assert_eq!(f.call("probe_calls", "", json!({})), "0");
    f.host
        .plugins()
        .load(&path, None, false)
        .expect("reload while a call blocks");
    assert_eq!(
        f.call("probe_calls", "", json!({})),
        "0",
        "served by the new generation"
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(2),
        "other calls waited for the blocked one"
    );
    // The call in flight finishes on the old generation.
    assert_eq!(blocked.join().unwrap().unwrap(), "unblocked");
}
