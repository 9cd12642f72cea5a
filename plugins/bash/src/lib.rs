//! The bash producer: the `bash` tool, in the foreground or with `run_in_background`.
//!
//! The child process itself is run by the host's process service (process group, closed stdin,
//! credential scrub, tails and spill files, SIGTERM then SIGKILL, reaping): this plugin is the tool's
//! policy and wording. Background tasks' hooks belong to the host, so reloading this plugin never
//! touches a running command.

use taskhost_abi::prelude::*;
use taskhost_abi::sdk::non_empty;
use taskhost_abi::wording::{self, ForegroundEnd};

/// The plugin's settings (its `[plugin.config]` table).
#[derive(Clone, Debug, Deserialize)]
#[serde(crate = "taskhost_abi::serde", default)]
struct Config {
    enable_run_in_background: bool,
    /// A foreground command still running at its timeout continues as a background task.
    promote_on_timeout: bool,
    timeout_ms: Positive,
    max_timeout_ms: Positive,
    max_output_bytes: Positive,
    max_spill_bytes: Positive,
    grace_ms: Positive,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            enable_run_in_background: true,
            promote_on_timeout: true,
            timeout_ms: Positive(120_000),
            max_timeout_ms: Positive(600_000),
            max_output_bytes: Positive(64_000),
            max_spill_bytes: Positive(64 << 20),
            grace_ms: Positive(3_000),
        }
    }
}

impl Config {
    /// The plugin's config table, checked.
    fn read(host: &Host) -> Result<Self, String> {
        let c: Self = host.config()?;
        if c.timeout_ms > c.max_timeout_ms {
            return Err(format!(
                "bash: timeout_ms ({}) exceeds max_timeout_ms ({})",
                c.timeout_ms.0, c.max_timeout_ms.0
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
    /// What the command does, in a few words (for the model's own record; not used).
    #[allow(
        dead_code,
        reason = "offered in the schema so the model can say what it runs"
    )]
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
    /// With run_in_background: task ids (of yours) this command runs after. It waits, queued,
    /// until they all ended, and does not run (it fails, naming the task) when one of them did
    /// not complete with exit code 0.
    after: Option<Vec<String>>,
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

/// Renders a foreground result: the output, then what happened to it on lines of their own.
fn render(r: &ProcessResult, timeout_ms: u64) -> String {
    let output = r.output.as_str();
    if r.restarted {
        return wording::restarted_reply(output, r.promoted_task());
    }
    if let Some(id) = r.promoted_task() {
        return wording::promoted_reply(output, timeout_ms, id);
    }
    let end = match (r.exit_code(), r.signal()) {
        (Some(code), _) => ForegroundEnd::Exited(code),
        (None, Some(signal)) => ForegroundEnd::Signalled(signal),
        (None, None) => ForegroundEnd::Ended,
    };
    wording::foreground_reply(output, r.timed_out.then_some(timeout_ms), r.cancelled, end)
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

/// A call's request: the process, its foreground timeout, whether it runs in the background, and
/// the tasks it runs after.
type Request = (ProcessRequest, u64, bool, Vec<String>);

/// The process request a call describes, checked.
fn request(config: &Config, args: BashArgs) -> Result<Request, ToolResult> {
    let command = non_empty("command", args.command)?;
    let timeout_ms = match args.timeout_ms {
        None => config.timeout_ms.0,
        Some(0) => {
            return Err(ToolResult::error(
                "invalid timeout_ms: expected a positive integer, got 0",
            ));
        }
        Some(n) => n.min(config.max_timeout_ms.0),
    };
    let mut request = ProcessRequest::new(&command);
    if let Some(w) = args.workdir {
        request.set_workdir(&non_empty("workdir", w)?);
    }
    request.tty = args.tty.unwrap_or(false);
    request.cols = cells("cols", args.cols, 80)?;
    request.rows = cells("rows", args.rows, 24)?;
    request.grace_ms = config.grace_ms.0;
    request.tail_bytes = config.max_output_bytes.0;
    request.spill_cap_bytes = config.max_spill_bytes.0;
    let background = args.run_in_background.unwrap_or(false);
    let after = args.after.unwrap_or_default();
    if !after.is_empty() && !background {
        return Err(ToolResult::error(
            "after applies to a background command: set run_in_background: true",
        ));
    }
    Ok((request, timeout_ms, background, after))
}

/// The `bash` tool.
struct BashTool {
    host: Host,
    config: Config,
}

impl Tool for BashTool {
    type Args = BashArgs;

    fn mcp_fields(&self) -> taskhost_abi::serde_json::Value {
        taskhost_abi::sdk::runs_in_background_as_task()
    }

    fn name(&self) -> &str {
        "bash"
    }

    fn description(&self) -> String {
        description(
            self.config.enable_run_in_background,
            self.config.promote_on_timeout,
        )
    }

    /// Without background execution, `run_in_background` is not offered.
    fn adjust_schema(&self, schema: &mut Value) {
        if !self.config.enable_run_in_background
            && let Some(props) = schema["properties"].as_object_mut()
        {
            props.remove("run_in_background");
        }
    }

    fn run(&self, call: &ToolCall, args: BashArgs) -> ToolResult {
        let (mut request, timeout_ms, background, after) = match request(&self.config, args) {
            Ok(r) => r,
            Err(e) => return e,
        };
        let config = &self.config;
        let decl = Declaration::new("bash", request.command.as_str()).owned_by(call.session());
        if background {
            if !config.enable_run_in_background {
                return ToolResult::error(
                    "run_in_background is disabled for this deployment (enable_run_in_background: false)",
                );
            }
            return match self.host.start_process_task(&decl.after(after), request) {
                Ok(id) => ToolResult::started(self.started(call.session(), &id), id),
                Err(e) => ToolResult::error(e),
            };
        }
        if config.promote_on_timeout
            && config.enable_run_in_background
            && decl.owner_session.is_some()
        {
            request.promote_on_timeout_as(&decl);
        }
        let result = self.host.run_process(call.session(), request, timeout_ms);
        if let Some(e) = result.error() {
            return ToolResult::error(e);
        }
        let text = render(&result, timeout_ms);
        match result.promoted_task() {
            Some(id) => ToolResult::started(text, id),
            None => ToolResult::ok(text),
        }
    }
}

impl BashTool {
    /// The answer to a background start: started, or queued with what it waits for.
    fn started(&self, session: &str, id: &str) -> String {
        match self.host.get_task(session, id) {
            Ok(t) if t.status == FfiStatus::Queued => {
                wording::queued("task", id, t.detail().unwrap_or("queued"))
            }
            _ => wording::started("task", id),
        }
    }
}

fn init(host: Host) -> Result<Bash, String> {
    let config = Config::read(&host)?;
    host.register(BashTool {
        host: host.clone(),
        config,
    })?;
    Ok(Bash)
}

export_plugin!(name: "bash", init: init);

#[cfg(test)]
mod tests;
