//! The control surface: `task_output` (with `wait_for`, a pattern to wait for), `task_list`,
//! `task_kill`, `task_input`, the completion notice, and the prompt section that teaches the
//! background-task habit. Attaching on load opens the registry's fence.

use regex::Regex;
use taskhost_abi::prelude::*;

const PROMPT: &str = "Track every background task id you start. When a task finishes, a notice naming it is added to the result of your next taskhost tool call (and, where your client shows them, sent as a log message) — do not busy-poll or sleep on one; keep working on independent steps and do not duplicate a running task's work. To wait until a server or a build prints a line, call task_output with wait_for (a regular expression of that line). A command started with tty: true takes input through task_input. Before giving a final answer, collect every still-relevant task with task_output (set wait: true only when you are genuinely blocked on it), and task_kill tasks that stopped mattering.";

/// The plugin's settings (its `[plugin.config]` table).
#[derive(Clone, Copy, Debug)]
struct Config {
    wait_timeout_ms: f64,
    max_wait_timeout_ms: f64,
}

impl Config {
    fn from_json(v: &Value) -> Result<Self, String> {
        let num = |key: &str, default: f64| -> Result<f64, String> {
            match &v[key] {
                Value::Null => Ok(default),
                x => x
                    .as_f64()
                    .filter(|n| n.is_finite() && *n > 0.0)
                    .ok_or_else(|| {
                        format!(
                            "tasks: {key} must be a positive number of milliseconds, got {}",
                            taskhost_abi::sdk::shown(x)
                        )
                    }),
            }
        };
        let c = Self {
            wait_timeout_ms: num("wait_timeout_ms", 30_000.0)?,
            max_wait_timeout_ms: num("max_wait_timeout_ms", 600_000.0)?,
        };
        if c.wait_timeout_ms > c.max_wait_timeout_ms {
            return Err(format!(
                "tasks: wait_timeout_ms ({}) exceeds max_wait_timeout_ms ({})",
                c.wait_timeout_ms, c.max_wait_timeout_ms
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
fn task_id(id: String) -> Result<String, ToolResult> {
    if id.is_empty() {
        Err(ToolResult::error(
            "invalid task_id: expected a non-empty string, got \"\"",
        ))
    } else {
        Ok(id)
    }
}

/// The body, a newline unless it ends with one, then the status line; `(no new output)` for nothing.
fn render_output(body: &str, snapshot: &TaskSnapshot) -> String {
    let body = if body.is_empty() {
        "(no new output)"
    } else {
        body
    };
    let sep = if body.ends_with('\n') { "" } else { "\n" };
    format!("{body}{sep}{}", snapshot.status_line())
}

/// The `wait_for` argument checked (the host compiles it again where it matches).
fn pattern(wait_for: Option<&str>) -> Result<Option<String>, ToolResult> {
    let Some(p) = wait_for else { return Ok(None) };
    Regex::new(p)
        .map(|_| Some(p.to_owned()))
        .map_err(|e| ToolResult::error(taskhost_abi::sdk::invalid_wait_for(p, &e)))
}

fn task_output(host: &Host, config: Config, call: &ToolCall, a: OutputArgs) -> ToolResult {
    let id = match task_id(a.task_id) {
        Ok(id) => id,
        Err(e) => return e,
    };
    let caller = call.session();
    let pattern = match pattern(a.wait_for.as_deref()) {
        Ok(p) => p,
        Err(e) => return e,
    };
    // A pattern to wait for implies waiting; it makes no sense with an explicit `wait: false`.
    let wait = match (a.wait, &pattern) {
        (Some(false), Some(_)) => {
            return ToolResult::error(
                "invalid wait_for: it applies to a waiting read (wait: true)",
            );
        }
        (None, Some(_)) => true,
        (wait, _) => wait.unwrap_or(false),
    };
    if wait {
        let timeout = match &a.timeout_ms {
            None | Some(Value::Null) => config.wait_timeout_ms,
            Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
            Some(other) => {
                return ToolResult::error(format!(
                    "invalid wait timeout: expected a positive number of milliseconds, got {}",
                    taskhost_abi::sdk::shown(other)
                ));
            }
        };
        // The registry refuses a non-positive timeout; a valid one is capped.
        let timeout = if timeout > 0.0 {
            timeout.min(config.max_wait_timeout_ms)
        } else {
            timeout
        };
        let waited = match &pattern {
            // An invalid timeout is the registry's error, as for a plain wait.
            Some(p) if timeout > 0.0 && timeout.is_finite() => {
                host.wait_output(caller, &id, p, timeout).map(|_| ())
            }
            _ => host.wait_task(caller, &id, timeout).map(|_| ()),
        };
        if let Err(e) = waited {
            return ToolResult::error(e);
        }
    }
    match host.read_task(caller, &id) {
        Ok(read) => ToolResult::ok(render_output(read.text.as_str(), &read.snapshot)),
        Err(e) => ToolResult::error(e),
    }
}

fn task_list(host: &Host, call: &ToolCall) -> ToolResult {
    let tasks = host.list_tasks(call.session());
    if tasks.is_empty() {
        return ToolResult::ok("(no background tasks)");
    }
    let lines: Vec<String> = tasks
        .iter()
        .map(|t| format!("{} [{}] {} — {}", t.id, t.kind, t.status.as_str(), t.label))
        .collect();
    ToolResult::ok(lines.join("\n"))
}

fn task_kill(host: &Host, call: &ToolCall, a: KillArgs) -> ToolResult {
    let id = match task_id(a.task_id) {
        Ok(id) => id,
        Err(e) => return e,
    };
    match host.kill_task(call.session(), &id, a.reason.as_deref()) {
        Ok(k) if k.requested => ToolResult::ok(format!("requested cancellation of task {id}")),
        Ok(k) => ToolResult::ok(format!(
            "task {id} had already finished {}",
            k.snapshot.status_line()
        )),
        Err(e) => ToolResult::error(e),
    }
}

fn task_input(host: &Host, call: &ToolCall, a: InputArgs) -> ToolResult {
    let id = match task_id(a.task_id) {
        Ok(id) => id,
        Err(e) => return e,
    };
    let eof = a.eof.unwrap_or(false);
    match host.write_task(call.session(), &id, &a.text, eof) {
        Ok(()) if eof => ToolResult::ok(format!(
            "sent {} bytes and the end of input to task {id}",
            a.text.len()
        )),
        Ok(()) => ToolResult::ok(format!("sent {} bytes to task {id}", a.text.len())),
        Err(e) => ToolResult::error(e),
    }
}

/// The completion notice for a task that settled with nobody having reported it.
fn notice(s: &TaskSnapshot) -> String {
    format!(
        "background task {} ({}: {}) finished {}. Read its output with task_output.",
        s.id,
        s.kind,
        s.label,
        s.status_line()
    )
}

fn init(host: Host) -> Result<Tasks, String> {
    let config = Config::from_json(&host.config())?;
    host.attach_surface("tasks");
    let h = host.clone();
    host.on_task_done(move |s: TaskSnapshot| {
        // Owned, and not reported by a kill, a read, a wait or a teardown: the owner is told, once.
        if let Some(session) = s.owner()
            && !s.reported
        {
            h.notify(session, Some(s.id.as_str()), &notice(&s));
        }
    });
    let h = host.clone();
    host.register_typed(
        "task_output",
        "Read a background task. Stream tasks return only output since the previous read; final-output tasks return their result after settlement. Every response ends with `[status: ...]`. Reads are non-blocking unless `wait: true`, which waits up to the configured cap. With `wait_for` (a regular expression, e.g. \"ready on port \\d+\"), the wait ends as soon as the unread output matches it (or the task finishes, or the timeout passes) and returns all the unread output: start a server in the background, then wait for its ready line.",
        move |c: &ToolCall, a: OutputArgs| task_output(&h, config, c, a),
    )?;
    let h = host.clone();
    host.register_tool(
        "task_list",
        "List your background tasks (running and finished) with their ids, kinds, and statuses.",
        json!({"type": "object", "properties": {}}),
        move |c: &ToolCall| task_list(&h, c),
    )?;
    let h = host.clone();
    host.register_typed(
        "task_kill",
        "Request cancellation of a running background task by task id. Returns immediately; the task settles as killed once its work actually stops.",
        move |c: &ToolCall, a: KillArgs| task_kill(&h, c, a),
    )?;
    let h = host.clone();
    host.register_typed(
        "task_input",
        "Type text into a running background task started with `tty: true` (answer a prompt, drive a REPL or a debugger). The text goes to its terminal as typed: end a line with \\n; \\u0003 is Ctrl-C (interrupt), \\u0004 is Ctrl-D (end of input at the start of a line). `eof: true` sends Ctrl-D after the text. At most 64 KiB per call. Read what it answers with task_output (wait_for helps).",
        move |c: &ToolCall, a: InputArgs| task_input(&h, c, a),
    )?;
    Ok(Tasks)
}

export_plugin!(name: "tasks", init: init);
