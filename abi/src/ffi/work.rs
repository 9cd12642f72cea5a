//! What a producer asks the host to run for it: a child process, a child agent, work elsewhere.

use abi_stable::StableAbi;
use abi_stable::std_types::{ROption, RString, RVec, Tuple2};

use super::data::{FfiOutcome, TaskDecl};

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
    /// For [`crate::ffi::HostApi::run_process`]: when set, a process still running at the timeout becomes a
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
    /// True when the host began an upgrade (`SIGHUP`) while the process ran: it became
    /// `promoted_task` where the call allowed promotion and the registry admitted it (the task
    /// goes on under the new image), else it was ended.
    pub restarted: bool,
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
    /// How the agent's permission requests are answered.
    pub permission_policy: PermissionPolicy,
    /// Milliseconds cancel waits at each step (ACP cancel, closed stdin) before the next.
    pub grace_ms: u64,
    /// Milliseconds `initialize` and `session/new` may take.
    pub setup_timeout_ms: u64,
    /// Names of host environment variables the agent gets even though the environment policy would
    /// remove them (its API key, say); names the host does not have are skipped.
    pub pass_env: RVec<RString>,
    /// The agent's `HOME`; the host's when `RNone`. An agent reads its settings (and the MCP servers
    /// it starts) from there: one given the user's own may start a nested taskhost.
    pub home: ROption<RString>,
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
            permission_policy: PermissionPolicy::Reject,
            grace_ms: 3_000,
            setup_timeout_ms: 30_000,
            pass_env: RVec::new(),
            home: ROption::RNone,
        }
    }

    /// Gives the agent `dir` as its `HOME`.
    pub fn set_home(&mut self, dir: &str) {
        self.home = ROption::RSome(dir.into());
    }

    /// Runs the agent's session in `dir`.
    pub fn set_cwd(&mut self, dir: &str) {
        self.cwd = ROption::RSome(dir.into());
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

/// How a child agent's permission requests are answered.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PermissionPolicy {
    /// Every request is rejected (the default).
    #[default]
    Reject,
    /// Every request is allowed once.
    Allow,
}

/// How external work run in a call's foreground ended ([`crate::ffi::HostApi::run_external`]).
#[repr(C)]
#[derive(StableAbi, Clone, Debug)]
pub struct ExternalResult {
    /// Why the work did not start (a refused start command, the session's foreground limit); the
    /// other fields are empty then.
    pub error: ROption<RString>,
    /// The work's id, as the start command printed it.
    pub external_id: RString,
    /// Everything the work wrote to its output file, as a terminal shows it.
    pub output: RString,
    /// Its end as its poll said; `RNone` when the call was cancelled first (the work was cancelled
    /// then too).
    pub outcome: ROption<FfiOutcome>,
}
