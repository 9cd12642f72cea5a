//! MCP Tasks (the 2026-07-28 extension) over HTTP with raw JSON-RPC: a call that asks for a task
//! gets a registry task that `tasks/get` follows to its result (the `task_*` tools see the same
//! task), a client that did not declare the extension (or a 2025-11-25 session) gets a plain result, `tasks/cancel` ends the
//! process, another principal's id is refused as an unknown one, and a task resolves on the next
//! host of the state directory.

use std::time::Duration;

use serde_json::{Value, json};

use crate::fixtures::*;
use crate::http_wire::{Client, HttpHost};
use crate::mcp::alive;

/// Starts `command` as an MCP task; its id.
fn task(client: &Client, command: &str) -> String {
    let created = client.with_tasks(
        "tools/call",
        Some("bash"),
        json!({"name": "bash", "arguments": {"command": command}}),
    );
    assert_eq!(created["result"]["resultType"], json!("task"), "{created}");
    assert_eq!(created["result"]["status"], json!("working"), "{created}");
    created["result"]["taskId"].as_str().unwrap().to_owned()
}

fn get(client: &Client, id: &str) -> Value {
    client.with_tasks("tasks/get", Some(id), json!({"taskId": id}))
}

/// Polls `tasks/get` until the task's status is terminal.
fn settled(client: &Client, id: &str) -> Value {
    let mut last = Value::Null;
    assert!(
        eventually(Duration::from_secs(30), || {
            last = get(client, id);
            last["result"]["status"] != json!("working")
        }),
        "{last}"
    );
    last["result"].clone()
}

#[test]
fn a_call_that_asks_for_a_task_gets_one_followed_to_its_result_in_either_view() {
    let dir = scratch("mcp-tasks-result");
    let host = HttpHost::start(&dir, &[]);
    let alice = Client::new(&host, &host.token("alice"));
    let id = task(&alice, "echo from the task; exit 3");
    assert!(id.starts_with("bash-"), "{id}");
    let done = settled(&alice, &id);
    assert_eq!(done["status"], json!("completed"), "{done}");
    assert_eq!(
        done["result"]["isError"],
        json!(true),
        "a non-zero exit: {done}"
    );
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("from the task\n"), "{text}");
    assert!(text.contains("exit code: 3"), "{text}");
    assert!(alice.call("task_list", json!({})).contains(&id));

    let plain = alice.modern(
        "tools/call",
        Some("bash"),
        json!({"name": "bash", "arguments": {"command": "echo plain"}}),
    );
    assert!(
        plain.body.contains("\"resultType\":\"complete\""),
        "{plain:?}"
    );
    assert!(plain.tool_text().starts_with("plain\n"), "{plain:?}");
    // The extension is the 2026-07-28 era's: a 2025-11-25 session declaring it is answered as a call.
    let legacy = crate::http_wire::LegacySession::declaring(
        Client::new(&host, alice.token.as_deref().unwrap()),
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
    );
    let answered = legacy.call("bash", json!({"command": "echo legacy"}));
    assert!(answered.starts_with("legacy\n"), "{answered}");
    let greet = alice.with_tasks(
        "tools/call",
        Some("task_list"),
        json!({"name": "task_list", "arguments": {}}),
    );
    assert_eq!(
        greet["result"]["resultType"],
        json!("complete"),
        "a tool that does not support tasks answers as a call: {greet}"
    );
}

#[test]
fn tasks_cancel_ends_the_process_and_other_principals_see_no_task() {
    let dir = scratch("mcp-tasks-cancel");
    let host = HttpHost::start(&dir, &[]);
    let alice = Client::new(&host, &host.token("alice"));
    let bob = Client::new(&host, &host.token("bob"));
    let id = task(&alice, "echo $$; exec sleep 1000");
    let pid = crate::http_wire::printed_pid(&alice, &id);
    for foreign in [get(&bob, &id), get(&alice, "bash-999")] {
        assert_eq!(foreign["error"]["code"], json!(-32602), "{foreign}");
    }
    let refused = bob.with_tasks("tasks/cancel", Some(&id), json!({"taskId": id}));
    assert_eq!(refused["error"]["code"], json!(-32602), "{refused}");
    assert!(alive(pid), "another principal's cancel left it running");

    let cancelled = alice.with_tasks("tasks/cancel", Some(&id), json!({"taskId": id}));
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    assert!(
        eventually(Duration::from_secs(20), || !alive(pid)),
        "the process ended"
    );
    assert_eq!(settled(&alice, &id)["status"], json!("cancelled"));
}

#[test]
fn a_task_resolves_on_the_next_host_as_its_records_say() {
    let dir = scratch("mcp-tasks-restart");
    // No handover: the running task is lost with its host.
    let config = crate::handover::grace_config(&dir, 0);
    let mut host = HttpHost::start(&dir, &["--config", &config]);
    let token = host.token("alice");
    let alice = Client::new(&host, &token);
    let finished = task(&alice, "echo kept");
    assert_eq!(settled(&alice, &finished)["status"], json!("completed"));
    let running = task(&alice, "exec sleep 1000");
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    drop(host);

    let next = HttpHost::start(&dir, &["--config", &config]);
    let alice = Client::new(&next, &token);
    let lost = get(&alice, &running);
    assert_eq!(lost["result"]["status"], json!("failed"), "{lost}");
    let why = lost["result"]["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(why.contains("host stopped"), "{lost}");
    let kept = get(&alice, &finished);
    assert_eq!(kept["result"]["status"], json!("completed"), "{kept}");
    assert!(
        kept["result"]["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .starts_with("kept\n"),
        "{kept}"
    );
}

/// A task that runs a process is handed to the next host after a crash (the handover's keeper holds
/// it): `tasks/get` on the next host follows the same task to its real end, its whole output the
/// result.
#[test]
fn an_mcp_task_is_carried_across_a_host_crash_to_its_real_end() {
    let dir = scratch("mcp-tasks-handover");
    let mut host = HttpHost::start(&dir, &[]);
    let token = host.token("alice");
    let alice = Client::new(&host, &token);
    let release = dir.join("release");
    let id = task(
        &alice,
        &format!(
            "echo before; while [ ! -e {} ]; do sleep 0.05; done; echo after; exit 4",
            release.display()
        ),
    );
    assert_eq!(get(&alice, &id)["result"]["status"], json!("working"));
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    // The same `--listen` value: the next host takes the waiting keeper and its listening socket.
    let next = HttpHost::start(&dir, &[]);
    assert_eq!(next.url, host.url, "the same socket serves");
    drop(host);
    let alice = Client::new(&next, &token);
    assert_eq!(get(&alice, &id)["result"]["status"], json!("working"));
    std::fs::write(&release, "").unwrap();
    let done = settled(&alice, &id);
    assert_eq!(done["status"], json!("completed"), "{done}");
    assert_eq!(done["result"]["isError"], json!(true), "{done}");
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.starts_with("before\nafter\n") && text.contains("exit code: 4"),
        "{done}"
    );
}

/// A producer words its start as it likes (the probe: `off it goes as <id>`): MCP Tasks takes the
/// task from the result's data, not its text, and follows it to its end; a plain call's result
/// names the same kind of task in its `_meta`.
#[test]
fn a_producer_that_words_its_start_otherwise_still_gives_its_task() {
    let dir = scratch("mcp-tasks-worded");
    let config = dir.join("worded.toml");
    std::fs::write(
        &config,
        format!(
            "[[plugin]]\npath = {:?}\n[[plugin]]\npath = {:?}\nconfig = {{ start_words = \"off it goes as\" }}\n",
            built("taskhost_plugin_tasks"),
            built("taskhost_test_probe")
        ),
    )
    .unwrap();
    let host = HttpHost::start(&dir, &["--config", config.to_str().unwrap()]);
    let alice = Client::new(&host, &host.token("alice"));
    let created = alice.with_tasks(
        "tools/call",
        Some("probe_produce"),
        json!({"name": "probe_produce", "arguments": {"lines": 2}}),
    );
    assert_eq!(created["result"]["resultType"], json!("task"), "{created}");
    let id = created["result"]["taskId"].as_str().unwrap_or_default();
    assert!(id.starts_with("probe-"), "{created}");
    assert_eq!(settled(&alice, id)["status"], json!("completed"));

    let plain = alice.answer("probe_produce", json!({"lines": 1}));
    let words = plain.text.lines().next().unwrap_or_default();
    let named = words.strip_prefix("off it goes as ");
    assert!(named.is_some_and(|n| n.starts_with("probe-")), "{plain:?}");
    assert_eq!(plain.started.as_deref(), named, "{plain:?}");
}
