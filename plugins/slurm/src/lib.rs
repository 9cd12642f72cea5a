//! The Slurm producer: the `slurm` tool submits a command as a batch job to the cluster's controller
//! (`sbatch`), and a job in the background is a task like a local one: `task_output` reads its output
//! file as it grows, `task_list` lists it, `task_kill` is `scancel`, its owner's end cancels it, and
//! it settles from the controller's state (`scontrol show job`).
//!
//! Written with the public SDK only, as an outside author would: the host runs the commands this
//! plugin gives it (`Host::start_external_task` in the background, `Host::run_external` in the
//! foreground), follows the output file and polls the state on its own runtime, so no code of this
//! plugin runs while a job does and a reload never touches a job. The plugin keeps its policy: the
//! job script, the `sbatch` options, and the state script whose answers the host reads.
//!
//! States: COMPLETED is `completed, exit code: N`; CANCELLED is `killed`; FAILED, TIMEOUT,
//! OUT_OF_MEMORY, NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE are `failed` with the state and the exit
//! code (and signal) in the detail. A job that exits 3 is FAILED to Slurm: `failed, FAILED, exit code: 3`.

mod args;
mod config;
mod script;
mod submit;

use taskhost_abi::prelude::*;

use args::SlurmArgs;
use config::Config;
use script::quote;
use submit::{external_request, sbatch_command, write_script};

struct Slurm;

impl Plugin for Slurm {
    fn prompt_section(&self) -> String {
        "Use the slurm tool for work that belongs on the cluster (long tests, training, builds); run it in the background and collect it with task_output like any task.".to_owned()
    }
}

/// The `slurm` tool.
struct SlurmTool {
    host: Host,
    config: Config,
}

impl Tool for SlurmTool {
    type Args = SlurmArgs;

    fn mcp_fields(&self) -> taskhost_abi::serde_json::Value {
        taskhost_abi::sdk::runs_in_background_as_task()
    }

    fn name(&self) -> &str {
        "slurm"
    }

    fn description(&self) -> String {
        "Runs a command as a batch job on the Slurm cluster and returns its output followed by its end state. Set `run_in_background: true` for anything longer than a minute: the call returns a task id at once; read the job's output with `task_output` (it streams as the job writes it), cancel it with `task_kill` (scancel).".to_owned()
    }

    fn run(&self, call: &ToolCall, args: SlurmArgs) -> ToolResult {
        let (host, config) = (&self.host, &self.config);
        if args.command.trim().is_empty() {
            return ToolResult::error("invalid command: expected a non-empty string, got \"\"");
        }
        let label = args
            .description
            .clone()
            .filter(|d| !d.trim().is_empty())
            .unwrap_or_else(|| args.command.clone());
        let (header, submit) = match sbatch_command(config, &args) {
            Ok(s) => s,
            Err(e) => return ToolResult::error(e),
        };
        let script = match write_script(config, &header, &args.command) {
            Ok(p) => p,
            Err(e) => return ToolResult::error(e),
        };
        let submit = format!("{submit} {}", quote(&script.display().to_string()));
        let request = external_request(config, &submit);
        let session = call.session();
        if !args.run_in_background.unwrap_or(false) {
            return foreground(host.run_external(session, request));
        }
        let decl = Declaration::new("slurm", &label).owned_by(session);
        match host.start_external_task(&decl, request) {
            Ok((task, job)) => {
                // The job is named after its task (best effort: a rename that fails changes nothing).
                let rename = ProcessRequest::new(&config.command(&format!(
                    "scontrol update JobId={job} JobName={}",
                    quote(&task)
                )));
                let _ = host.run_process(session, rename, 30_000);
                ToolResult::started(
                    format!("started background slurm job {task} (job {job})"),
                    task,
                )
            }
            Err(e) => ToolResult::error(sbatch_error(e.message())),
        }
    }
}

/// The host's words for a refused start, as `sbatch`'s.
fn sbatch_error(e: &str) -> String {
    e.replace("the start command failed: ", "sbatch: ")
}

/// A job run in the foreground: its output, then its end (`[exit code: N]`, `[failed: ...]`).
fn foreground(run: ExternalResult) -> ToolResult {
    if let Some(e) = run.error.as_ref().into_option() {
        return ToolResult::error(sbatch_error(e));
    }
    let Some(outcome) = run.outcome.as_ref().into_option() else {
        return ToolResult::error(format!("cancelled: job {} was cancelled", run.external_id));
    };
    let detail = outcome.detail().unwrap_or_default();
    let end = match outcome.status {
        FfiStatus::Completed => format!("[{detail}]"),
        other => format!("[{}: {detail}]", other.as_str()),
    };
    let output = run.output.as_str();
    ToolResult::ok(format!("{output}{}{end}", wording::line_break(output)))
}

fn init(host: Host) -> Result<Slurm, String> {
    let config = Config::read(&host)?;
    host.register(SlurmTool {
        host: host.clone(),
        config,
    })?;
    Ok(Slurm)
}

export_plugin!(name: "slurm", init: init);

#[cfg(test)]
mod tests;
