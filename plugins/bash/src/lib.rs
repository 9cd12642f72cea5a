//! The bash producer: the `bash` tool, in the foreground or with `run_in_background`.
//!
//! The child process itself is run by the host's process service (process group, closed stdin,
//! credential scrub, tails and spill files, SIGTERM then SIGKILL, reaping): this plugin is the tool's
//! policy and wording. Background tasks' hooks belong to the host, so reloading this plugin never
//! touches a running command.

use taskhost_abi::prelude::*;
use taskhost_abi::sdk::{non_empty, positive_config};

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

/// The `bash` tool's arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "taskhost_abi::serde")]
#[schemars(crate = "taskhost_abi::schemars")]
struct BashArgs {
    /// The command to run with bash -c.
    command: String,
    /// What the command does, in a few words.
    #[allow(dead_code)]
    description: Option<String>,
    /// Foreground timeout in milliseconds.
    timeout_ms: Option<u64>,
    /// Working directory (default: the host's).
    workdir: Option<String>,
    /// Run in the background and return a task id immediately (collect with task_output, stop with
    /// task_kill). No timeout applies.
    run_in_background: Option<bool>,
    /// Run under a pseudo-terminal: the command can be answered with task_input (prompts, REPLs,
    /// debuggers; \u0003 is Ctrl-C, \u0004 Ctrl-D) and its output is what a terminal shows.
    /// Without it stdin is closed.
    tty: Option<bool>,
    /// Terminal columns with tty (1 to 1000, default 80).
    cols: Option<u16>,
    /// Terminal rows with tty (1 to 1000, default 24).
    rows: Option<u16>,
}

/// The arguments' schema; without background execution, `run_in_background` is not offered.
fn schema(background: bool) -> Value {
    let mut schema = taskhost_abi::typed::schema::<BashArgs>();
    if !background && let Some(props) = schema["properties"].as_object_mut() {
        props.remove("run_in_background");
    }
    schema
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
    if let Some(id) = r.promoted_task() {
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
    match (r.exit_code(), r.signal()) {
        (Some(code), _) => text.push_str(&format!("[exit code: {code}]")),
        (None, Some(sig)) => text.push_str(&format!("[killed: {sig}]")),
        (None, None) => text.push_str("[killed before exit]"),
    }
    text
}

/// A terminal dimension: 1 to 1000.
fn cells(key: &str, value: Option<u16>, default: u16) -> Result<u16, ToolResult> {
    match value {
        None => Ok(default),
        Some(n) if (1..=1000).contains(&n) => Ok(n),
        Some(n) => Err(ToolResult::error(format!(
            "invalid {key}: expected an integer from 1 to 1000, got {n}"
        ))),
    }
}

/// The process request a call describes, checked.
fn request(config: &Config, args: BashArgs) -> Result<(ProcessRequest, u64, bool), ToolResult> {
    let command = non_empty("command", args.command)?;
    let timeout_ms = match args.timeout_ms {
        None => config.timeout_ms,
        Some(0) => {
            return Err(ToolResult::error(
                "invalid timeout_ms: expected a positive integer, got 0",
            ));
        }
        Some(n) => n.min(config.max_timeout_ms),
    };
    let mut request = ProcessRequest::new(&command);
    if let Some(w) = args.workdir {
        request.set_workdir(&non_empty("workdir", w)?);
    }
    request.tty = args.tty.unwrap_or(false);
    request.cols = cells("cols", args.cols, 80)?;
    request.rows = cells("rows", args.rows, 24)?;
    request.grace_ms = config.grace_ms;
    request.tail_bytes = config.max_output_bytes;
    request.spill_cap_bytes = config.max_spill_bytes;
    Ok((request, timeout_ms, args.run_in_background.unwrap_or(false)))
}

fn call(host: &Host, config: &Config, call: &ToolCall, args: BashArgs) -> ToolResult {
    let (mut request, timeout_ms, background) = match request(config, args) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let command = request.command.to_string();
    let session = call.session();
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
        request.promote_on_timeout_as("bash", &command, session);
    }
    let result = host.run_process(session, request, timeout_ms);
    if let Some(e) = result.error() {
        return ToolResult::error(e);
    }
    ToolResult::ok(render(&result, timeout_ms))
}

fn init(host: Host) -> Result<Bash, String> {
    let config = Config::from_json(&host.config())?;
    let h = host.clone();
    let c = config.clone();
    let background = config.enable_run_in_background;
    host.register_tool(
        "bash",
        &description(background, config.promote_on_timeout),
        schema(background),
        move |tool_call: &ToolCall| match taskhost_abi::typed::parse::<BashArgs>(
            tool_call.arguments(),
        ) {
            Ok(args) => call(&h, &c, tool_call, args),
            Err(e) => ToolResult::error(e),
        },
    )?;
    Ok(Bash)
}

export_plugin!(name: "bash", init: init);
