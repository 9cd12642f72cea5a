//! The subagent producer: the `subagent` tool runs a child agent over ACP with a prompt.
//!
//! The conversation itself (spawn through the host's process service, `initialize`, `session/new`,
//! the prompt, message chunks, permission answers, cancel) is the host's; this plugin is the tool's
//! policy and wording. Any ACP agent works: configure its command in this plugin's table, e.g.
//! `command = ["gemini", "--acp"]`, or the repo's scripted agent, `target/debug/taskhost-test-agent`.

use taskhost_abi::prelude::*;
use taskhost_abi::sdk::{non_empty, positive_config};

/// The plugin's settings (its `[plugin.config]` table).
#[derive(Clone, Debug)]
struct Config {
    command: Vec<String>,
    cwd: Option<String>,
    permission_policy: String,
    grace_ms: u64,
    setup_timeout_ms: u64,
    enable_run_in_background: bool,
    pass_env: Vec<String>,
}

impl Config {
    fn from_json(v: &Value) -> Result<Self, String> {
        let command = strings(v, "command")?;
        let policy = v["permission_policy"]
            .as_str()
            .unwrap_or("reject")
            .to_owned();
        if policy != "reject" && policy != "allow" {
            return Err(format!(
                "subagent: permission_policy must be \"reject\" or \"allow\", got {policy:?}"
            ));
        }
        let num = |key: &str, default: u64| positive_config(v, "subagent", key, default);
        Ok(Self {
            command,
            cwd: v["cwd"].as_str().map(str::to_owned),
            permission_policy: policy,
            grace_ms: num("grace_ms", 3_000)?,
            setup_timeout_ms: num("setup_timeout_ms", 30_000)?,
            enable_run_in_background: v["enable_run_in_background"].as_bool().unwrap_or(true),
            pass_env: strings(v, "pass_env")?,
        })
    }

    fn request(&self, prompt: &str) -> SubagentRequest {
        let mut request = SubagentRequest::new(&self.command, prompt);
        if let Some(cwd) = &self.cwd {
            request.set_cwd(cwd);
        }
        request.set_permission_policy(&self.permission_policy);
        request.grace_ms = self.grace_ms;
        request.setup_timeout_ms = self.setup_timeout_ms;
        request.set_pass_env(&self.pass_env);
        request
    }
}

/// The array of strings at `key` (empty when absent).
fn strings(v: &Value, key: &str) -> Result<Vec<String>, String> {
    let bad = |got: &Value| {
        format!(
            "subagent: {key} must be an array of strings, got {}",
            taskhost_abi::sdk::shown(got)
        )
    };
    match &v[key] {
        Value::Null => Ok(Vec::new()),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_owned).ok_or_else(|| bad(i)))
            .collect(),
        other => Err(bad(other)),
    }
}

struct Subagent;

impl Plugin for Subagent {}

/// The `subagent` tool's arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "taskhost_abi::serde")]
#[schemars(crate = "taskhost_abi::schemars")]
struct SubagentArgs {
    /// A few words on what the subagent is for (its task label).
    description: String,
    /// The task for the subagent.
    prompt: String,
    /// Whether to run as a background task and return its id. Defaults to false; collect with
    /// task_output or stop with task_kill.
    run_in_background: Option<bool>,
}

fn call(host: &Host, config: &Config, call: &ToolCall, args: SubagentArgs) -> ToolResult {
    if config.command.is_empty() {
        return ToolResult::error(
            "subagent: no agent is configured; set command = [\"your-acp-agent\", \"--acp\"] in this plugin's [plugin.config] table",
        );
    }
    let (description, prompt) = match (
        non_empty("description", args.description),
        non_empty("prompt", args.prompt),
    ) {
        (Ok(d), Ok(p)) => (d, p),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let session = call.session();
    if args.run_in_background.unwrap_or(false) {
        if !config.enable_run_in_background {
            return ToolResult::error("run_in_background is disabled for this tool instance");
        }
        let owner = (!session.is_empty()).then_some(session);
        return match host.start_subagent_task(
            "subagent",
            &description,
            owner,
            config.request(&prompt),
        ) {
            Ok(id) => ToolResult::ok(format!("started background subagent task {id}")),
            Err(e) => ToolResult::error(e),
        };
    }
    let outcome = host.run_subagent(session, config.request(&prompt));
    match outcome.status {
        TaskStatus::Completed => ToolResult::ok(outcome.output().unwrap_or_default()),
        TaskStatus::Killed => ToolResult::error("the subagent was cancelled"),
        _ => ToolResult::error(format!(
            "the subagent failed: {}",
            outcome.detail().unwrap_or_default()
        )),
    }
}

fn init(host: Host) -> Result<Subagent, String> {
    let config = Config::from_json(&host.config())?;
    let mut description =
        "Runs a child agent over ACP with a prompt and returns its final message.".to_owned();
    let mut schema = taskhost_abi::typed::schema::<SubagentArgs>();
    if config.enable_run_in_background {
        description.push_str(" This call waits for the result by default. Set `run_in_background: true` to return a task id; collect with `task_output` and stop with `task_kill`.");
    } else {
        description.push_str(" This call waits for the subagent and returns its result.");
        if let Some(props) = schema["properties"].as_object_mut() {
            props.remove("run_in_background");
        }
    }
    let (h, c) = (host.clone(), config);
    host.register_tool(
        "subagent",
        &description,
        schema,
        move |tool_call: &ToolCall| match taskhost_abi::typed::parse::<SubagentArgs>(
            tool_call.arguments(),
        ) {
            Ok(args) => call(&h, &c, tool_call, args),
            Err(e) => ToolResult::error(e),
        },
    )?;
    Ok(Subagent)
}

export_plugin!(name: "subagent", init: init);
