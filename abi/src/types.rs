//! Plain data that crosses the boundary.

use abi_stable::StableAbi;
use abi_stable::std_types::{ROption, RString, RVec, Tuple2};

/// A tool a plugin offers: its name, description and JSON schema (as JSON text).
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct ToolSpec {
    /// The tool's name, unique across loaded plugins.
    pub name: RString,
    /// What the model is told the tool does.
    pub description: RString,
    /// The JSON schema of the arguments, as JSON text.
    pub input_schema_json: RString,
}

/// One call of a tool.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct ToolCall {
    /// The calling session; empty when the caller has none.
    pub session: RString,
    /// The arguments, as JSON text (an object).
    pub arguments_json: RString,
}

/// What a tool call returns: text for the model, and whether it is an error.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct ToolResult {
    /// The result text.
    pub text: RString,
    /// True for an error result (the model sees `Error: ...`).
    pub is_error: bool,
}

impl ToolCall {
    /// The calling session (empty when the caller has none).
    pub fn session(&self) -> &str {
        self.session.as_str()
    }

    /// The arguments, as JSON text.
    pub fn arguments(&self) -> &str {
        self.arguments_json.as_str()
    }
}

impl ToolResult {
    /// A successful result.
    pub fn ok(text: impl Into<String>) -> Self {
        Self {
            text: RString::from(text.into()),
            is_error: false,
        }
    }

    /// An error result; the text is shown as `Error: <text>`.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            text: RString::from(format!("Error: {}", text.into())),
            is_error: true,
        }
    }
}

/// A producer's declaration of a task (identity only; the work comes with the [`crate::Starter`]).
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct TaskDecl {
    /// Producer kind, also the id prefix (`bash`, `subagent`).
    pub kind: RString,
    /// One-line model-facing label.
    pub label: RString,
    /// Byte cap for model-facing reads and notices, if any.
    pub output_limit_bytes: ROption<u64>,
    /// The owning session (its agent owns the task); `RNone` for an unowned task.
    pub owner_session: ROption<RString>,
}

impl TaskDecl {
    /// A declaration of a task of `kind` labelled `label`, owned by `owner_session`'s agent (unowned
    /// when `None`), without an output limit.
    pub fn new(kind: &str, label: &str, owner_session: Option<&str>) -> Self {
        Self {
            kind: kind.into(),
            label: label.into(),
            output_limit_bytes: ROption::RNone,
            owner_session: owner_session.map(RString::from).into(),
        }
    }
}

/// A task's lifecycle state.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfiStatus {
    /// Running.
    Running,
    /// Cancel delivered, not settled.
    Stopping,
    /// Finished on its own.
    Completed,
    /// Cancelled.
    Killed,
    /// Broke.
    Failed,
}

impl FfiStatus {
    /// The lower-case name used in status lines.
    pub fn as_str(self) -> &'static str {
        match self {
            FfiStatus::Running => "running",
            FfiStatus::Stopping => "stopping",
            FfiStatus::Completed => "completed",
            FfiStatus::Killed => "killed",
            FfiStatus::Failed => "failed",
        }
    }

    /// True for completed, killed and failed.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            FfiStatus::Completed | FfiStatus::Killed | FfiStatus::Failed
        )
    }
}

/// How a task ended, as a producer reports it through [`crate::Completion::complete`]. A non-terminal
/// status is recorded as `failed`.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct FfiOutcome {
    /// Completed, killed or failed.
    pub status: FfiStatus,
    /// Kind-specific detail (`exit code: 3`).
    pub detail: ROption<RString>,
    /// Final output, for final-output kinds.
    pub output: ROption<RString>,
}

impl FfiOutcome {
    /// Finished on its own, with a detail (`exit code: 0`).
    pub fn completed(detail: &str) -> Self {
        Self::new(FfiStatus::Completed, Some(detail), None)
    }

    /// Stopped by a cancel, with a detail (`signal: SIGTERM`).
    pub fn killed(detail: &str) -> Self {
        Self::new(FfiStatus::Killed, Some(detail), None)
    }

    /// Broke, with what went wrong.
    pub fn failed(detail: &str) -> Self {
        Self::new(FfiStatus::Failed, Some(detail), None)
    }

    /// Its detail, if any.
    pub fn detail(&self) -> Option<&str> {
        self.detail.as_ref().map(RString::as_str).into_option()
    }

    /// Its final output, if any.
    pub fn output(&self) -> Option<&str> {
        self.output.as_ref().map(RString::as_str).into_option()
    }

    /// The same outcome carrying a final-output task's output.
    pub fn with_output(mut self, output: &str) -> Self {
        self.output = ROption::RSome(output.into());
        self
    }

    /// An outcome with a status and optional detail and output.
    pub fn new(status: FfiStatus, detail: Option<&str>, output: Option<&str>) -> Self {
        Self {
            status,
            detail: detail.map(RString::from).into(),
            output: output.map(RString::from).into(),
        }
    }
}

/// A read-only projection of one task.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct FfiSnapshot {
    /// The task id (`bash-3`).
    pub id: RString,
    /// The producer kind.
    pub kind: RString,
    /// The label.
    pub label: RString,
    /// The output cap, if any.
    pub output_limit_bytes: ROption<u64>,
    /// The owner's session, if owned.
    pub owner_session: ROption<RString>,
    /// The lifecycle state.
    pub status: FfiStatus,
    /// Kind-specific detail.
    pub detail: ROption<RString>,
    /// Registration time, ms since the Unix epoch.
    pub started_at_ms: u64,
    /// Settlement time, ms since the Unix epoch.
    pub finished_at_ms: ROption<u64>,
    /// Whether the terminal state was reported (a completion notice is owed only while false).
    pub reported: bool,
}

impl FfiSnapshot {
    /// The owning session, if the task is owned.
    pub fn owner(&self) -> Option<&str> {
        self.owner_session
            .as_ref()
            .map(RString::as_str)
            .into_option()
    }

    /// `[status: <s>]` or `[status: <s>, <detail>]`.
    pub fn status_line(&self) -> String {
        match self.detail.as_ref().into_option() {
            Some(d) => format!("[status: {}, {d}]", self.status.as_str()),
            None => format!("[status: {}]", self.status.as_str()),
        }
    }
}

/// What a read returns.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct FfiRead {
    /// The delta (stream kinds) or the final output (final kinds, once settled).
    pub text: RString,
    /// The state after the read.
    pub snapshot: FfiSnapshot,
}

/// What a kill returns.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct FfiKill {
    /// True when cancellation was requested of a live task; false when it had already finished.
    pub requested: bool,
    /// The state after the kill.
    pub snapshot: FfiSnapshot,
}

/// Log levels, as [`crate::HostApi::log`] takes them.
pub mod level {
    /// Errors.
    pub const ERROR: u8 = 1;
    /// Warnings.
    pub const WARN: u8 = 2;
    /// Information.
    pub const INFO: u8 = 3;
    /// Debugging.
    pub const DEBUG: u8 = 4;
    /// Tracing.
    pub const TRACE: u8 = 5;
}

/// A child process the host's process service runs: `bash -c <command>` in its own process group, stdin
/// closed (or, with `tty`, in a session of its own on a pseudo-terminal that takes input), the host's
/// environment under its policy plus `extra_env`.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct ProcessRequest {
    /// The command line.
    pub command: RString,
    /// The working directory; the host's when `RNone`.
    pub workdir: ROption<RString>,
    /// Variables set after the scrub.
    pub extra_env: RVec<Tuple2<RString, RString>>,
    /// Milliseconds between SIGTERM and SIGKILL.
    pub grace_ms: u64,
    /// In-memory tail per stream, in bytes.
    pub tail_bytes: u64,
    /// Largest spill file per stream, in bytes; past it the file keeps the head and the latest output.
    pub spill_cap_bytes: u64,
    /// Run under a pseudo-terminal (`cols` x `rows`): input through the task's `write`, output as the
    /// terminal shows it (raw in the spill file; escapes stripped and overwrites collapsed in reads).
    pub tty: bool,
    /// The terminal's columns (with `tty`).
    pub cols: u16,
    /// The terminal's rows (with `tty`).
    pub rows: u16,
    /// For [`crate::HostApi::run_process`]: when set, a process still running at the timeout becomes a
    /// background task so declared instead of being killed, if the registry admits it (a control
    /// surface is attached and the owner has a free slot); else it is killed as without it.
    pub promote_on_timeout: ROption<TaskDecl>,
}

impl ProcessRequest {
    /// A request with the defaults: 3 s grace, 64,000-byte tails, 64 MiB spill cap.
    pub fn new(command: &str) -> Self {
        Self {
            command: command.into(),
            workdir: ROption::RNone,
            extra_env: RVec::new(),
            grace_ms: 3_000,
            tail_bytes: 64_000,
            spill_cap_bytes: 64 << 20,
            tty: false,
            cols: 80,
            rows: 24,
            promote_on_timeout: ROption::RNone,
        }
    }

    /// Runs the process in `dir` instead of the host's working directory.
    pub fn set_workdir(&mut self, dir: &str) {
        self.workdir = ROption::RSome(dir.into());
    }

    /// Lets a foreground run still going at its timeout become a background task of `kind`,
    /// labelled `label`, owned by `owner_session` (see [`ProcessRequest::promote_on_timeout`]).
    pub fn promote_on_timeout_as(&mut self, kind: &str, label: &str, owner_session: &str) {
        self.promote_on_timeout = ROption::RSome(TaskDecl::new(kind, label, Some(owner_session)));
    }
}

/// How a foreground process ended, and what it wrote.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct ProcessResult {
    /// Its output, rendered as a task read is (stdout, `[stderr]` block, drop notice).
    pub output: RString,
    /// Its exit code, if it exited.
    pub exit_code: ROption<i32>,
    /// The signal that ended it (`SIGTERM`), if one did.
    pub signal: ROption<RString>,
    /// True when the timeout ended it.
    pub timed_out: bool,
    /// Set when no process ran (it could not be started, or the session's limit of foreground
    /// commands was reached): the text says why, and the other fields are empty.
    pub error: ROption<RString>,
    /// True when the call was cancelled (by the client, or the session's end) and that ended it.
    pub cancelled: bool,
    /// Set when the process was still running at the timeout and became this background task (its
    /// output so far is in `output`; the rest is the task's).
    pub promoted_task: ROption<RString>,
}

impl ProcessResult {
    /// Why no process ran, if none did.
    pub fn error(&self) -> Option<&str> {
        self.error.as_ref().map(RString::as_str).into_option()
    }

    /// Its exit code, if it exited.
    pub fn exit_code(&self) -> Option<i32> {
        self.exit_code.into_option()
    }

    /// The signal that ended it, if one did.
    pub fn signal(&self) -> Option<&str> {
        self.signal.as_ref().map(RString::as_str).into_option()
    }

    /// The background task it became at the timeout, if it was promoted.
    pub fn promoted_task(&self) -> Option<&str> {
        self.promoted_task
            .as_ref()
            .map(RString::as_str)
            .into_option()
    }
}

/// A child agent run over ACP, as the host runs it: the command is spawned through the host's process
/// service (same environment scrub), initialized, given a new session and the prompt.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct SubagentRequest {
    /// The agent program and its arguments (`["gemini", "--acp"]`).
    pub command: RVec<RString>,
    /// The session's working directory; the host's when `RNone`.
    pub cwd: ROption<RString>,
    /// The prompt.
    pub prompt: RString,
    /// `reject` (the default) or `allow`: how permission requests are answered.
    pub permission_policy: RString,
    /// Milliseconds cancel waits at each step (ACP cancel, closed stdin) before the next.
    pub grace_ms: u64,
    /// Milliseconds `initialize` and `session/new` may take.
    pub setup_timeout_ms: u64,
    /// Names of host environment variables the agent gets even though the environment policy would
    /// remove them (its API key, say); names the host does not have are skipped.
    pub pass_env: RVec<RString>,
}

/// Work that runs elsewhere (a cluster's job, say) and that the host starts, follows and stops with
/// commands, so nothing of the plugin runs while it does: its hooks are the host's, and a reload of
/// the plugin never touches it.
///
/// Every command runs as `bash -c` through the host's process service. `{id}` in `poll_command`,
/// `cancel_command` and `output_path` stands for the work's id, which `start_command` printed.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct ExternalRequest {
    /// Starts the work; the last non-empty line of its stdout is the work's id (letters, digits,
    /// `.`, `_`, `-`). A non-zero exit refuses the start with its stderr, and nothing is registered.
    pub start_command: RString,
    /// Tells the work's state on the first line of its stdout: `running`, or `completed <detail>`,
    /// `killed <detail>`, `failed <detail>` once it ended (the task settles so). Anything else, or a
    /// command that fails, is asked again at the next poll.
    pub poll_command: RString,
    /// Stops the work; the task settles when the poll reports its end.
    pub cancel_command: RString,
    /// The file the work writes its output to, which the host follows as it grows (a stream task).
    pub output_path: RString,
    /// Milliseconds between polls.
    pub poll_ms: u64,
}

impl SubagentRequest {
    /// A run of the agent `command` (program and arguments) with `prompt`: permission requests
    /// rejected, 3 s cancel grace, 30 s setup timeout, the host's working directory, no variables
    /// passed past the environment policy.
    pub fn new<S: AsRef<str>>(command: &[S], prompt: &str) -> Self {
        Self {
            command: command.iter().map(|c| RString::from(c.as_ref())).collect(),
            cwd: ROption::RNone,
            prompt: prompt.into(),
            permission_policy: "reject".into(),
            grace_ms: 3_000,
            setup_timeout_ms: 30_000,
            pass_env: RVec::new(),
        }
    }

    /// Runs the agent's session in `dir`.
    pub fn set_cwd(&mut self, dir: &str) {
        self.cwd = ROption::RSome(dir.into());
    }

    /// Answers permission requests by `policy` (`reject` or `allow`).
    pub fn set_permission_policy(&mut self, policy: &str) {
        self.permission_policy = policy.into();
    }

    /// Passes these host variables to the agent past the environment policy.
    pub fn set_pass_env<S: AsRef<str>>(&mut self, names: &[S]) {
        self.pass_env = names.iter().map(|n| RString::from(n.as_ref())).collect();
    }
}

/// A started external task: the registry's id and the work's own.
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct ExternalStarted {
    /// The task id (`slurm-3`).
    pub task_id: RString,
    /// The work's id, as the start command printed it (`1234`).
    pub external_id: RString,
}
