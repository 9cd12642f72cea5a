//! What a process is asked to be: its command, directory, environment additions, terminal, tails
//! and spill cap; and why one could not start.

use std::path::PathBuf;
use std::time::Duration;

use tokio::net::unix::pipe;

use taskhost_registry::excerpt;

/// What to run.
#[derive(Clone, Debug)]
pub struct ProcessSpec {
    /// The command, run as `bash -c <command>` (unless `argv` is set).
    pub command: String,
    /// A program and its arguments, run directly instead of through bash.
    pub argv: Option<Vec<String>>,
    /// The working directory (the host's when `None`).
    pub workdir: Option<PathBuf>,
    /// Variables set after the environment policy (trusted configuration: the policy does not
    /// filter them).
    pub extra_env: Vec<(String, String)>,
    /// Time between SIGTERM and SIGKILL, and the longest wait for pipes after exit.
    pub grace: Duration,
    /// In-memory tail per stream, in bytes.
    pub tail_bytes: usize,
    /// Largest spill file per stream, in bytes.
    pub spill_cap: u64,
    /// Run under a pseudo-terminal of this size instead of with stdin closed and piped output.
    pub tty: Option<TtySize>,
    /// Keep the output in the service's kept-output directory (the host's state), from the first
    /// byte, after the task; without such a directory, as a spill.
    pub keep_output: bool,
    /// With `keep_output`: the kept files are the session's, removed with its spills, until the
    /// process becomes a task ([`crate::ProcessService::kept_as_task`]). For a foreground call
    /// that may be carried across an upgrade.
    pub kept_for_session: bool,
    /// With `keep_output`, on a service whose keeper hands over: the keeper holds the process for
    /// a successor of the host from its start, for this task or foreground command (one that may
    /// become a task), so no crash finds it started and not yet held. Named again by
    /// [`crate::ProcessService::hold_for_handover`].
    pub held_as: Option<crate::keeper::HeldAs>,
    /// The owner's bounds (its policy's): the process is started through the bounds wrapper
    /// ([`crate::bounds`]); a service that has no wrapper refuses it.
    pub bounds: Option<std::sync::Arc<crate::bounds::model::Bounds>>,
}

/// A terminal's size in character cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TtySize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

impl ProcessSpec {
    /// A spec with the defaults: 3 s grace, 64,000-byte tails, 64 MiB spill cap.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            argv: None,
            workdir: None,
            extra_env: Vec::new(),
            grace: Duration::from_secs(3),
            tail_bytes: 64_000,
            spill_cap: 64 << 20,
            tty: None,
            keep_output: false,
            kept_for_session: false,
            held_as: None,
            bounds: None,
        }
    }
}

/// The stdin and stdout of a piped process (a protocol peer's), the host's ends.
pub type Pipes = (pipe::Sender, pipe::Receiver);

/// Refuses a working directory that is missing or not a directory, naming it (std's spawn error
/// would not say which path).
pub fn check_workdir(spec: &ProcessSpec) -> Result<(), SpawnError> {
    let Some(dir) = &spec.workdir else {
        return Ok(());
    };
    let shown = || excerpt(&dir.display().to_string()).into_owned();
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(SpawnError(format!("workdir {}: not a directory", shown()))),
        Err(e) => Err(SpawnError(format!("workdir {}: {e}", shown()))),
    }
}

/// Why a process could not be started: the OS's cause, with the value it concerns (at most 200
/// characters of it).
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("cannot start the command: {0}")]
pub struct SpawnError(pub String);

/// What a held process keeps, as its spec said.
pub(crate) struct HoldSpec {
    pub(crate) keep_output: bool,
    pub(crate) spill_cap: u64,
    pub(crate) tail_bytes: u64,
    pub(crate) grace_ms: u64,
}

impl HoldSpec {
    pub(crate) fn of(spec: &ProcessSpec) -> Self {
        Self {
            keep_output: spec.keep_output,
            spill_cap: spec.spill_cap,
            tail_bytes: spec.tail_bytes as u64,
            grace_ms: u64::try_from(spec.grace.as_millis()).unwrap_or(u64::MAX),
        }
    }
}
