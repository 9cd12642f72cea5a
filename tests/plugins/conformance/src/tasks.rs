//! The tasks extension's fixtures (SEP-2663): a tool that runs only as a call, tools MCP clients
//! may run as tasks (one that takes a while, one that fails as a tool, one that fails as a
//! protocol error, one that asks its client first), and one that runs only as a task.

use taskhost_abi::sdk::{McpError, runs_as_task};
use taskhost_abi::serde_json::{Value, json};
use taskhost_abi::{Host, ToolCall, ToolResult};

use crate::tools::text;

fn arguments(call: &ToolCall) -> Value {
    taskhost_abi::serde_json::from_str(call.arguments()).unwrap_or_else(|_| json!({}))
}

fn error_result(message: &str) -> ToolResult {
    ToolResult::mcp(
        message,
        true,
        &json!({"content": [{"type": "text", "text": message}], "isError": true}),
    )
}

pub(crate) fn register(host: &Host) -> Result<(), String> {
    let name = json!({"type": "object", "properties": {"name": {"type": "string"}}});
    host.register_tool("greet", "Greets, at once", name, |call: &ToolCall| {
        text(&format!(
            "Hello, {}!",
            arguments(call)["name"].as_str().unwrap_or("World")
        ))
    })?;
    let seconds =
        json!({"type": "object", "properties": {"seconds": {"type": "number", "minimum": 0}}});
    host.register_tool_with(
        "slow_compute",
        "Sleeps `seconds`, then answers",
        seconds,
        runs_as_task(),
        |call: &ToolCall| {
            let seconds = arguments(call)["seconds"]
                .as_f64()
                .unwrap_or(1.0)
                .clamp(0.0, 600.0);
            std::thread::sleep(std::time::Duration::from_secs_f64(seconds));
            text(&format!("Computed after {seconds} seconds"))
        },
    )?;
    let empty = json!({"type": "object", "properties": {}});
    host.register_tool_with(
        "failing_job",
        "Fails as a tool (a result with isError)",
        empty.clone(),
        json!({"execution": {"taskSupport": "required"}}),
        |_: &ToolCall| error_result("The job failed"),
    )?;
    host.register_tool_with(
        "protocol_error_job",
        "Fails with a JSON-RPC error",
        empty.clone(),
        runs_as_task(),
        |_: &ToolCall| {
            McpError {
                code: -32603,
                message: "The job broke down".to_owned(),
                data: None,
            }
            .tool_result()
        },
    )?;
    let h = host.clone();
    host.register_tool_with("confirm_delete", "Asks its client to confirm, then answers", empty, runs_as_task(), move |_: &ToolCall| {
        let asked = h.call_ask("elicitation/create", &json!({"mode": "form", "message": "Delete the file?",
            "requestedSchema": {"type": "object", "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}}));
        match asked {
            Ok(answer) if answer["action"] == "accept" && answer["content"]["confirm"] == true => text("Deleted"),
            Ok(answer) => text(&format!("Not deleted ({})", answer["action"].as_str().unwrap_or("no answer"))),
            Err(e) => error_result(&format!("Could not ask: {e}")),
        }
    })?;
    let h = host.clone();
    host.register_tool_with("multi_input", "Asks its client two things at once, then answers", json!({"type": "object", "properties": {}}), runs_as_task(), move |_: &ToolCall| {
        let form = |message: &str, field: &str| json!({"method": "elicitation/create", "params": {"mode": "form",
            "message": message, "requestedSchema": {"type": "object", "properties": {field: {"type": "string"}}, "required": [field]}}});
        match h.call_ask_all(&json!({"first": form("First value?", "first"), "second": form("Second value?", "second")})) {
            Ok(answers) => text(&format!("Got {} and {}", answers["first"]["content"]["first"], answers["second"]["content"]["second"])),
            Err(e) => error_result(&format!("Could not ask: {e}")),
        }
    })?;
    host.register_tool_with("test_tool_with_task", "MRTR round 1 gathers user_name, round 2 escalates to a task (SEP-2663 composition)",
        json!({"type": "object", "properties": {}}),
        json!({"execution": {"taskSupport": "required"}, "_meta": {"taskhost/escalates": true}}), |call: &ToolCall| {
        let request: Value = taskhost_abi::serde_json::from_str(call.request()).unwrap_or_else(|_| json!({}));
        let name = request["inputResponses"]["user_name"]["content"]["name"].as_str().map(str::to_owned);
        match (name, request["_meta"].get("taskhost/task")) {
            (None, _) => ToolResult::mcp("input required", false, &json!({"resultType": "input_required",
                "inputRequests": {"user_name": {"method": "elicitation/create", "params": {"mode": "form",
                    "message": "What is your name?", "requestedSchema": {"type": "object",
                        "properties": {"name": {"type": "string"}}, "required": ["name"]}}}}})),
            (Some(_), None) => ToolResult::mcp("go on as a task", false, &json!({"resultType": "task"})),
            (Some(name), Some(_)) => text(&format!("Hello, {name}! (from the task)")),
        }
    })?;
    Ok(())
}
