//! A minimal control surface: attaches the fence and reads, kills, waits and lists for its caller.

use taskhost_abi::serde_json::{Value, json};
use taskhost_abi::{Host, Plugin, ToolCall, ToolResult, export_plugin};

struct Surface;

impl Plugin for Surface {}

fn args(call: &ToolCall) -> Value {
    taskhost_abi::serde_json::from_str(call.arguments_json.as_str()).unwrap_or(Value::Null)
}

fn id(call: &ToolCall) -> String {
    args(call)["task_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

fn init(host: Host) -> Result<Surface, String> {
    host.attach_surface("test-surface");
    let schema = json!({"type": "object"});
    let h = host.clone();
    host.register_tool(
        "s_read",
        "Reads a task.",
        schema.clone(),
        move |call: &ToolCall| match h.read_task(call.session.as_str(), &id(call)) {
            Ok(r) => ToolResult::ok(format!("{}{}", r.text, r.snapshot.status_line())),
            Err(e) => ToolResult::error(e),
        },
    )?;
    let h = host.clone();
    host.register_tool(
        "s_kill",
        "Kills a task.",
        schema.clone(),
        move |call: &ToolCall| match h.kill_task(call.session.as_str(), &id(call), Some("test")) {
            Ok(k) if k.requested => {
                ToolResult::ok(format!("requested cancellation of task {}", id(call)))
            }
            Ok(k) => ToolResult::ok(format!(
                "task {} had already finished {}",
                id(call),
                k.snapshot.status_line()
            )),
            Err(e) => ToolResult::error(e),
        },
    )?;
    let h = host.clone();
    host.register_tool(
        "s_wait",
        "Waits for a task.",
        schema.clone(),
        move |call: &ToolCall| {
            let timeout = args(call)["timeout_ms"].as_f64().unwrap_or(10_000.0);
            match h.wait_task(call.session.as_str(), &id(call), timeout) {
                Ok(s) => ToolResult::ok(s.status_line()),
                Err(e) => ToolResult::error(e),
            }
        },
    )?;
    let h = host.clone();
    host.register_tool("s_list", "Lists tasks.", schema, move |call: &ToolCall| {
        let lines: Vec<String> = h
            .list_tasks(call.session.as_str())
            .iter()
            .map(|s| format!("{} {}", s.id, s.status.as_str()))
            .collect();
        ToolResult::ok(lines.join("\n"))
    })?;
    Ok(Surface)
}

export_plugin!(name: "surface", init: init);
