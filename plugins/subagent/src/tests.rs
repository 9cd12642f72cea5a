//! The `subagent` tool on the real host in-process (this crate's code linked in, no cdylib built).
//! The agent here is a program that never answers ACP, so each test ends at the setup timeout.

use std::time::Duration;

use taskhost_abi::serde_json::{Value, json};
use taskhost_testkit::{TaskStatus, TestHost};

fn host(config: Value) -> TestHost {
    let host = TestHost::new().expect("test host");
    host.load_linked_with_config(crate::__taskhost_root_module(), &config)
        .expect("the subagent plugin loads");
    host.open_session("s");
    host
}

/// An "agent" that reads its input and never answers.
fn silent_agent() -> Value {
    json!({"command": ["sleep", "30"], "setup_timeout_ms": 300, "grace_ms": 100})
}

#[test]
fn without_an_agent_configured_the_call_says_how_to_configure_one() {
    let host = host(json!({}));
    assert_eq!(
        host.call("s", "subagent", json!({"description": "d", "prompt": "p"})),
        Err("Error: subagent: no agent is configured; set command = [\"your-acp-agent\", \"--acp\"] in this plugin's [plugin.config] table".to_owned())
    );
}

#[test]
fn an_agent_that_does_not_answer_fails_the_call_at_the_setup_timeout() {
    let host = host(silent_agent());
    let error = host
        .call("s", "subagent", json!({"description": "d", "prompt": "p"}))
        .expect_err("fails");
    assert!(
        error.starts_with(
            "Error: the subagent failed: agent did not answer initialize within 300 ms"
        ),
        "{error}"
    );
}

#[test]
fn a_background_subagent_is_a_task_that_settles_with_the_reason() {
    let host = host(silent_agent());
    assert_eq!(
        host.call(
            "s",
            "subagent",
            json!({"description": "look", "prompt": "p", "run_in_background": true})
        ),
        Ok("started background subagent task subagent-1".to_owned())
    );
    let (_, end) = host
        .read_to_end("s", "subagent-1", Duration::from_secs(30))
        .expect("settles");
    assert_eq!(end.status, TaskStatus::Failed);
    assert_eq!(end.label, "look");
    let reported = host.start(
        "s",
        "subagent",
        json!({"description": "again", "prompt": "p", "run_in_background": true}),
    );
    assert_eq!(
        reported.ok().as_deref(),
        Some("subagent-2"),
        "reported as data"
    );
}

#[test]
fn blank_arguments_are_named() {
    let host = host(silent_agent());
    assert_eq!(
        host.call("s", "subagent", json!({"description": " ", "prompt": "p"})),
        Err("Error: invalid description: expected a non-empty string, got \" \"".to_owned())
    );
}

#[test]
fn without_background_runs_the_argument_is_not_offered() {
    let mut config = silent_agent();
    config["enable_run_in_background"] = json!(false);
    let host = host(config);
    let schema = host.schema("subagent").expect("served");
    assert!(
        schema["properties"].get("run_in_background").is_none(),
        "{schema}"
    );
}

#[test]
fn an_unknown_permission_policy_fails_the_load_naming_the_choices() {
    let host = TestHost::new().expect("test host");
    let error = host
        .load_linked_with_config(
            crate::__taskhost_root_module(),
            &json!({"permission_policy": "sometimes"}),
        )
        .expect_err("refused");
    assert!(
        error.to_string().contains(
            "invalid config key permission_policy: expected `reject` or `allow`, got \"sometimes\""
        ),
        "{error}"
    );
}
