//! The control surface: `task_output` (with `wait_for`, a pattern to wait for), `task_list`,
//! `task_kill`, `task_input`, the completion notice, and the prompt section that teaches the
//! background-task habit. Attaching on load opens the registry's fence.

use taskhost_abi::prelude::*;
use taskhost_abi::sdk::shown;

const PROMPT: &str = "Track every background task id you start. When a task finishes, a notice naming it is added to the result of your next taskhost tool call (and, where your client shows them, sent as a log message) — do not busy-poll or sleep on one; keep working on independent steps and do not duplicate a running task's work. To wait until a server or a build prints a line, call task_output with wait_for (a regular expression of that line). A command started with tty: true takes input through task_input. Before giving a final answer, collect every still-relevant task with task_output (set wait: true only when you are genuinely blocked on it), and task_kill tasks that stopped mattering.";

/// The plugin's settings (its `[plugin.config]` table).
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(crate = "taskhost_abi::serde", default)]
struct Config {
    wait_timeout_ms: PositiveMs,
    max_wait_timeout_ms: PositiveMs,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            wait_timeout_ms: PositiveMs(30_000.0),
            max_wait_timeout_ms: PositiveMs(600_000.0),
        }
    }
}

impl Config {
    /// The plugin's config table, checked.
    fn read(host: &Host) -> Result<Self, String> {
        let c: Self = host.config()?;
        if c.wait_timeout_ms > c.max_wait_timeout_ms {
            return Err(format!(
                "tasks: wait_timeout_ms ({}) exceeds max_wait_timeout_ms ({})",
                c.wait_timeout_ms.0, c.max_wait_timeout_ms.0
            ));
        }
        Ok(c)
    }
}

struct Tasks;

impl Plugin for Tasks {
    fn prompt_section(&self) -> String {
        PROMPT.to_owned()
    }
}

/// `task_output`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "taskhost_abi::serde")]
#[schemars(crate = "taskhost_abi::schemars")]
struct OutputArgs {
    /// The task's id.
    task_id: String,
    /// Wait until the task settles (or the timeout passes) before reading.
    wait: Option<bool>,
    /// How long a wait may last, in milliseconds (capped by the host's configuration).
    #[schemars(with = "Option<f64>")]
    timeout_ms: Option<Value>,
    /// A regular expression (Rust regex syntax) to wait for in the task's unread output; implies
    /// wait: true. Stream tasks only.
    wait_for: Option<String>,
}

/// `task_kill`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "taskhost_abi::serde")]
#[schemars(crate = "taskhost_abi::schemars")]
struct KillArgs {
    /// The task's id.
    task_id: String,
    /// Why it is stopped (recorded with the cancellation).
    reason: Option<String>,
}

/// `task_input`'s arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "taskhost_abi::serde")]
#[schemars(crate = "taskhost_abi::schemars")]
struct InputArgs {
    /// The task's id.
    task_id: String,
    /// What to type, as typed (end a line with a newline).
    text: String,
    /// Send the end of input (Ctrl-D) after the text.
    eof: Option<bool>,
}

/// The catalog's check of a task id: not empty.
fn task_id(id: &str) -> Result<&str, ToolResult> {
    if id.is_empty() {
        Err(ToolResult::error(
            "invalid task_id: expected a non-empty string, got \"\"",
        ))
    } else {
        Ok(id)
    }
}

/// `task_output`: reads a task, after a wait when asked.
struct OutputTool {
    host: Host,
    config: Config,
}

impl OutputTool {
    /// The wait a call asks for: `None` for none, else its timeout (not yet checked: the registry
    /// refuses a bad one with its own words) and its pattern.
    fn wait(&self, a: &OutputArgs) -> Result<Option<(f64, Option<String>)>, ToolResult> {
        let pattern = a.wait_for.clone();
        // A pattern to wait for implies waiting; it makes no sense with an explicit `wait: false`.
        let wait = match (a.wait, &pattern) {
            (Some(false), Some(_)) => {
                return Err(ToolResult::error(
                    "invalid wait_for: it applies to a waiting read (wait: true)",
                ));
            }
            (None, Some(_)) => true,
            (wait, _) => wait.unwrap_or(false),
        };
        if !wait {
            return Ok(None);
        }
        let timeout = match &a.timeout_ms {
            None | Some(Value::Null) => self.config.wait_timeout_ms.0,
            Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
            Some(other) => {
                return Err(ToolResult::error(format!(
                    "invalid wait timeout: expected a positive number of milliseconds, got {}",
                    shown(other)
                )));
            }
        };
        // The registry refuses a non-positive timeout; a valid one is capped.
        let timeout = if timeout > 0.0 {
            timeout.min(self.config.max_wait_timeout_ms.0)
        } else {
            timeout
        };
        Ok(Some((timeout, pattern)))
    }
}

impl Tool for OutputTool {
    type Args = OutputArgs;

    fn name(&self) -> &str {
        "task_output"
    }

    fn description(&self) -> String {
        "Read a background task. Stream tasks return only output since the previous read; final-output tasks return their result after settlement. Every response ends with `[status: ...]`. Reads are non-blocking unless `wait: true`, which waits up to the configured cap. With `wait_for` (a regular expression, e.g. \"ready on port \\d+\"), the wait ends as soon as the unread output matches it (or the task finishes, or the timeout passes) and returns all the unread output: start a server in the background, then wait for its ready line.".to_owned()
    }

    fn run(&self, call: &ToolCall, a: OutputArgs) -> ToolResult {
        let (host, caller) = (&self.host, call.session());
        let id = match task_id(&a.task_id) {
            Ok(id) => id,
            Err(e) => return e,
        };
        let waited = match self.wait(&a) {
            Err(e) => return e,
            Ok(None) => Ok(()),
            // The host checks the pattern; an invalid timeout is the registry's error, as for a
            // plain wait.
            Ok(Some((timeout, Some(p)))) if timeout > 0.0 && timeout.is_finite() => {
                host.wait_output(caller, id, &p, timeout).map(|_| ())
            }
            Ok(Some((timeout, _))) => host.wait_task(caller, id, timeout).map(|_| ()),
        };
        if let Err(e) = waited {
            return ToolResult::error(e);
        }
        match host.read_task(caller, id) {
            Ok(read) => ToolResult::ok(wording::read_reply(
                read.text.as_str(),
                &read.snapshot.status_line(),
            )),
            Err(e) => ToolResult::error(e),
        }
    }
}

/// `task_list`: the caller's tasks.
struct ListTool(Host);

impl Tool for ListTool {
    type Args = NoArgs;

    fn name(&self) -> &str {
        "task_list"
    }

    fn description(&self) -> String {
        "List your background tasks (running and finished) with their ids, kinds, and statuses."
            .to_owned()
    }

    fn run(&self, call: &ToolCall, _: NoArgs) -> ToolResult {
        let tasks = self.0.list_tasks(call.session());
        if tasks.is_empty() {
            return ToolResult::ok(wording::NO_TASKS);
        }
        let lines: Vec<String> = tasks
            .iter()
            .map(|t| wording::list_line(&t.id, &t.kind, t.status.as_str(), &t.label))
            .collect();
        ToolResult::ok(lines.join("\n"))
    }
}

/// `task_kill`: requests a task's cancellation.
struct KillTool(Host);

impl Tool for KillTool {
    type Args = KillArgs;

    fn name(&self) -> &str {
        "task_kill"
    }

    fn description(&self) -> String {
        "Request cancellation of a running background task by task id. Returns immediately; the task settles as killed once its work actually stops.".to_owned()
    }

    fn run(&self, call: &ToolCall, a: KillArgs) -> ToolResult {
        let id = match task_id(&a.task_id) {
            Ok(id) => id,
            Err(e) => return e,
        };
        match self.0.kill_task(call.session(), id, a.reason.as_deref()) {
            Ok(k) if k.requested => ToolResult::ok(wording::kill_requested(id)),
            Ok(k) => ToolResult::ok(wording::already_finished(id, &k.snapshot.status_line())),
            Err(e) => ToolResult::error(e),
        }
    }
}

/// `task_input`: types into a task's terminal.
struct InputTool(Host);

impl Tool for InputTool {
    type Args = InputArgs;

    fn name(&self) -> &str {
        "task_input"
    }

    fn description(&self) -> String {
        "Type text into a running background task started with `tty: true` (answer a prompt, drive a REPL or a debugger). The text goes to its terminal as typed: end a line with \\n; \\u0003 is Ctrl-C (interrupt), \\u0004 is Ctrl-D (end of input at the start of a line). `eof: true` sends Ctrl-D after the text. At most 64 KiB per call. Read what it answers with task_output (wait_for helps).".to_owned()
    }

    fn run(&self, call: &ToolCall, a: InputArgs) -> ToolResult {
        let id = match task_id(&a.task_id) {
            Ok(id) => id,
            Err(e) => return e,
        };
        let eof = a.eof.unwrap_or(false);
        match self.0.write_task(call.session(), id, &a.text, eof) {
            Ok(()) if eof => ToolResult::ok(format!(
                "sent {} bytes and the end of input to task {id}",
                a.text.len()
            )),
            Ok(()) => ToolResult::ok(format!("sent {} bytes to task {id}", a.text.len())),
            Err(e) => ToolResult::error(e),
        }
    }
}

/// The completion notice for a task that settled with nobody having reported it.
fn notice(s: &FfiSnapshot) -> String {
    wording::completion_notice(&s.id, &s.kind, &s.label, &s.status_line())
}

fn init(host: Host) -> Result<Tasks, String> {
    let config = Config::read(&host)?;
    host.attach_surface("tasks");
    let h = host.clone();
    host.on_task_done(move |s: FfiSnapshot| {
        // Owned, and not reported by a kill, a read, a wait or a teardown: the owner is told, once.
        if let Some(session) = s.owner()
            && !s.reported
        {
            h.notify(session, Some(s.id.as_str()), &notice(&s));
        }
    });
    host.register(OutputTool {
        host: host.clone(),
        config,
    })?;
    host.register(ListTool(host.clone()))?;
    host.register(KillTool(host.clone()))?;
    host.register(InputTool(host.clone()))?;
    Ok(Tasks)
}

export_plugin!(name: "tasks", init: init);

#[cfg(test)]
mod tests;
