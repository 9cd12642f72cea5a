//! MCP Tasks of the 2025-11-25 era (in the core protocol) over HTTP with raw JSON-RPC: the session's
//! `initialize` advertises `capabilities.tasks` and its `tools/list` each tool's
//! `execution.taskSupport`; a `tools/call` with `params.task` is a registry task that `tasks/get`
//! follows and `tasks/result` answers with the call's result; `tasks/list` and the `task_*` tools
//! see it; `tasks/cancel` ends the process; another principal's id is an unknown one; a task
//! resolves on the next host of the state directory. The Python SDK's tasks client of this era
//! drives the same over stdio and HTTP (`tests/python/legacy_tasks.py`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::fixtures::*;
use crate::http_wire::{Client, HttpHost, LegacySession};
use crate::mcp::alive;

/// The answer (a JSON-RPC message) to `method` with `params` in `session`.
fn ask(session: &LegacySession, method: &str, params: Value) -> Value {
    let response =
        session.post(json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}));
    response
        .messages()
        .into_iter()
        .find(|m| m.get("id").is_some())
        .unwrap_or_else(|| json!({"no answer": response.body}))
}

/// Starts `command` as a task of this era; its id.
fn task(session: &LegacySession, command: &str) -> String {
    let created = ask(
        session,
        "tools/call",
        json!({"name": "bash", "arguments": {"command": command}, "task": {"ttl": 60000}}),
    );
    let task = &created["result"]["task"];
    assert_eq!(task["status"], json!("working"), "{created}");
    assert!(
        task.get("ttl").is_some() && task["pollInterval"].is_number(),
        "{created}"
    );
    task["taskId"].as_str().unwrap().to_owned()
}

fn get(session: &LegacySession, id: &str) -> Value {
    ask(session, "tasks/get", json!({"taskId": id}))
}

#[test]
fn in_the_2025_11_25_era_a_task_call_is_created_polled_and_its_result_read() {
    let dir = scratch("legacy-tasks-result");
    let host = HttpHost::start(&dir, &[]);
    let token = host.token("alice");
    let alice = Client::new(&host, &token);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "taskhost-tests", "version": "1"}}});
    let answer = alice.post(&[], init.to_string().as_bytes()).messages();
    assert_eq!(
        answer[0]["result"]["capabilities"]["tasks"],
        json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        "{answer:?}"
    );
    let session = LegacySession::open(Client::new(&host, &token));
    let tools = ask(&session, "tools/list", json!({}));
    let bash = tools["result"]["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "bash"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        bash["execution"]["taskSupport"],
        json!("optional"),
        "{tools}"
    );

    let id = task(&session, "echo from the task; exit 3");
    let mut last = Value::Null;
    assert!(
        eventually(Duration::from_secs(30), || {
            last = get(&session, &id);
            last["result"]["status"] != json!("working")
        }),
        "{last}"
    );
    assert_eq!(last["result"]["status"], json!("completed"), "{last}");
    assert!(
        last["result"].get("result").is_none(),
        "this era's get has no result: {last}"
    );
    let result = ask(&session, "tasks/result", json!({"taskId": id}));
    let text = result["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("from the task\n") && text.contains("exit code: 3"),
        "{result}"
    );
    assert_eq!(
        result["result"]["isError"],
        json!(true),
        "a non-zero exit: {result}"
    );
    assert_eq!(
        result["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        json!(id)
    );
    let listed = ask(&session, "tasks/list", json!({}));
    assert!(
        listed["result"]["tasks"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["taskId"] == json!(id))),
        "{listed}"
    );
    assert!(session.call("task_list", json!({})).contains(&id));
    // Without `params.task`, the same tool answers as a call.
    let plain = session.call("bash", json!({"command": "echo plain"}));
    assert!(plain.starts_with("plain\n"), "{plain}");
}

#[test]
fn in_the_2025_11_25_era_tasks_result_waits_for_the_end_and_cancel_ends_the_process() {
    let dir = scratch("legacy-tasks-cancel");
    let host = HttpHost::start(&dir, &[]);
    let alice = LegacySession::open(Client::new(&host, &host.token("alice")));
    let bob = LegacySession::open(Client::new(&host, &host.token("bob")));
    let release = dir.join("release");
    let waits = task(
        &alice,
        &format!(
            "while [ ! -e {} ]; do sleep 0.05; done; echo released",
            release.display()
        ),
    );
    let waiting = std::thread::scope(|s| {
        let result = s.spawn(|| ask(&alice, "tasks/result", json!({"taskId": waits})));
        std::fs::write(&release, "").unwrap();
        result.join().unwrap()
    });
    let text = waiting["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(text.starts_with("released\n"), "{waiting}");

    let id = task(&alice, "echo $$; exec sleep 1000");
    let pid = crate::http_wire::printed_pid(&alice.client, &id);
    for foreign in [get(&bob, &id), get(&alice, "bash-999")] {
        assert_eq!(foreign["error"]["code"], json!(-32602), "{foreign}");
    }
    let refused = ask(&bob, "tasks/cancel", json!({"taskId": id}));
    assert_eq!(refused["error"]["code"], json!(-32602), "{refused}");
    let bobs = ask(&bob, "tasks/list", json!({}));
    assert_eq!(bobs["result"]["tasks"], json!([]), "{bobs}");
    assert!(alive(pid), "another principal's cancel left it running");

    let cancelled = ask(&alice, "tasks/cancel", json!({"taskId": id}));
    assert_eq!(
        cancelled["result"]["status"],
        json!("cancelled"),
        "{cancelled}"
    );
    assert!(
        eventually(Duration::from_secs(20), || !alive(pid)),
        "the process ended"
    );
    let again = ask(&alice, "tasks/cancel", json!({"taskId": id}));
    assert_eq!(
        again["error"]["code"],
        json!(-32602),
        "a settled task: {again}"
    );
    let task_list = ask(
        &alice,
        "tools/call",
        json!({"name": "task_list", "arguments": {}, "task": {}}),
    );
    assert_eq!(task_list["error"]["code"], json!(-32601), "{task_list}");
}

#[test]
fn in_the_2025_11_25_era_a_task_resolves_on_the_next_host_as_its_records_say() {
    let dir = scratch("legacy-tasks-restart");
    let config = crate::handover::grace_config(&dir, 0);
    let mut host = HttpHost::start(&dir, &["--config", &config]);
    let token = host.token("alice");
    let alice = LegacySession::open(Client::new(&host, &token));
    let finished = task(&alice, "echo kept");
    let result = ask(&alice, "tasks/result", json!({"taskId": finished}));
    assert!(result.get("result").is_some(), "{result}");
    let running = task(&alice, "exec sleep 1000");
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    drop(host);

    let next = HttpHost::start(&dir, &["--config", &config]);
    let alice = LegacySession::open(Client::new(&next, &token));
    let lost = get(&alice, &running);
    assert_eq!(lost["result"]["status"], json!("failed"), "{lost}");
    let why = ask(&alice, "tasks/result", json!({"taskId": running}));
    let message = why["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("host stopped"), "{why}");
    let kept = ask(&alice, "tasks/result", json!({"taskId": finished}));
    assert!(
        kept["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("kept\n"),
        "{kept}"
    );
}

/// Proves: a 2025-11-25 session parked while idle comes back in its era: answered by the handler
/// its next request restores, its `tools/list` still shows each tool's `execution`, and a
/// `tools/call` with `params.task` is still created as a task.
#[test]
fn in_the_2025_11_25_era_a_parked_session_comes_back_in_its_era() {
    let dir = scratch("legacy-tasks-parked");
    let host = crate::http_bounds::parking_host(&dir);
    let said = |what: &str| {
        let log = host.log.lock().unwrap_or_else(|e| e.into_inner());
        log.iter().filter(|l| l.contains(what)).count()
    };
    let session = LegacySession::open(Client::new(&host, &host.token("alice")));
    assert!(
        eventually(Duration::from_secs(20), || said(
            "an idle legacy session is parked"
        ) >= 1),
        "parked"
    );
    let tools = ask(&session, "tools/list", json!({}));
    assert_eq!(said("a parked legacy session is restored"), 1, "{tools}");
    let bash = tools["result"]["tools"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == "bash"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        bash["execution"]["taskSupport"],
        json!("optional"),
        "{tools}"
    );
    let id = task(&session, "echo back");
    let result = ask(&session, "tasks/result", json!({"taskId": id}));
    assert!(
        result["result"]["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("back\n")),
        "{result}"
    );
}

/// Proves, with the Python SDK's tasks client of this era (see `tests/python/legacy_tasks.py`), over
/// stdio and over HTTP: create, poll, result, list, cancel, an unknown id, a plain call.
#[test]
fn the_python_sdks_tasks_client_creates_polls_reads_lists_and_cancels_tasks() {
    // The 2025-11-25 era's tasks client is in `mcp` 1.30 (2.x dropped it).
    let Some(python) = crate::clients::venv_python("mcp-venv-tasks") else {
        eprintln!(
            "the_python_sdks_tasks_client_creates_polls_reads_lists_and_cancels_tasks: skipped: no \
             venv at target/mcp-venv-tasks (scripts/mcp-venv makes one; pip could not reach the registry?)"
        );
        return;
    };
    let dir = scratch("legacy-tasks-python");
    crate::clients::copy_tasks_and_bash(&dir);
    let host = HttpHost::start(&dir, &[]);
    let token = host.token("alice");
    let script = crate::clients::python_script("legacy_tasks.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(crate::mcp::binary())
        .arg(dir.path())
        .arg(&host.url)
        .arg(&token)
        .env("XDG_STATE_HOME", dir.join("state-home"))
        .env("XDG_RUNTIME_DIR", dir.path())
        .output()
        .expect("run the Python SDK's tasks client");
    let (stdout, stderr) = crate::clients::succeeded(&out);
    assert!(
        stdout.contains("ok stdio") && stdout.contains("ok http"),
        "{stdout}{stderr}"
    );
}
