//! The subagent producer: the `subagent` tool runs a child agent over ACP with a prompt.
//!
//! The conversation itself (spawn through the host's process service, `initialize`, `session/new`,
//! the prompt, message chunks, permission answers, cancel) is the host's; this plugin is the tool's
//! policy and wording. Any ACP agent works: configure its command in this plugin's table, e.g.
//! `command = ["gemini", "--acp"]`, or the repo's scripted agent, `target/debug/taskhost-test-agent`.

use taskhost_abi::prelude::*;
use taskhost_abi::sdk::non_empty;

/// The plugin's settings (its `[plugin.config]` table).
#[derive(Clone, Debug, Deserialize)]
#[serde(crate = "taskhost_abi::serde", default)]
struct Config {
    command: Vec<String>,
    cwd: Option<String>,
    permission_policy: PermissionPolicy,
    grace_ms: Positive,
    setup_timeout_ms: Positive,
    enable_run_in_background: bool,
    pass_env: Vec<String>,
    home: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            command: Vec::new(),
            cwd: None,
            permission_policy: PermissionPolicy::Reject,
            grace_ms: Positive(3_000),
            setup_timeout_ms: Positive(30_000),
            enable_run_in_background: true,
            pass_env: Vec::new(),
            home: None,
        }
    }
}

impl Config {
    fn request(&self, prompt: &str) -> SubagentRequest {
        let mut request = SubagentRequest::new(&self.command, prompt);
        if let Some(cwd) = &self.cwd {
            request.set_cwd(cwd);
        }
        request.permission_policy = self.permission_policy;
        request.grace_ms = self.grace_ms.0;
        request.setup_timeout_ms = self.setup_timeout_ms.0;
        request.set_pass_env(&self.pass_env);
        if let Some(home) = &self.home {
            request.set_home(home);
        }
        request
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

/// The `subagent` tool.
struct SubagentTool {
    host: Host,
    config: Config,
}

impl Tool for SubagentTool {
    type Args = SubagentArgs;

    fn mcp_fields(&self) -> taskhost_abi::serde_json::Value {
        if self.config.enable_run_in_background {
            taskhost_abi::sdk::runs_in_background_as_task()
        } else {
            taskhost_abi::sdk::runs_as_task()
        }
    }

    fn name(&self) -> &str {
        "subagent"
    }

    fn description(&self) -> String {
        let mut description =
            "Runs a child agent over ACP with a prompt and returns its final message.".to_owned();
        if self.config.enable_run_in_background {
            description.push_str(" This call waits for the result by default. Set `run_in_background: true` to return a task id; collect with `task_output` and stop with `task_kill`.");
        } else {
            description.push_str(" This call waits for the subagent and returns its result.");
        }
        description
    }

    /// Without background runs, `run_in_background` is not offered.
    fn adjust_schema(&self, schema: &mut Value) {
        if !self.config.enable_run_in_background
            && let Some(props) = schema["properties"].as_object_mut()
        {
            props.remove("run_in_background");
        }
    }

    fn run(&self, call: &ToolCall, args: SubagentArgs) -> ToolResult {
        let (host, config) = (&self.host, &self.config);
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
            let decl = Declaration::new("subagent", &description).owned_by(session);
            return match host.start_subagent_task(&decl, config.request(&prompt)) {
                Ok(id) => ToolResult::started(wording::started("subagent task", &id), id),
                Err(e) => ToolResult::error(e),
            };
        }
        let outcome = host.run_subagent(session, config.request(&prompt));
        match outcome.status {
            FfiStatus::Completed => ToolResult::ok(outcome.output().unwrap_or_default()),
            FfiStatus::Killed => ToolResult::error("the subagent was cancelled"),
            _ => ToolResult::error(format!(
                "the subagent failed: {}",
                outcome.detail().unwrap_or_default()
            )),
        }
    }
}

fn init(host: Host) -> Result<Subagent, String> {
    let config: Config = host.config()?;
    host.register(SubagentTool {
        host: host.clone(),
        config,
    })?;
    Ok(Subagent)
}

export_plugin!(name: "subagent", init: init);

#[cfg(test)]
mod tests;
