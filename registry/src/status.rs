//! What callers see of a task: its status, its outcome, snapshots and reads.

use std::fmt;

use crate::ids::{SessionId, TaskId};

/// The closed, kind-agnostic lifecycle of a task. Kind-specific facts ride in a detail string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    /// The task is recorded and waits for a slot or for the tasks it runs after; its work has not
    /// begun. It holds its owner's admission slot as a running task does.
    Queued,
    /// The work is running.
    Running,
    /// Cancellation was requested and delivered; the producer has not settled yet.
    Stopping,
    /// The work finished on its own (a non-zero exit code is still `completed`).
    Completed,
    /// The work was cancelled.
    Killed,
    /// The work broke, or the registry force-failed it.
    Failed,
    /// The host that ran the work stopped while it ran: its end is unknown (a record brought back
    /// from a journal; never the outcome of a live task).
    Lost,
}

impl TaskStatus {
    /// The lower-case name used in status lines and listings.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Queued => "queued",
            TaskStatus::Running => "running",
            TaskStatus::Stopping => "stopping",
            TaskStatus::Completed => "completed",
            TaskStatus::Killed => "killed",
            TaskStatus::Failed => "failed",
            TaskStatus::Lost => "lost",
        }
    }

    /// True for `completed`, `killed`, `failed` and `lost`.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Killed | TaskStatus::Failed | TaskStatus::Lost
        )
    }

    /// The status named `name` (as [`TaskStatus::as_str`] spells it).
    pub fn parse(name: &str) -> Option<Self> {
        [
            TaskStatus::Queued,
            TaskStatus::Running,
            TaskStatus::Stopping,
            TaskStatus::Completed,
            TaskStatus::Killed,
            TaskStatus::Failed,
            TaskStatus::Lost,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }

    /// True for `queued`, `running` and `stopping`: the states that hold an admission slot.
    pub fn is_live(self) -> bool {
        !self.is_terminal()
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How a task ended, as a producer reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TerminalStatus {
    /// Finished on its own.
    Completed,
    /// Cancelled.
    Killed,
    /// Broke.
    Failed,
}

impl From<TerminalStatus> for TaskStatus {
    fn from(s: TerminalStatus) -> Self {
        match s {
            TerminalStatus::Completed => TaskStatus::Completed,
            TerminalStatus::Killed => TaskStatus::Killed,
            TerminalStatus::Failed => TaskStatus::Failed,
        }
    }
}

/// The terminal result a producer's completion delivers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskOutcome {
    /// How the task ended.
    pub status: TerminalStatus,
    /// Kind-specific detail rendered into status lines (`exit code: 3`, `signal: SIGTERM`).
    pub detail: Option<String>,
    /// Final output for final-output kinds; stream kinds leave it unset.
    pub output: Option<String>,
}

impl TaskOutcome {
    /// An outcome with this status and nothing else.
    pub fn new(status: TerminalStatus) -> Self {
        Self {
            status,
            detail: None,
            output: None,
        }
    }

    /// `completed`, no detail.
    pub fn completed() -> Self {
        Self::new(TerminalStatus::Completed)
    }

    /// `killed`, no detail.
    pub fn killed() -> Self {
        Self::new(TerminalStatus::Killed)
    }

    /// `failed` with this detail.
    pub fn failed(detail: impl Into<String>) -> Self {
        Self::new(TerminalStatus::Failed).with_detail(detail)
    }

    /// Sets the detail.
    pub fn with_detail(mut self, detail: impl Into<String>) -> Self {
        self.detail = Some(detail.into());
        self
    }

    /// Sets the final output.
    pub fn with_output(mut self, output: impl Into<String>) -> Self {
        self.output = Some(output.into());
        self
    }
}

/// A read-only projection of one task: a fresh value per call, never live registry state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskSnapshot {
    /// The registry-issued id.
    pub id: TaskId,
    /// The producer kind the task was registered with (also the id prefix).
    pub kind: String,
    /// The producer's one-line label.
    pub label: String,
    /// The producer's byte cap for model-facing reads and notices of this task, if any.
    pub output_limit_bytes: Option<u64>,
    /// The owner's session, `None` for an unowned task.
    pub owner_session: Option<SessionId>,
    /// The current lifecycle state.
    pub status: TaskStatus,
    /// Kind-specific detail, once the producer supplied one.
    pub detail: Option<String>,
    /// Milliseconds since the Unix epoch when the task was registered.
    pub started_at_ms: u64,
    /// Milliseconds since the Unix epoch when the task settled; `None` while live.
    pub finished_at_ms: Option<u64>,
    /// True once a kill, terminal read, wait or teardown has reported (or committed to report) the
    /// terminal state. A completion notice is only owed while this is false.
    pub reported: bool,
}

impl TaskSnapshot {
    /// Checks that the snapshot is coherent: a well-formed id whose prefix is the kind, and a finish
    /// time present exactly when terminal and not before the start.
    ///
    /// # Errors
    /// The first incoherence found, as text.
    pub fn check_coherent(&self) -> Result<(), String> {
        match self.id.parts() {
            Some((kind, _)) if kind == self.kind => {}
            _ => return Err(format!("id {} is not <{}>-<n>", self.id, self.kind)),
        }
        match (self.status.is_terminal(), self.finished_at_ms) {
            (true, None) => Err(format!("{} is terminal without a finish time", self.id)),
            (false, Some(_)) => Err(format!("{} is live with a finish time", self.id)),
            (_, Some(f)) if f < self.started_at_ms => {
                Err(format!("{} finished before it started", self.id))
            }
            _ => Ok(()),
        }
    }
}

/// What [`crate::Registry::read`] returns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskRead {
    /// Stream kinds: the consuming delta since the previous read. Final-output kinds: empty while
    /// live, then the final output (or empty) on every read once settled.
    pub text: String,
    /// The task's state after the read.
    pub snapshot: TaskSnapshot,
}
