//! How a registry task looks as an MCP task: its base fields (times in RFC 3339, a poll interval by
//! kind), and a settled task's result read from its record when this host did not run its call.

use rmcp::model::{Task, TaskPayload};
use serde_json::{Value, json};
use taskhost_registry::{TaskSnapshot, TaskStatus};

use crate::Taskhost;
use crate::utc::Utc;

/// The detail of a call task whose tool answered with a result, and with an error result.
pub(super) const TOOL_RESULT: &str = "tool result";
pub(super) const TOOL_ERROR: &str = "tool error result";

/// A settled task's MCP result from its record: its output, an error when its detail says the
/// tool or the process failed.
pub(super) fn recorded(
    host: &Taskhost,
    snapshot: &TaskSnapshot,
    agent: Option<&taskhost_registry::Agent>,
) -> TaskPayload {
    let detail = snapshot.detail.as_deref().unwrap_or("");
    if snapshot.status == TaskStatus::Failed {
        return TaskPayload::Failed {
            error: object(json!({"code": -32603, "message": detail})),
        };
    }
    let text = host
        .registry()
        .peek(snapshot.id.as_str(), agent)
        .or_else(|_| host.registry().read(snapshot.id.as_str(), agent))
        .map(|r| r.text)
        .unwrap_or_default();
    let failed_exit = detail.starts_with("exit code: ") && detail != "exit code: 0";
    let is_error = detail == TOOL_ERROR || failed_exit || detail.starts_with("signal: ");
    let status =
        taskhost_abi::wording::status_line(snapshot.status.as_str(), snapshot.detail.as_deref());
    let text = if detail == TOOL_RESULT || detail == TOOL_ERROR {
        text
    } else {
        format!("{text}{status}")
    };
    TaskPayload::Completed {
        result: object(json!({"content": [{"type": "text", "text": text}], "isError": is_error})),
    }
}

pub(super) fn object(value: Value) -> serde_json::Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => {
            let mut map = serde_json::Map::new();
            map.insert("value".to_owned(), other);
            map
        }
    }
}

/// The task's base fields: times, and how often to poll a task of its kind.
pub(crate) fn base(snapshot: &TaskSnapshot, status: rmcp::model::TaskStatus) -> Task {
    let updated = snapshot.finished_at_ms.unwrap_or_else(now_ms);
    let poll_ms = match snapshot.kind.as_str() {
        "subagent" => 5_000,
        "slurm" => 10_000,
        _ => 1_000,
    };
    let mut task = Task::new(
        snapshot.id.to_string(),
        status,
        Utc::from_ms(snapshot.started_at_ms).rfc3339(),
        Utc::from_ms(updated).rfc3339(),
    )
    .with_poll_interval_ms(poll_ms);
    if let Some(detail) = &snapshot.detail {
        task = task.with_status_message(detail.clone());
    }
    task
}

/// A short label for a call task: the tool and its arguments, cut to 100 characters.
pub(super) fn label(tool: &str, arguments: &Value) -> String {
    let shown = arguments
        .get("command")
        .or_else(|| arguments.get("prompt"))
        .and_then(Value::as_str)
        .map_or_else(|| arguments.to_string(), str::to_owned);
    let mut label = format!("{tool}: {shown}");
    if label.chars().count() > 100 {
        label = label.chars().take(99).collect::<String>() + "…";
    }
    label
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
