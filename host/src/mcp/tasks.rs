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

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::ErrorData as McpError;
use rmcp::model::{CreateTaskResult, DetailedTask, GetTaskResult, Task, TaskPayload};
use serde_json::{Value, json};
use taskhost_registry::{
    CancellationToken, ProducerError, TaskHooks, TaskOutcome, TaskSnapshot, TaskStatus,
};

use crate::Taskhost;
use crate::plugin::CallExtras;
use crate::services::{ClientLink, TaskDeclaration};

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

/// A live call task's open requests to its client, and where each answer goes.
#[derive(Default)]
struct Parked {
    requests: serde_json::Map<String, Value>,
    answers: HashMap<String, tokio::sync::oneshot::Sender<Value>>,
}

/// The MCP side of the call tasks of one host.
#[derive(Default)]
pub struct McpTasks {
    endings: Mutex<VecDeque<(String, Ending)>>,
    parked: Mutex<HashMap<String, Parked>>,
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
            output_limit_bytes: None,
            owner_session: Some(owner.to_owned()),
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
            .map_err(|e| McpError::invalid_request(e, None))?;
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
                tasks: tasks.clone(),
                runtime: tokio::runtime::Handle::current(),
            });
            let extras = CallExtras {
                progress: None,
                request: Some(request),
                client: Some(client),
            };
            let call = host2
                .plugins()
                .call_tool_with(&tool, &owner, &arguments, extras);
            let outcome = tokio::select! {
                out = call => Some(out),
                () = cancel.cancelled() => None,
            };
            tasks.parked.lock().remove(&task);
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
        let id = taskhost_abi::wording::started_id(&out.text).ok_or_else(|| {
            McpError::invalid_request(out.text.trim_start_matches("Error: ").to_owned(), None)
        })?;
        let snapshot = host
            .registry()
            .get(id, host.sessions().agent(owner).as_ref())
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
            status if !status.is_terminal() => match self.parked.lock().get(id) {
                Some(p) if !p.requests.is_empty() => TaskPayload::InputRequired {
                    input_requests: serde_json::from_value(Value::Object(p.requests.clone()))
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
        let mut parked = self.parked.lock();
        if let Some(p) = parked.get_mut(id) {
            for (key, response) in responses {
                if let Some(answer) = p.answers.remove(&key) {
                    p.requests.remove(&key);
                    let _ = answer.send(response);
                }
            }
        }
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

/// The detail of a call task whose tool answered with a result, and with an error result.
const TOOL_RESULT: &str = "tool result";
const TOOL_ERROR: &str = "tool error result";

/// A settled task's MCP result from its record: its output, an error when its detail says the
/// tool or the process failed.
fn recorded(
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

fn object(value: Value) -> serde_json::Map<String, Value> {
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
fn base(snapshot: &TaskSnapshot, status: rmcp::model::TaskStatus) -> Task {
    let updated = snapshot.finished_at_ms.unwrap_or_else(now_ms);
    let poll_ms = match snapshot.kind.as_str() {
        "subagent" => 5_000,
        "slurm" => 10_000,
        _ => 1_000,
    };
    let mut task = Task::new(
        snapshot.id.to_string(),
        status,
        iso8601(snapshot.started_at_ms),
        iso8601(updated),
    )
    .with_poll_interval_ms(poll_ms);
    if let Some(detail) = &snapshot.detail {
        task = task.with_status_message(detail.clone());
    }
    task
}

/// A short label for a call task: the tool and its arguments, cut to 100 characters.
fn label(tool: &str, arguments: &Value) -> String {
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

/// `ms` since the Unix epoch as an RFC 3339 UTC time with milliseconds.
fn iso8601(ms: u64) -> String {
    let (days, rest) = ((ms / 86_400_000) as i64, ms % 86_400_000);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, milli) = (
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1_000 % 60,
        rest % 1_000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

/// The client of a call running as a task: it cannot be logged to or told progress (the extension
/// carries neither), and what the call asks it becomes the task's open input requests, answered
/// through `tasks/update`.
struct TaskClient {
    task: String,
    tasks: Arc<McpTasks>,
    runtime: tokio::runtime::Handle,
}

impl ClientLink for TaskClient {
    fn log(&self, _level: &str, _logger: &str, _data: Value) {}

    fn progress(&self, _progress: f64, _total: Option<f64>, _message: &str) {}

    fn ask_all(
        &self,
        requests: serde_json::Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Map<String, Value>, String> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let mut waits = Vec::with_capacity(requests.len());
        {
            let mut parked = self.tasks.parked.lock();
            let p = parked.entry(self.task.clone()).or_default();
            for (key, request) in requests {
                // Keys unique over the task's life, as the extension asks.
                let open = format!("{key}-{}", NEXT.fetch_add(1, Ordering::Relaxed));
                let (answer, answered) = tokio::sync::oneshot::channel();
                p.requests.insert(open.clone(), request);
                p.answers.insert(open.clone(), answer);
                waits.push((key, open, answered));
            }
        }
        let opened: Vec<String> = waits.iter().map(|(_, open, _)| open.clone()).collect();
        let cancel = cancel.clone();
        let got = self.runtime.block_on(async move {
            let all = futures::future::try_join_all(waits.into_iter().map(
                |(key, _, answered)| async move {
                    answered
                        .await
                        .map(|v| (key, v))
                        .map_err(|_| "the task ended before it was answered".to_owned())
                },
            ));
            tokio::select! {
                got = all => got.map(|a| a.into_iter().collect()),
                () = cancel.cancelled() => Err("the task was cancelled".to_owned()),
            }
        });
        if let Some(p) = self.tasks.parked.lock().get_mut(&self.task) {
            for open in &opened {
                p.requests.remove(open);
                p.answers.remove(open);
            }
        }
        got
    }
}

#[cfg(test)]
mod tests {
    use super::iso8601;

    #[test]
    fn times_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(iso8601(1_796_471_999_999), "2026-12-05T11:59:59.999Z");
    }
}
