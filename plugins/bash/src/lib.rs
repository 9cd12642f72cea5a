//! The bash producer: the `bash` tool, in the foreground or with `run_in_background`.
//!
//! The child process itself is run by the host's process service (process group, closed stdin,
//! credential scrub, tails and spill files, SIGTERM then SIGKILL, reaping): this plugin is the tool's
//! policy and wording. Background tasks' hooks belong to the host, so reloading this plugin never
//! touches a running command.

use taskhost_abi::abi_stable::std_types::RSome;
use taskhost_abi::sdk::positive_config;
use taskhost_abi::serde_json::{Value, json};
use taskhost_abi::{
    Host, Plugin, ProcessRequest, ProcessResult, TaskDecl, ToolCall, ToolResult, export_plugin,
};

/// The plugin's settings (its `[plugin.config]` table).
#[derive(Clone, Debug)]
struct Config {
    enable_run_in_background: bool,
    /// A foreground command still running at its timeout continues as a background task.
    promote_on_timeout: bool,
    timeout_ms: u64,
    max_timeout_ms: u64,
    max_output_bytes: u64,
    max_spill_bytes: u64,
    grace_ms: u64,
}

impl Config {
    fn from_json(v: &Value) -> Result<Self, String> {
        let num = |key: &str, default: u64| positive_config(v, "bash", key, default);
        let c = Self {
            enable_run_in_background: v["enable_run_in_background"].as_bool().unwrap_or(true),
            promote_on_timeout: v["promote_on_timeout"].as_bool().unwrap_or(true),
            timeout_ms: num("timeout_ms", 120_000)?,
            max_timeout_ms: num("max_timeout_ms", 600_000)?,
            max_output_bytes: num("max_output_bytes", 64_000)?,
            max_spill_bytes: num("max_spill_bytes", 64 << 20)?,
            grace_ms: num("grace_ms", 3_000)?,
        };
        if c.timeout_ms > c.max_timeout_ms {
            return Err(format!(
                "bash: timeout_ms ({}) exceeds max_timeout_ms ({})",
                c.timeout_ms, c.max_timeout_ms
            ));
        }
        Ok(c)
    }
}

struct Bash;

impl Plugin for Bash {
    fn prompt_section(&self) -> String {
        "Check the [exit code: N] marker on every bash result; investigate failures before moving on.".to_owned()
    }
}

fn schema(background: bool) -> Value {
    let mut props = json!({
        "command": {"type": "string", "description": "The command to run with bash -c."},
        "description": {"type": "string", "description": "What the command does, in a few words."},
        "timeout_ms": {"type": "integer", "description": "Foreground timeout in milliseconds."},
        "workdir": {"type": "string", "description": "Working directory (default: the host's)."},
        "tty": {"type": "boolean", "description": "Run under a pseudo-terminal: the command can be answered with task_input (prompts, REPLs, debuggers; \\u0003 is Ctrl-C, \\u0004 Ctrl-D) and its output is what a terminal shows. Without it stdin is closed."},
        "cols": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Terminal columns with tty (default 80)."},
        "rows": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "Terminal rows with tty (default 24)."}
    });
    if background {
        props["run_in_background"] = json!({
            "type": "boolean",
            "description": "Run in the background and return a task id immediately (collect with task_output, stop with task_kill). No timeout applies."
        });
    }
    json!({"type": "object", "properties": props, "required": ["command"]})
}

fn description(background: bool, promote: bool) -> String {
    let mut d = "Runs a bash command and returns its output followed by [exit code: N].".to_owned();
    if background {
        d.push_str(" Set `run_in_background: true` for long-running commands: the call returns a task id immediately; read its output with `task_output` and stop it with `task_kill`. Set `tty: true` for a command that asks for input, and answer it with `task_input`.");
        if promote {
            d.push_str(" A foreground command still running at its timeout continues as a background task (the result says its id).");
        }
    } else {
        d.push_str(" Background execution is not available; long-running commands must finish within the timeout.");
    }
    d
}

/// Renders a foreground result: the output, then its status marker on a line of its own.
fn render(r: &ProcessResult, timeout_ms: u64) -> String {
    let mut text = r.output.as_str().to_owned();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if let Some(id) = r.promoted_task.as_ref().into_option() {
        text.push_str(&format!(
            "[still running after {timeout_ms} ms: continues as background task {id}; read it with task_output]"
        ));
        return text;
    }
    if r.timed_out {
        text.push_str(&format!("[timed out after {timeout_ms} ms]\n"));
    }
    if r.cancelled {
        text.push_str("[cancelled]\n");
    }
    match (
        r.exit_code.as_ref().into_option(),
        r.signal.as_ref().into_option(),
    ) {
        (Some(code), _) => text.push_str(&format!("[exit code: {code}]")),
        (None, Some(sig)) => text.push_str(&format!("[killed: {sig}]")),
        (None, None) => text.push_str("[killed before exit]"),
    }
    text
}

fn call(host: &Host, config: &Config, call: &ToolCall) -> ToolResult {
    let args: Value =
        taskhost_abi::serde_json::from_str(call.arguments_json.as_str()).unwrap_or(Value::Null);
    let command = match &args["command"] {
        Value::String(s) if !s.trim().is_empty() => s.clone(),
        other => {
            return ToolResult::error(format!(
                "invalid command: expected a non-empty string, got {}",
                taskhost_abi::sdk::shown(other)
            ));
        }
    };
    let background = match taskhost_abi::sdk::bool_arg(&args, "run_in_background") {
        Ok(b) => b,
        Err(e) => return e,
    };
    let timeout_ms = match &args["timeout_ms"] {
        Value::Null => config.timeout_ms,
        v => match v.as_u64().filter(|n| *n > 0) {
            Some(n) => n.min(config.max_timeout_ms),
            None => {
                return ToolResult::error(format!(
                    "invalid timeout_ms: expected a positive integer, got {}",
                    taskhost_abi::sdk::shown(v)
                ));
            }
        },
    };
    let mut request = ProcessRequest::new(&command);
    match &args["workdir"] {
        Value::Null => {}
        Value::String(w) if !w.is_empty() => {
            request.workdir = taskhost_abi::abi_stable::std_types::RSome(w.as_str().into())
        }
        other => {
            return ToolResult::error(format!(
                "invalid workdir: expected a non-empty string, got {}",
                taskhost_abi::sdk::shown(other)
            ));
        }
    }
    request.tty = match taskhost_abi::sdk::bool_arg(&args, "tty") {
        Ok(b) => b,
        Err(e) => return e,
    };
    for (key, default, slot) in [
        ("cols", 80, &mut request.cols),
        ("rows", 24, &mut request.rows),
    ] {
        *slot = match &args[key] {
            Value::Null => default,
            v => match v.as_u64().filter(|n| (1..=1000).contains(n)) {
                Some(n) => n as u16,
                None => {
                    return ToolResult::error(format!(
                        "invalid {key}: expected an integer from 1 to 1000, got {}",
                        taskhost_abi::sdk::shown(v)
                    ));
                }
            },
        };
    }
    request.grace_ms = config.grace_ms;
    request.tail_bytes = config.max_output_bytes;
    request.spill_cap_bytes = config.max_spill_bytes;
    let session = call.session.as_str();
    if background {
        if !config.enable_run_in_background {
            return ToolResult::error(
                "run_in_background is disabled for this deployment (enable_run_in_background: false)",
            );
        }
        let owner = (!session.is_empty()).then_some(session);
        return match host.start_process_task("bash", &command, owner, request) {
            Ok(id) => ToolResult::ok(format!("started background task {id}")),
            Err(e) => ToolResult::error(e),
        };
    }
    if config.promote_on_timeout && config.enable_run_in_background && !session.is_empty() {
        request.promote_on_timeout = RSome(TaskDecl::new("bash", &command, Some(session)));
    }
    let result = host.run_process(session, request, timeout_ms);
    if let Some(e) = result.error.as_ref().into_option() {
        return ToolResult::error(e.as_str());
    }
    ToolResult::ok(render(&result, timeout_ms))
}

fn init(host: Host) -> Result<Bash, String> {
    let config = Config::from_json(&host.config())?;
    let h = host.clone();
    let c = config.clone();
    host.register_tool(
        "bash",
        &description(config.enable_run_in_background, config.promote_on_timeout),
        schema(config.enable_run_in_background),
        move |tool_call: &ToolCall| call(&h, &c, tool_call),
    )?;
    Ok(Bash)
}

export_plugin!(name: "bash", init: init);
