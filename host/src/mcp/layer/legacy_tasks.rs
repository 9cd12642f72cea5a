//! MCP Tasks of the 2025-11-25 era (SEP-1686, in the core protocol): `tools/call` with
//! `params.task`, `tasks/get`, `tasks/result`, `tasks/list`, `tasks/cancel`, and
//! `capabilities.tasks`: what the [layer](super) answers for a session that negotiated 2025-11-25,
//! and what it adds to rmcp's answers to `initialize` and `tools/list`.
//!
//! The tasks are the same registry tasks as the other era's and the `task_*` tools' (created by
//! [`McpTasks::start`] or a producer's background start, recorded before they are answered), so
//! each view reads what the others created. `ttl` is `null`: a task is kept as long as its record
//! (`[state] retention`), whatever the client asked. `notifications/tasks/status` is not sent (the
//! era makes it optional); clients poll, at the `pollInterval` given by the task's kind.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use serde_json::{Value, json};

use crate::Taskhost;
use crate::mcp::tasks::{McpTasks, base};

/// The protocol version whose sessions speak this era's tasks.
pub const LEGACY_TASKS_VERSION: &str = "2025-11-25";

/// How many tasks a `tasks/list` page holds.
pub const LIST_PAGE: usize = 100;

/// The 2025-11-25 task methods of one host.
#[derive(Clone)]
pub struct LegacyTasks {
    host: Arc<Taskhost>,
    tasks: Arc<McpTasks>,
}

impl LegacyTasks {
    /// The legacy task methods served over `tasks`, the host's MCP tasks.
    pub(crate) fn new(host: Arc<Taskhost>, tasks: Arc<McpTasks>) -> Self {
        Self { host, tasks }
    }

    /// True for a message of a 2025-11-25 session that is answered here, not by rmcp.
    pub fn answers(message: &Value) -> bool {
        match message["method"].as_str() {
            Some("tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel") => {
                message.get("id").is_some()
            }
            Some("tools/call") => message["params"].get("task").is_some_and(Value::is_object),
            _ => false,
        }
    }

    /// The whole JSON-RPC answer to `message` (one [`LegacyTasks::answers`] took) of `owner`'s
    /// session.
    pub async fn answer(&self, owner: &str, message: &Value) -> Value {
        let params = &message["params"];
        let task_id = params["taskId"].as_str().unwrap_or_default();
        let answered = match message["method"].as_str().unwrap_or_default() {
            "tools/call" => self.create(owner, params).await,
            "tasks/get" => self.get(owner, task_id).map(|t| t.0),
            "tasks/result" => self.result(owner, task_id).await,
            "tasks/list" => Ok(self.list(owner, params["cursor"].as_str())),
            _ => self.cancel(owner, task_id).await,
        };
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        match answered {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
        }
    }

    /// Adds each tool's `execution` (its task support) to `result`, a `tools/list` answer.
    pub fn with_executions(&self, result: &mut Value) {
        for tool in result["tools"].as_array_mut().into_iter().flatten() {
            let served = tool["name"]
                .as_str()
                .and_then(|n| self.host.plugins().tool(n));
            if let Some(execution) = served.map(|t| t.mcp["execution"].clone())
                && execution.is_object()
                && let Some(tool) = tool.as_object_mut()
            {
                tool.insert("execution".to_owned(), execution);
            }
        }
    }

    /// `tools/call` with `params.task`: the call as a task, when the tool supports tasks.
    async fn create(&self, owner: &str, params: &Value) -> Result<Value, McpError> {
        let name = params["name"].as_str().unwrap_or_default();
        let tool = self
            .host
            .plugins()
            .tool(name)
            .ok_or_else(|| McpError::invalid_params(format!("no tool {name}"), None))?;
        let support = tool.mcp["execution"]["taskSupport"].as_str();
        // A tool that escalates to a task itself speaks only the 2026-07-28 era's composition.
        let escalates = tool.mcp["_meta"]["taskhost/escalates"] == json!(true);
        if !matches!(support, Some("optional" | "required")) || escalates {
            return Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("the tool {name} does not run as a task"),
                None,
            ));
        }
        let arguments = params
            .get("arguments")
            .filter(|a| !a.is_null())
            .cloned()
            .unwrap_or_else(|| json!({}));
        let created = match tool.mcp["_meta"]["taskhost/background"].as_object() {
            Some(with) => {
                self.tasks
                    .start_background(&self.host, owner, name, arguments, with)
                    .await?
            }
            None => {
                let request =
                    json!({"_meta": params.get("_meta").cloned().unwrap_or_else(|| json!({}))});
                self.tasks
                    .start(&self.host, owner, name, arguments, request)?
            }
        };
        // rmcp flattens the task into the result.
        let task = serde_json::to_value(&created).unwrap_or_default();
        Ok(json!({ "task": legacy_task(task) }))
    }

    /// The task as the 2026-07-28 era's `tasks/get` answers it (flat: the task's fields beside
    /// its result or error).
    fn detailed(&self, owner: &str, id: &str) -> Result<Value, McpError> {
        let got = self.tasks.get(&self.host, owner, id)?;
        Ok(serde_json::to_value(&got).unwrap_or_default())
    }

    /// `tasks/get`: the task as this era shows it, and whether it is settled.
    fn get(&self, owner: &str, id: &str) -> Result<(Value, bool), McpError> {
        let value = self.detailed(owner, id)?;
        let settled = settled(&value);
        Ok((legacy_task(value), settled))
    }

    /// `tasks/result`: once the task settled, what its call answered (a tool result, or the
    /// JSON-RPC error of a failed call; a cancelled task's is an error saying so).
    async fn result(&self, owner: &str, id: &str) -> Result<Value, McpError> {
        let mut value = self.detailed(owner, id)?;
        if !settled(&value) {
            let agent = self.host.sessions().agent(owner);
            let _ = self
                .host
                .registry()
                .wait(id, f64::MAX, agent.as_ref(), None)
                .await;
            value = self.detailed(owner, id)?;
        }
        let related = json!({"io.modelcontextprotocol/related-task": {"taskId": id}});
        let error = |e: &Value| {
            McpError::new(
                rmcp::model::ErrorCode(e["code"].as_i64().unwrap_or(-32603) as i32),
                e["message"]
                    .as_str()
                    .unwrap_or("the task failed")
                    .to_owned(),
                e.get("data").cloned(),
            )
        };
        match value["status"].as_str() {
            Some("completed") => {
                let mut result = value["result"].clone();
                if let Some(result) = result.as_object_mut() {
                    let meta = result.entry("_meta").or_insert_with(|| json!({}));
                    if let (Some(meta), Some(related)) = (meta.as_object_mut(), related.as_object())
                    {
                        meta.extend(related.clone());
                    }
                }
                Ok(result)
            }
            Some("failed") => Err(error(&value["error"])),
            _ => Err(McpError::internal_error(
                format!("task {id} was cancelled before its call answered"),
                Some(related),
            )),
        }
    }

    /// `tasks/list`: the owner's tasks, a page at a time (the cursor is the next page's offset).
    fn list(&self, owner: &str, cursor: Option<&str>) -> Value {
        let agent = self.host.sessions().agent(owner);
        let all = self.host.registry().list(agent.as_ref());
        let from = cursor.and_then(|c| c.parse::<usize>().ok()).unwrap_or(0);
        let tasks: Vec<Value> = all
            .iter()
            .skip(from)
            .take(LIST_PAGE)
            .map(|snapshot| {
                let status = self.tasks.status_of(snapshot);
                legacy_task(serde_json::to_value(base(snapshot, status)).unwrap_or_default())
            })
            .collect();
        let mut page = json!({ "tasks": tasks });
        if from + LIST_PAGE < all.len() {
            page["nextCursor"] = json!((from + LIST_PAGE).to_string());
        }
        page
    }

    /// `tasks/cancel`: a settled task is refused (`-32602`); a live one is killed and answered
    /// `cancelled` once the kill is delivered.
    async fn cancel(&self, owner: &str, id: &str) -> Result<Value, McpError> {
        let (task, settled) = self.get(owner, id)?;
        if settled {
            return Err(McpError::invalid_params(
                format!(
                    "task {id} is already {}",
                    task["status"].as_str().unwrap_or("settled")
                ),
                None,
            ));
        }
        self.tasks.cancel(&self.host, owner, id)?;
        let agent = self.host.sessions().agent(owner);
        // The kill's grace bounds how long its end takes; the answer says cancelled either way.
        let _ = self
            .host
            .registry()
            .wait(id, 30_000.0, agent.as_ref(), None)
            .await;
        let (mut task, _) = self.get(owner, id)?;
        task["status"] = json!("cancelled");
        Ok(task)
    }
}

/// Adds the `tasks` capability to `result`, an `initialize` answer, when it negotiated
/// 2025-11-25; true then.
pub fn with_tasks_capability(result: &mut Value) -> bool {
    if result["protocolVersion"] != LEGACY_TASKS_VERSION {
        return false;
    }
    if let Some(capabilities) = result["capabilities"].as_object_mut() {
        capabilities.insert(
            "tasks".to_owned(),
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        );
    }
    true
}

/// True for a task whose status is terminal.
fn settled(task: &Value) -> bool {
    matches!(
        task["status"].as_str(),
        Some("completed" | "failed" | "cancelled")
    )
}

/// A task of the 2026-07-28 shapes (rmcp's) as 2025-11-25 writes it: `ttl` and `pollInterval` in
/// place of `ttlMs` and `pollIntervalMs`, and nothing of its result.
fn legacy_task(task: Value) -> Value {
    let Value::Object(mut task) = task else {
        return task;
    };
    let ttl = task.remove("ttlMs").unwrap_or(Value::Null);
    task.insert("ttl".to_owned(), ttl);
    if let Some(poll) = task.remove("pollIntervalMs") {
        task.insert("pollInterval".to_owned(), poll);
    }
    for payload in ["result", "error", "inputRequests", "resultType"] {
        task.remove(payload);
    }
    Value::Object(task)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_is_written_in_the_2025_11_25_shape() {
        let task = legacy_task(json!({"taskId": "bash-1", "status": "completed",
            "createdAt": "x", "lastUpdatedAt": "y", "pollIntervalMs": 1000,
            "resultType": "complete", "result": {"content": []}}));
        assert_eq!(
            task,
            json!({"taskId": "bash-1", "status": "completed", "createdAt": "x",
                "lastUpdatedAt": "y", "pollInterval": 1000, "ttl": null})
        );
    }

    #[test]
    fn only_this_eras_task_methods_and_task_calls_are_taken() {
        let taken = |m: Value| LegacyTasks::answers(&m);
        assert!(taken(
            json!({"id": 1, "method": "tasks/result", "params": {"taskId": "a"}})
        ));
        assert!(taken(
            json!({"id": 1, "method": "tools/call", "params": {"name": "bash", "task": {"ttl": 5}}})
        ));
        assert!(!taken(
            json!({"id": 1, "method": "tools/call", "params": {"name": "bash"}})
        ));
        assert!(!taken(json!({"method": "tasks/get"})));
        assert!(!taken(json!({"id": 1, "method": "tools/list"})));
    }
}
