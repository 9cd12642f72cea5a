//! MCP Tasks (the 2026-07-28 extension `io.modelcontextprotocol/tasks`, SEP-2663) over the
//! registry: a `tools/call` of a tool that supports tasks, from a client that declared the
//! extension, becomes a registry task (kind: the tool's name) whose work is the call, and is
//! answered with its id at once. The task is recorded before it is answered (a start is durable
//! before it is answered), so `tasks/get` resolves it on any later host of the state directory.
//!
//! The task is the registry's, so the `task_*` tools see it too, and the other way round: every
//! registry task its owner may see answers `tasks/get`. States: a live task is `working`, or
//! `input_required` while the call waits for an answer it asked its client for (through
//! `tasks/update`); a task that ran its call to a result is `completed` (a tool error being
//! `isError: true`); a killed one `cancelled`; `failed` is for a JSON-RPC error of the call, and for
//! a task the records say was lost with its host.

mod client;
mod inputs;
mod view;

use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{CreateTaskResult, DetailedTask, GetTaskResult, TaskPayload};
use serde_json::{Value, json};
use taskhost_registry::{CancellationToken, ProducerError, TaskHooks, TaskOutcome, TaskStatus};

use crate::Taskhost;
use crate::plugin::CallExtras;
use crate::services::{ClientLink, TaskDeclaration};
use client::TaskClient;
use inputs::Inputs;
pub(super) use view::base;
use view::{TOOL_ERROR, TOOL_RESULT, label, object, recorded};

/// How many settled call tasks' MCP results a host keeps (the oldest go first; a task whose result
/// went is answered from its recorded output).
pub const RESULTS_KEPT: usize = 1024;

/// What a call task ended with, as MCP carries it.
#[derive(Clone)]
enum Ending {
    /// A `CallToolResult`.
    Result(Value),
    /// A JSON-RPC error object.
    Error(Value),
}

/// The MCP side of the call tasks of one host.
#[derive(Default)]
pub struct McpTasks {
    endings: Mutex<VecDeque<(String, Ending)>>,
    inputs: Arc<Inputs>,
}

impl McpTasks {
    /// Runs `tool` for `owner` as a registry task and answers with it.
    ///
    /// # Errors
    /// The registry refused the task (the owner's limit, a surface missing); the text says why.
    pub(super) fn start(
        self: &Arc<Self>,
        host: &Arc<Taskhost>,
        owner: &str,
        tool: &str,
        arguments: Value,
        request: Value,
    ) -> Result<CreateTaskResult, McpError> {
        let cancel = CancellationToken::new();
        let (settle, settled) = tokio::sync::oneshot::channel::<TaskOutcome>();
        let decl = TaskDeclaration {
            kind: tool.to_owned(),
            label: label(tool, &arguments),
            owner_session: Some(owner.to_owned()),
            ..Default::default()
        };
        let stop = cancel.clone();
        let id = host
            .services()
            .declare(&decl, move || {
                let done = async move {
                    settled
                        .await
                        .map_err(|_| ProducerError("the task's call went away".to_owned()))
                };
                Ok(TaskHooks::new(done, move |_| {
                    stop.cancel();
                    Ok(())
                }))
            })
            .map_err(|e| McpError::invalid_request(e.to_string(), None))?;
        // The tool sees which task it runs as (a tool that asked to go on as a task goes on).
        let mut request = request;
        if let Some(meta) = request.get_mut("_meta").and_then(Value::as_object_mut) {
            meta.insert("taskhost/task".to_owned(), json!(id));
        }
        let (tasks, host2, task) = (self.clone(), host.clone(), id.clone());
        let (owner, tool) = (owner.to_owned(), tool.to_owned());
        host.services().runtime.spawn(async move {
            let client: Arc<dyn ClientLink> = Arc::new(TaskClient {
                task: task.clone(),
                inputs: tasks.inputs.clone(),
                runtime: tokio::runtime::Handle::current(),
            });
            let extras = CallExtras {
                progress: None,
                request: Some(request),
                client: Some(client),
                request_id: None,
            };
            let call = host2
                .plugins()
                .call_tool_with(&tool, &owner, &arguments, extras);
            let outcome = tokio::select! {
                out = call => Some(out),
                () = cancel.cancelled() => None,
            };
            tasks.inputs.forget(&task);
            let settled = match outcome {
                None => TaskOutcome::killed(),
                Some(Ok(out)) => tasks.ended(&task, out),
                Some(Err(e)) => {
                    tasks.keep(
                        &task,
                        Ending::Error(json!({"code": -32602, "message": e.to_string()})),
                    );
                    TaskOutcome::failed(e.to_string())
                }
            };
            let _ = settle.send(settled);
        });
        let snapshot = host
            .registry()
            .get(&id, host.sessions().agent(&decl.session_key()).as_ref())
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        Ok(CreateTaskResult::new(base(
            &snapshot,
            rmcp::model::TaskStatus::Working,
        )))
    }

    /// Runs a producer tool in the background (`with`: the arguments that make it so, from its
    /// `taskhost/background` hint) and answers with the task it started.
    ///
    /// # Errors
    /// The tool's refusal, or an answer that names no task.
    pub(super) async fn start_background(
        &self,
        host: &Arc<Taskhost>,
        owner: &str,
        tool: &str,
        mut arguments: Value,
        with: &serde_json::Map<String, Value>,
    ) -> Result<CreateTaskResult, McpError> {
        if let Value::Object(args) = &mut arguments {
            args.extend(with.clone());
        }
        let out = host
            .plugins()
            .call_tool(tool, owner, &arguments)
            .await
            .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
        let Some(id) = out.started else {
            return Err(McpError::invalid_request(
                out.text.trim_start_matches("Error: ").to_owned(),
                None,
            ));
        };
        let snapshot = host
            .registry()
            .get(&id, host.sessions().agent(owner).as_ref())
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        Ok(CreateTaskResult::new(base(
            &snapshot,
            rmcp::model::TaskStatus::Working,
        )))
    }

    /// The outcome of a call that returned, its MCP form kept.
    fn ended(&self, task: &str, out: crate::plugin::CallOutput) -> TaskOutcome {
        let result = out.mcp.unwrap_or_else(
            || json!({"content": [{"type": "text", "text": out.text}], "isError": out.is_error}),
        );
        if let Some(error) = result.get("error") {
            let message = error["message"]
                .as_str()
                .unwrap_or("the call failed")
                .to_owned();
            self.keep(task, Ending::Error(error.clone()));
            return TaskOutcome::failed(message);
        }
        if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
            let message = "the tool asked for input as a multi-round result, which a task cannot carry; call it without a task";
            self.keep(
                task,
                Ending::Error(json!({"code": -32603, "message": message})),
            );
            return TaskOutcome::failed(message);
        }
        let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
        self.keep(task, Ending::Result(result));
        TaskOutcome::completed()
            .with_detail(if is_error { TOOL_ERROR } else { TOOL_RESULT })
            .with_output(out.text)
    }

    fn keep(&self, task: &str, ending: Ending) {
        let mut endings = self.endings.lock();
        if endings.len() >= RESULTS_KEPT {
            endings.pop_front();
        }
        endings.push_back((task.to_owned(), ending));
    }

    fn ending(&self, task: &str) -> Option<Ending> {
        self.endings
            .lock()
            .iter()
            .rev()
            .find(|(t, _)| t == task)
            .map(|(_, e)| e.clone())
    }

    /// `tasks/get` of `id` for `owner`.
    ///
    /// # Errors
    /// `-32602` for an id the owner has no task by (unknown or another's: the two are not told
    /// apart).
    pub(super) fn get(
        &self,
        host: &Taskhost,
        owner: &str,
        id: &str,
    ) -> Result<GetTaskResult, McpError> {
        let agent = host.sessions().agent(owner);
        let snapshot = host
            .registry()
            .get_acknowledged(id, agent.as_ref())
            .map_err(|_| McpError::invalid_params(format!("no task {id}"), None))?;
        let payload = match snapshot.status {
            TaskStatus::Killed => TaskPayload::Cancelled,
            TaskStatus::Lost => TaskPayload::Failed {
                error: object(
                    json!({"code": -32603, "message": format!("the host stopped while this task ran; its outcome is unknown ({})", snapshot.detail.as_deref().unwrap_or("lost"))}),
                ),
            },
            status if !status.is_terminal() => match self.inputs.requests(id) {
                Some(requests) => TaskPayload::InputRequired {
                    input_requests: serde_json::from_value(Value::Object(requests))
                        .unwrap_or_default(),
                },
                _ => TaskPayload::Working,
            },
            _ => match self.ending(id) {
                Some(Ending::Result(result)) => TaskPayload::Completed {
                    result: object(result),
                },
                Some(Ending::Error(error)) => TaskPayload::Failed {
                    error: object(error),
                },
                None => recorded(host, &snapshot, agent.as_ref()),
            },
        };
        let status = payload.status();
        Ok(GetTaskResult::new(DetailedTask::new(
            base(&snapshot, status),
            payload,
        )))
    }

    /// `tasks/update`: delivers `responses` to the requests of task `id` they answer.
    ///
    /// # Errors
    /// As [`McpTasks::get`].
    pub(super) fn update(
        &self,
        host: &Taskhost,
        owner: &str,
        id: &str,
        responses: impl IntoIterator<Item = (String, Value)>,
    ) -> Result<(), McpError> {
        let agent = host.sessions().agent(owner);
        host.registry()
            .get(id, agent.as_ref())
            .map_err(|_| McpError::invalid_params(format!("no task {id}"), None))?;
        self.inputs.answer(id, responses);
        Ok(())
    }

    /// `tasks/cancel`: kills task `id` (a settled one is left as it is).
    ///
    /// # Errors
    /// As [`McpTasks::get`], or the kill's own error.
    pub(super) fn cancel(&self, host: &Taskhost, owner: &str, id: &str) -> Result<(), McpError> {
        let agent = host.sessions().agent(owner);
        host.registry()
            .kill(id, agent.as_ref(), Some("cancelled through tasks/cancel"))
            .map(|_| ())
            .map_err(|e| match e {
                taskhost_registry::RegistryError::UnknownTask(_)
                | taskhost_registry::RegistryError::ForeignTask(_) => {
                    McpError::invalid_params(format!("no task {id}"), None)
                }
                other => McpError::internal_error(other.to_string(), None),
            })
    }
}

impl McpTasks {
    /// The MCP status of a registry task, as `tasks/get` would say it (without reading its result).
    pub(crate) fn status_of(
        &self,
        snapshot: &taskhost_registry::TaskSnapshot,
    ) -> rmcp::model::TaskStatus {
        match snapshot.status {
            TaskStatus::Killed => rmcp::model::TaskStatus::Cancelled,
            TaskStatus::Lost | TaskStatus::Failed => rmcp::model::TaskStatus::Failed,
            status if !status.is_terminal() => {
                if self.inputs.requests(snapshot.id.as_str()).is_some() {
                    rmcp::model::TaskStatus::InputRequired
                } else {
                    rmcp::model::TaskStatus::Working
                }
            }
            _ => rmcp::model::TaskStatus::Completed,
        }
    }
}
