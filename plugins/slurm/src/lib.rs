//! The Slurm producer: the `slurm` tool submits a command as a batch job to the cluster's controller
//! (`sbatch`), and a job in the background is a task like a local one: `task_output` reads its output
//! file as it grows, `task_list` lists it, `task_kill` is `scancel`, its owner's end cancels it, and
//! it settles from the controller's state (`scontrol show job`).
//!
//! Written with the public SDK only, as an outside author would: the host runs the commands this
//! plugin gives it (`Host::start_external_task`), follows the output file and polls the state on its
//! own runtime, so no code of this plugin runs while a job does and a reload never touches a job.
//!
//! States: COMPLETED is `completed, exit code: N`; CANCELLED is `killed`; FAILED, TIMEOUT,
//! OUT_OF_MEMORY, NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE are `failed` with the state and the exit
//! code (and signal) in the detail. A job that exits 3 is FAILED to Slurm: `failed, FAILED, exit code: 3`.

mod script;

use std::time::Duration;

use taskhost_abi::prelude::*;
use taskhost_abi::sdk::positive_config;

use script::{quote, sbatch_command, state_script};

/// The plugin's settings (its `[plugin.config]` table).
#[derive(Clone, Debug)]
struct Config {
    /// The partition when a call names none (the cluster's default when neither does).
    partition: Option<String>,
    /// The time limit when a call names none.
    default_time_limit: Option<String>,
    /// Where job scripts and output files go: storage both the host and the compute nodes reach.
    output_dir: std::path::PathBuf,
    poll_ms: u64,
    /// More `sbatch` arguments, for every job.
    extra_args: Vec<String>,
    /// The cluster's `slurm.conf`, when it is not where the Slurm commands look by default.
    slurm_conf: Option<String>,
}

impl Config {
    /// `command` with this config's Slurm environment (`SLURM_CONF`) in front.
    fn command(&self, command: &str) -> String {
        match &self.slurm_conf {
            Some(conf) => format!("export SLURM_CONF={}; {command}", script::quote(conf)),
            None => command.to_owned(),
        }
    }
}

impl Config {
    fn from_json(v: &Value) -> Result<Self, String> {
        let text = |key: &str| -> Result<Option<String>, String> {
            match &v[key] {
                Value::Null => Ok(None),
                Value::String(s) if !s.trim().is_empty() => Ok(Some(s.clone())),
                other => Err(format!(
                    "slurm: {key} must be a non-empty string, got {}",
                    taskhost_abi::sdk::shown(other)
                )),
            }
        };
        let extra_args = match &v["extra_args"] {
            Value::Null => Vec::new(),
            Value::Array(items) => items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or("slurm: extra_args must be an array of strings")?,
            other => {
                return Err(format!(
                    "slurm: extra_args must be an array of strings, got {}",
                    taskhost_abi::sdk::shown(other)
                ));
            }
        };
        let default_time_limit = text("default_time_limit")?;
        if let Some(t) = &default_time_limit {
            script::check_time_limit(t).map_err(|e| format!("slurm: default_time_limit: {e}"))?;
        }
        let output_dir = match text("output_dir")? {
            Some(d) => d.into(),
            None => std::env::var_os("HOME")
                .map_or_else(std::env::temp_dir, std::path::PathBuf::from)
                .join(".cache/taskhost/slurm"),
        };
        Ok(Self {
            partition: text("partition")?,
            default_time_limit,
            output_dir,
            poll_ms: positive_config(v, "slurm", "poll_ms", 1000)?,
            extra_args,
            slurm_conf: text("slurm_conf")?,
        })
    }
}

/// The `slurm` tool's arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(crate = "taskhost_abi::serde")]
#[schemars(crate = "taskhost_abi::schemars")]
struct SlurmArgs {
    /// The command to run on the cluster (a bash batch script's body).
    command: String,
    /// What the job does, in a few words (its task label).
    description: Option<String>,
    /// The partition (queue) to submit to.
    partition: Option<String>,
    /// Time limit: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS.
    time_limit: Option<String>,
    /// CPUs per task.
    cpus: Option<u32>,
    /// GPUs (as --gres=gpu:N).
    gpus: Option<u32>,
    /// Nodes.
    nodes: Option<u32>,
    /// Memory per node, e.g. 512M or 4G.
    memory: Option<String>,
    /// Working directory of the job (on the cluster's storage).
    workdir: Option<String>,
    /// Return a task id at once instead of waiting for the job to end (collect with task_output,
    /// cancel with task_kill).
    run_in_background: Option<bool>,
}

struct Slurm;

impl Plugin for Slurm {
    fn prompt_section(&self) -> String {
        "Use the slurm tool for work that belongs on the cluster (long tests, training, builds); run it in the background and collect it with task_output like any task.".to_owned()
    }
}

/// The id `sbatch --parsable` printed: `1234` or `1234;cluster`.
fn job_id(stdout: &str) -> Option<String> {
    let line = stdout.lines().map(str::trim).rfind(|l| !l.is_empty())?;
    let id = line.split(';').next()?;
    id.chars()
        .all(|c| c.is_ascii_digit())
        .then(|| id.to_owned())
}

/// Makes the output directory (mode 0700) if it is missing; an existing one must not be open to
/// others' writes, since job scripts and output files are made in it.
fn output_dir(config: &Config) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let dir = &config.output_dir;
    let made = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
    made.map_err(|e| {
        format!(
            "slurm: cannot make the output directory {}: {e}",
            dir.display()
        )
    })?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| {
        format!(
            "slurm: cannot inspect the output directory {}: {e}",
            dir.display()
        )
    })?;
    if !meta.is_dir() || meta.mode() & 0o022 != 0 {
        return Err(format!(
            "slurm: refusing the output directory {}: it is not a directory closed to others' writes",
            dir.display()
        ));
    }
    Ok(())
}

/// Writes the job's batch script into the output directory; returns its path. The script is ours
/// before the command: the `#SBATCH` block, then a line that is not a comment, so `sbatch` reads no
/// `#SBATCH` line of the command (it stops at the first command line) and the command cannot change
/// its own partition, time limit or output file.
fn write_script(
    config: &Config,
    header: &str,
    command: &str,
) -> Result<std::path::PathBuf, String> {
    use std::os::unix::fs::OpenOptionsExt;
    output_dir(config)?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let path = config
        .output_dir
        .join(format!("taskhost-{}-{nanos:x}.sh", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o700)
        .open(&path)
        .map_err(|e| format!("slurm: cannot write the job script {}: {e}", path.display()))?;
    let script = format!("#!/bin/bash\n{header}: taskhost\n{command}\n");
    std::io::Write::write_all(&mut file, script.as_bytes())
        .map_err(|e| format!("slurm: cannot write the job script {}: {e}", path.display()))?;
    Ok(path)
}

fn call(host: &Host, config: &Config, call: &ToolCall, args: SlurmArgs) -> ToolResult {
    if args.command.trim().is_empty() {
        return ToolResult::error("invalid command: expected a non-empty string, got \"\"");
    }
    let background = args.run_in_background.unwrap_or(false);
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
    let output = config.output_dir.join("{id}.out").display().to_string();
    let session = call.session();
    if background {
        let request = ExternalRequest {
            start_command: config.command(&submit).into(),
            poll_command: config.command(&state_script("{id}")).into(),
            cancel_command: config.command("scancel {id}").into(),
            output_path: output.into(),
            poll_ms: config.poll_ms,
        };
        let owner = (!session.is_empty()).then_some(session);
        return match host.start_external_task("slurm", &label, owner, request) {
            Ok((task, job)) => {
                // The job is named after its task (best effort: a rename that fails changes nothing).
                let rename = ProcessRequest::new(&config.command(&format!(
                    "scontrol update JobId={job} JobName={}",
                    quote(&task)
                )));
                let _ = host.run_process(session, rename, 30_000);
                ToolResult::ok(format!("started background slurm job {task} (job {job})"))
            }
            Err(e) => ToolResult::error(e.replace("the start command failed: ", "sbatch: ")),
        };
    }
    foreground(host, config, session, &submit)
}

/// Submits and waits for the job's end, polling as the host would; then its output and its end.
fn foreground(host: &Host, config: &Config, session: &str, submit: &str) -> ToolResult {
    let submitted = host.run_process(
        session,
        ProcessRequest::new(&config.command(submit)),
        60_000,
    );
    let job = match (submitted.error(), submitted.exit_code()) {
        (Some(e), _) => return ToolResult::error(e),
        (None, Some(0)) => match job_id(&submitted.output) {
            Some(j) => j,
            None => {
                return ToolResult::error(format!(
                    "sbatch printed no job id: {}",
                    submitted.output
                ));
            }
        },
        _ => return ToolResult::error(format!("sbatch: {}", submitted.output.trim())),
    };
    let out_path = config.output_dir.join(format!("{job}.out"));
    loop {
        // The wait between polls is a foreground process too, so a cancelled call ends it at once.
        let wait = host.run_process(
            session,
            ProcessRequest::new(&format!("sleep {}", config.poll_ms as f64 / 1000.0)),
            config.poll_ms + 60_000,
        );
        let state = host.run_process(
            session,
            ProcessRequest::new(&config.command(&state_script(&job))),
            60_000,
        );
        if wait.cancelled || state.cancelled {
            let cancel = config.command(&format!("scancel {job}"));
            let _ = host.run_process("", ProcessRequest::new(&cancel), 30_000);
            return ToolResult::error(format!("cancelled: job {job} was cancelled"));
        }
        let line = state
            .output
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned();
        let (word, detail) = line.split_once(' ').unwrap_or((line.as_str(), ""));
        if matches!(word, "completed" | "killed" | "failed") {
            let text = match taskhost_abi::sdk::open_own_file(&out_path) {
                Ok(mut file) => {
                    let mut bytes = Vec::new();
                    let _ = std::io::Read::read_to_end(&mut file, &mut bytes);
                    String::from_utf8_lossy(&bytes).into_owned()
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
                Err(e) => format!("[output not read: {e}]\n"),
            };
            let sep = if text.is_empty() || text.ends_with('\n') {
                ""
            } else {
                "\n"
            };
            let end = match word {
                "completed" => format!("[{detail}]"),
                _ => format!("[{word}: {detail}]"),
            };
            return ToolResult::ok(format!("{text}{sep}{end}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn init(host: Host) -> Result<Slurm, String> {
    let config = Config::from_json(&host.config())?;
    let h = host.clone();
    host.register_typed(
        "slurm",
        "Runs a command as a batch job on the Slurm cluster and returns its output followed by its end state. Set `run_in_background: true` for anything longer than a minute: the call returns a task id at once; read the job's output with `task_output` (it streams as the job writes it), cancel it with `task_kill` (scancel).",
        move |c: &ToolCall, a: SlurmArgs| call(&h, &config, c, a),
    )?;
    Ok(Slurm)
}

export_plugin!(name: "slurm", init: init);
