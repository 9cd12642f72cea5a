//! The host's refusals reach a plugin typed (`HostError`): one test per kind a plugin can branch
//! on, each asked through the probe's `probe_refusal` (it answers `<kind>: <message>`).

use std::time::Duration;

use serde_json::{Value, json};
use taskhost_registry::RegistryConfig;

use crate::fixtures::*;

/// A host with the probe and, with `surface`, a control surface; sessions `a` and `b` open.
fn host(name: &str, surface: bool) -> Fixture {
    let config = RegistryConfig::new()
        .with_teardown_grace(Duration::from_millis(200))
        .unwrap();
    let f = Fixture::with_config(name, config);
    f.load("taskhost_test_probe", &format!("probe_errors_{name}"));
    if surface {
        f.load("taskhost_test_surface", &format!("surface_errors_{name}"));
    }
    f.host.sessions().open("a");
    f.host.sessions().open("b");
    f
}

/// What the probe's `op` as `session` was refused with.
fn refusal(f: &Fixture, session: &str, args: Value) -> String {
    f.call("probe_refusal", session, args)
}

/// A long probe task of session `a`.
fn running(f: &Fixture) -> String {
    f.start_probe("a", json!({"lines": 100_000, "interval_ms": 5}))
}

#[test]
fn reading_a_task_of_another_session_is_not_found() {
    let f = host("not-found", true);
    let id = running(&f);
    let answer = refusal(&f, "b", json!({"op": "read", "task_id": id}));
    assert_eq!(answer, format!("NotFound: unknown task {id}"));
    let own = refusal(&f, "a", json!({"op": "read", "task_id": id}));
    assert_eq!(own, "ok");
}

#[test]
fn a_cancel_that_kills_its_own_task_is_forbidden() {
    let f = host("forbidden", true);
    let id = f.start_probe(
        "a",
        json!({"lines": 1000, "interval_ms": 5, "cancel": "reenter"}),
    );
    let kill = f.call("s_kill", "a", json!({"task_id": id}));
    assert_eq!(kill, format!("requested cancellation of task {id}"));
    let (output, _) = f.drain("a", &id);
    assert!(
        output.contains("kill of itself: ") && output.contains("kind of refusal: Forbidden\n"),
        "{output}"
    );
}

#[test]
fn waiting_for_a_pattern_that_is_no_regular_expression_is_invalid() {
    let f = host("invalid", true);
    let id = running(&f);
    let answer = refusal(
        &f,
        "a",
        json!({"op": "wait_output", "task_id": id, "pattern": "("}),
    );
    assert!(answer.starts_with("Invalid: "), "{answer}");
}

#[test]
fn input_to_a_task_that_takes_none_is_refused() {
    let f = host("refused", true);
    let id = running(&f);
    let answer = refusal(&f, "a", json!({"op": "write", "task_id": id}));
    assert_eq!(answer, format!("Refused: task {id} takes no input"));
}

#[test]
fn a_start_without_a_control_surface_is_unavailable() {
    let f = host("unavailable", false);
    let answer = refusal(&f, "a", json!({"op": "start"}));
    assert!(
        answer.starts_with("Unavailable: background tasks unavailable"),
        "{answer}"
    );
}

#[test]
fn a_start_whose_producer_fails_is_internal() {
    let f = host("internal", true);
    let answer = refusal(&f, "a", json!({"op": "start"}));
    assert_eq!(answer, "Internal: probe start refused");
}
