//! The test host against the workspace's probe plugin, as a plugin author's test would use it.

#![allow(clippy::unwrap_used, reason = "in a test, an unwrap is an assertion")]

use std::time::Duration;

use serde_json::json;
use taskhost_testkit::{TaskStatus, TestHost, TestkitError};

fn probe() -> std::path::PathBuf {
    TestHost::built_cdylib("taskhost_test_probe")
}

/// Proves: a task started by generation 1 survives reloads with its whole output, settles once, and
/// the retired generations are unmapped once it has.
#[test]
fn a_task_survives_reloads_settles_once_and_retired_generations_unmap() {
    let host = TestHost::new().unwrap();
    assert_eq!(host.load(probe()).unwrap(), 1);
    host.open_session("s");
    let id = host
        .start("s", "probe_start", json!({"lines": 40, "interval_ms": 5}))
        .unwrap();
    for n in 2..=6 {
        assert_eq!(host.reload().unwrap(), n);
    }
    let (output, end) = host.read_to_end("s", &id, Duration::from_secs(30)).unwrap();
    let expected: String = (0..40).map(|i| format!("line {i}\n")).collect();
    assert_eq!(output, expected);
    assert_eq!(end.status, TaskStatus::Completed);
    assert_eq!(host.settled_count(&id), 1);
    host.check_settled_once().unwrap();
    host.wait_unmapped(Duration::from_secs(10)).unwrap();
    assert_eq!(host.mapped_generations().len(), 1);
}

/// Proves: tools are listed and called as a session would; an error result and an unknown tool are
/// `Err` with their text; a call that starts nothing says so.
#[test]
fn tools_are_called_as_a_session_calls_them() {
    let host = TestHost::new().unwrap();
    host.load(probe()).unwrap();
    host.open_session("s");
    assert!(host.tools().contains(&"probe_start".to_owned()));
    assert_eq!(
        host.call("s", "probe_block", json!({"ms": 1})).unwrap(),
        "unblocked"
    );
    assert_eq!(
        host.call("s", "probe_panic", json!({})).unwrap_err(),
        "Error: tool call panicked: probe tool panicked"
    );
    assert_eq!(
        host.call("s", "nope", json!({})).unwrap_err(),
        "unknown tool nope"
    );
    assert!(matches!(
        host.start("s", "probe_block", json!({"ms": 1})),
        Err(TestkitError::NoTaskStarted { .. })
    ));
}

/// Proves: a file that is not a plugin is refused with the loader's reason, and reload without a
/// load says so.
#[test]
fn a_bad_file_and_a_reload_of_nothing_are_errors() {
    let host = TestHost::new().unwrap();
    assert!(matches!(host.reload(), Err(TestkitError::NothingLoaded)));
    let dir = taskhost_tests::Scratch::new("taskhost-testkit-test", "bad");
    let bad = dir.path().join("libbad.so");
    std::fs::write(&bad, b"not a library").unwrap();
    let e = host.load(&bad).unwrap_err().to_string();
    assert!(e.contains("libbad.so"), "{e}");
}
