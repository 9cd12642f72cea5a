//! The task tools on the real host in-process (this crate's code linked in, no cdylib built), over
//! process tasks the test host starts as the bash plugin would.

use taskhost_abi::serde_json::json;
use taskhost_testkit::TestHost;

fn host() -> TestHost {
    let host = TestHost::new().expect("test host");
    host.load_linked(crate::__taskhost_root_module())
        .expect("the tasks plugin loads");
    host.open_session("s");
    host
}

#[test]
fn task_list_shows_each_task_or_says_there_is_none() {
    let host = host();
    assert_eq!(
        host.call("s", "task_list", json!({})),
        Ok("(no background tasks)".to_owned())
    );
    let id = host
        .start_process("s", "bash", "sleep 30")
        .expect("started");
    assert_eq!(
        host.call("s", "task_list", json!({})),
        Ok(format!("{id} [bash] running — sleep 30"))
    );
}

#[test]
fn task_output_with_wait_for_returns_once_the_line_arrived() {
    let host = host();
    let id = host
        .start_process(
            "s",
            "bash",
            "echo starting; sleep 0.2; echo ready on port 8080; sleep 30",
        )
        .expect("started");
    let read = host
        .call(
            "s",
            "task_output",
            json!({"task_id": id, "wait_for": "ready on port \\d+", "timeout_ms": 20000}),
        )
        .expect("read");
    assert!(
        read.ends_with("ready on port 8080\n[status: running]"),
        "{read}"
    );
    assert_eq!(
        host.call("s", "task_output", json!({"task_id": id})),
        Ok("(no new output)\n[status: running]".to_owned())
    );
}

#[test]
fn a_waiting_read_returns_the_rest_and_the_end() {
    let host = host();
    let id = host
        .start_process("s", "bash", "echo done; exit 4")
        .expect("started");
    assert_eq!(
        host.call("s", "task_output", json!({"task_id": id, "wait": true})),
        Ok("done\n[status: completed, exit code: 4]".to_owned())
    );
}

#[test]
fn task_kill_requests_once_then_says_it_had_finished() {
    let host = host();
    let id = host
        .start_process("s", "bash", "sleep 30")
        .expect("started");
    assert_eq!(
        host.call("s", "task_kill", json!({"task_id": id})),
        Ok(format!("requested cancellation of task {id}"))
    );
    host.call("s", "task_output", json!({"task_id": id, "wait": true}))
        .expect("settles");
    assert_eq!(
        host.call("s", "task_kill", json!({"task_id": id})),
        Ok(format!(
            "task {id} had already finished [status: killed, signal: SIGTERM]"
        ))
    );
}

#[test]
fn an_unreported_settlement_sends_its_owner_one_notice() {
    let host = host();
    let id = host.start_process("s", "bash", "true").expect("started");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let notices = loop {
        let notices = host.notices("s");
        if !notices.is_empty() || std::time::Instant::now() > deadline {
            break notices;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    };
    assert_eq!(
        notices,
        vec![format!(
            "background task {id} (bash: true) finished [status: completed, exit code: 0]. Read its output with task_output."
        )]
    );
}

#[test]
fn bad_reads_are_refused_with_the_reason() {
    let host = host();
    let id = host
        .start_process("s", "bash", "sleep 30")
        .expect("started");
    let bad = host
        .call(
            "s",
            "task_output",
            json!({"task_id": id, "wait_for": "(unclosed"}),
        )
        .expect_err("refused");
    assert!(
        bad.starts_with("Error: invalid wait_for: \"(unclosed\" is not a regular expression"),
        "{bad}"
    );
    assert_eq!(
        host.call(
            "s",
            "task_output",
            json!({"task_id": id, "wait": false, "wait_for": "x"})
        ),
        Err("Error: invalid wait_for: it applies to a waiting read (wait: true)".to_owned())
    );
    assert_eq!(
        host.call("s", "task_output", json!({"task_id": ""})),
        Err("Error: invalid task_id: expected a non-empty string, got \"\"".to_owned())
    );
    assert_eq!(
        host.call("s", "task_input", json!({"task_id": id, "text": "x"})),
        Err(format!("Error: task {id} takes no input"))
    );
}

#[test]
fn a_bad_config_key_fails_the_load_naming_the_key() {
    let host = TestHost::new().expect("test host");
    let error = host
        .load_linked_with_config(
            crate::__taskhost_root_module(),
            &json!({"wait_timeout_ms": -5}),
        )
        .expect_err("refused");
    assert!(
        error.to_string().contains(
            "invalid config key wait_timeout_ms: expected a positive number of milliseconds, got -5"
        ),
        "{error}"
    );
}
