//! The registry's errors. Their texts are model-facing: the control surface shows them as `Error: <text>`.

use crate::ids::{AgentId, TaskId};

/// Largest integer a JSON number carries exactly; limits above it are refused.
pub const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// The most input one [`crate::Registry::write`] delivers.
pub const MAX_INPUT_BYTES: usize = 64 * 1024;

/// Why a registry call was refused. A refused call changed nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// No attached control surface serves the task's owner.
    #[error("background tasks unavailable: no control surface is attached (load the tasks plugin)")]
    NoSurface,
    /// The kind was empty.
    #[error("invalid task kind: expected a non-empty string")]
    InvalidKind,
    /// The label was empty.
    #[error("invalid task label: expected a non-empty string")]
    InvalidLabel,
    /// The output limit was zero or not a safe integer.
    #[error("invalid outputLimitBytes: expected a positive safe integer, got {0}")]
    InvalidOutputLimit(u64),
    /// The owner is not the live instance registered under its id (never registered, replaced, or
    /// disposed).
    #[error(
        "agent \"{0}\" is not the registered agent instance (background task owner must be live)"
    )]
    StaleOwner(AgentId),
    /// The owner already has as many live tasks as allowed.
    #[error(
        "background task limit reached for this owner (limit: {0}); use task_kill to stop an unneeded task, wait for it to finish, then retry"
    )]
    LimitReached(u64),
    /// No task has this id (or it was dropped with its owner). At most 200 characters of the id are
    /// shown.
    #[error("unknown task {}", excerpt(.0))]
    UnknownTask(String),
    /// The task is owned by another session. Its text is [`RegistryError::UnknownTask`]'s: a caller
    /// cannot tell another owner's task from one that does not exist, so ids of other principals
    /// cannot be probed.
    #[error("unknown task {0}")]
    ForeignTask(TaskId),
    /// The wait timeout was not a positive finite number of milliseconds.
    #[error("invalid wait timeout: expected a positive number of milliseconds, got {0}")]
    InvalidWaitTimeout(String),
    /// The wait was aborted by its caller while the task was still live.
    #[error("wait aborted")]
    WaitAborted,
    /// The producer refused: its starter or its cancel failed. The task, if any, is unchanged.
    #[error(transparent)]
    Producer(#[from] ProducerError),
    /// A producer's cancel or reader called back to kill or read its own task, which would wait
    /// forever on the call that is running the hook.
    #[error("task {0} cannot be killed or read from its own cancel or reader")]
    OwnHook(String),
    /// A task brought back from a journal was refused (malformed, live, or held already).
    #[error("cannot restore a task: {0}")]
    Restore(String),
    /// The journal could not record the task, so it was not started.
    #[error("the task could not be recorded, so it was not started: {0}")]
    Journal(String),
    /// The task's producer offers no input (a `bash` task takes input only when started with a
    /// terminal).
    #[error("task {0} takes no input")]
    NoInput(TaskId),
    /// The task has settled: its input is closed.
    #[error("task {0} has already finished and takes no more input")]
    InputAfterEnd(TaskId),
    /// One write carried more than [`MAX_INPUT_BYTES`].
    #[error("input too large: {0} bytes (limit: {MAX_INPUT_BYTES} bytes per call)")]
    InputTooLarge(usize),
    /// Output matching was asked of a final-output task, which has no stream to match.
    #[error(
        "task {0} has no streamed output to match: wait_for applies to stream tasks (a final-output task's result arrives when it settles)"
    )]
    NotStream(TaskId),
    /// A stream task whose producer cannot show unread output without consuming it.
    #[error("task {0}'s output cannot be watched without reading it")]
    NotWatchable(TaskId),
    /// The caller already has as many waits on output as it may.
    #[error("too many waits on task output at once (at most {0} per session): wait for one to end")]
    TooManyOutputWaits(usize),
    /// The registry has been disposed.
    #[error("tasks service disposed")]
    Disposed,
}

/// At most 200 characters of `value`, and how many more there were: a bad value is quoted in an
/// error, never echoed whole (a model once sent a 3.5 MB one).
pub fn excerpt(value: &str) -> std::borrow::Cow<'_, str> {
    const MAX: usize = 200;
    match value.char_indices().nth(MAX) {
        None => value.into(),
        Some((at, _)) => format!(
            "{}... ({} more characters)",
            &value[..at],
            value[at..].chars().count()
        )
        .into(),
    }
}

/// A registry configuration value out of range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The per-owner limit must be a whole number from 1 to 2^53-1.
    #[error(
        "max_concurrent_tasks_per_owner must be a whole number from 1 to {MAX_SAFE_INTEGER}, got {0}"
    )]
    TaskLimit(u64),
    /// The teardown grace must be positive.
    #[error("teardown_grace_ms must be a positive number of milliseconds")]
    TeardownGrace,
}

/// An error a producer reports: from its starter, its cancel, or a completion that broke its contract.
/// The text is shown to the model as is.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProducerError(pub String);

impl From<String> for ProducerError {
    fn from(s: String) -> Self {
        Self(s)
    }
}

impl From<&str> for ProducerError {
    fn from(s: &str) -> Self {
        Self(s.to_owned())
    }
}
