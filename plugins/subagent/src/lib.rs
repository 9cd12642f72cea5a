//! The subagent producer. The ACP client that runs a child agent is not built yet (issue 6); until
//! then the `subagent` tool is registered so deployments see it, and every call says what is missing
//! instead of pretending to run an agent.

use taskhost_abi::serde_json::json;
use taskhost_abi::{Host, Plugin, ToolCall, ToolResult, export_plugin};

struct Subagent;

impl Plugin for Subagent {}

fn init(host: Host) -> Result<Subagent, String> {
    let configured = host.config()["command"]
        .as_array()
        .is_some_and(|c| !c.is_empty());
    host.register_tool(
        "subagent",
        "Runs a child agent over ACP with a prompt and returns its final message. This call waits for the result by default. Set `run_in_background: true` to return a task id; collect with `task_output` and stop with `task_kill`.",
        json!({"type": "object", "properties": {
            "description": {"type": "string"},
            "prompt": {"type": "string"},
            "run_in_background": {"type": "boolean", "description": "Whether to run as a background task and return its id. Defaults to false; collect with task_output or stop with task_kill."}
        }, "required": ["description", "prompt"]}),
        move |_: &ToolCall| {
            if configured {
                ToolResult::error("subagent: the ACP client is not implemented in this build yet")
            } else {
                ToolResult::error("subagent: no agent is configured; set command = [\"your-acp-agent\", \"--acp\"] in this plugin's [plugin.config] table")
            }
        },
    )?;
    Ok(Subagent)
}

export_plugin!(name: "subagent", init: init);
