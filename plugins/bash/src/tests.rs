//! The `bash` tool on the real host in-process (this crate's code linked in, no cdylib built).

use std::time::Duration;

use taskhost_abi::serde_json::{Value, json};
use taskhost_testkit::{TaskStatus, TestHost};

fn host(config: Option<Value>) -> TestHost {
    let host = TestHost::new().expect("test host");
    let module = crate::__taskhost_root_module();
    match config {
        Some(c) => host.load_linked_with_config(module, &c),
        None => host.load_linked(module),
    }
    .expect("the bash plugin loads");
    host.open_session("s");
    host
}

#[test]
fn a_foreground_command_returns_its_output_and_exit_code() {
    let host = host(None);
    assert_eq!(
        host.call("s", "bash", json!({"command": "echo hi; echo err >&2"})),
        Ok("hi\n[stderr]\nerr\n[exit code: 0]".to_owned())
    );
    assert_eq!(
        host.call("s", "bash", json!({"command": "exit 3"})),
        Ok("[exit code: 3]".to_owned())
    );
}

#[test]
fn a_background_command_is_a_task_whose_output_is_complete() {
    let host = host(None);
    let answer = host
        .call(
            "s",
            "bash",
            json!({"command": "seq 1 500", "run_in_background": true}),
        )
        .expect("started");
    assert_eq!(answer, "started background task bash-1");
    let reported = host.start(
        "s",
        "bash",
        json!({"command": "true", "run_in_background": true}),
    );
    assert_eq!(reported.ok().as_deref(), Some("bash-2"), "reported as data");
    let (output, end) = host
        .read_to_end("s", "bash-1", Duration::from_secs(30))
        .expect("settles");
    let expected: String = (1..=500).map(|i| format!("{i}\n")).collect();
    assert_eq!(output, expected);
    assert_eq!(end.status, TaskStatus::Completed);
    assert_eq!(end.detail.as_deref(), Some("exit code: 0"));
}

#[test]
fn a_foreground_command_past_its_timeout_continues_as_a_background_task() {
    let host = host(None);
    let answer = host
        .call(
            "s",
            "bash",
            json!({"command": "echo begun; sleep 30", "timeout_ms": 300}),
        )
        .expect("promoted");
    let reported = host.start(
        "s",
        "bash",
        json!({"command": "sleep 30", "timeout_ms": 300}),
    );
    assert_eq!(reported.ok().as_deref(), Some("bash-2"), "reported as data");
    // What it printed before the timeout precedes the marker (on a busy machine, maybe nothing yet).
    assert!(
        answer.ends_with(
            "[still running after 300 ms: continues as background task bash-1; read it with task_output]"
        ),
        "{answer}"
    );
    assert_eq!(host.list("s")[0].status, TaskStatus::Running);
}

#[test]
fn bad_arguments_are_named_and_run_nothing() {
    let host = host(None);
    for (args, error) in [
        (
            json!({"command": " "}),
            "Error: invalid command: expected a non-empty string, got \" \"",
        ),
        (
            json!({"command": "true", "timeout_ms": 0}),
            "Error: invalid timeout_ms: expected a positive integer, got 0",
        ),
        (
            json!({"command": "true", "tty": true, "cols": 0}),
            "Error: invalid cols: expected an integer from 1 to 1000, got 0",
        ),
        (
            json!({"command": 5}),
            "Error: invalid command: expected a string, got 5",
        ),
    ] {
        assert_eq!(host.call("s", "bash", args), Err(error.to_owned()));
    }
    assert!(host.list("s").is_empty());
}

#[test]
fn without_background_runs_the_argument_is_not_offered_and_is_refused() {
    let host = host(Some(json!({"enable_run_in_background": false})));
    let schema = host.schema("bash").expect("served");
    assert!(
        schema["properties"].get("run_in_background").is_none(),
        "{schema}"
    );
    assert!(schema["properties"].get("command").is_some(), "{schema}");
    assert_eq!(
        host.call("s", "bash", json!({"command": "true", "run_in_background": true})),
        Err("Error: run_in_background is disabled for this deployment (enable_run_in_background: false)".to_owned())
    );
}

#[test]
fn a_bad_config_key_fails_the_load_naming_the_key() {
    let host = TestHost::new().expect("test host");
    let module = crate::__taskhost_root_module();
    let error = host
        .load_linked_with_config(module, &json!({"grace_ms": 0}))
        .expect_err("refused");
    assert!(
        error
            .to_string()
            .contains("invalid config key grace_ms: expected a positive integer, got 0"),
        "{error}"
    );
    let error = host
        .load_linked_with_config(module, &json!({"timeout_ms": 10, "max_timeout_ms": 5}))
        .expect_err("refused");
    assert!(
        error
            .to_string()
            .contains("bash: timeout_ms (10) exceeds max_timeout_ms (5)"),
        "{error}"
    );
}
