//! The host handle's calls that start work: plugin tasks, process tasks, subagent tasks, external
//! tasks (each declared by a [`Declaration`]), and the foreground runs of a tool call.

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::ROption;
pub use taskhost_common::PROCESS_MARKER;

use super::glue::StarterGlue;
use super::host::{Host, host_result};
use super::plugin::{Output, TaskControl, TaskHandle};
use crate::ffi::*;

/// A task as its producer declares it: its kind (also its id's prefix), its label, its owner and
/// its output limit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Declaration {
    /// The producer kind (`bash`, `subagent`), also the id prefix.
    pub kind: String,
    /// One line for the model: what the task does.
    pub label: String,
    /// The owning session; `None` for an unowned task.
    pub owner_session: Option<String>,
    /// A byte cap for model-facing reads and notices, if any.
    pub output_limit_bytes: Option<u64>,
    /// Tasks of the same owner this one runs after (see [`Declaration::after`]).
    pub after: Vec<String>,
}

impl Declaration {
    /// An unowned task of `kind` labelled `label`, without an output limit.
    pub fn new(kind: &str, label: &str) -> Self {
        Self {
            kind: kind.to_owned(),
            label: label.to_owned(),
            owner_session: None,
            output_limit_bytes: None,
            after: Vec::new(),
        }
    }

    /// Runs after the tasks `ids` (of the same owner): the task is recorded at once, `queued`,
    /// and begins once every one of them ended; when one did not complete with exit 0 it settles
    /// `failed` without running, naming it. An unknown id, another owner's, or a cycle refuses the
    /// start. Honoured for process tasks ([`Host::start_process_task`]); any other start that
    /// names tasks to run after is refused.
    #[must_use]
    pub fn after<S: AsRef<str>>(mut self, ids: impl IntoIterator<Item = S>) -> Self {
        self.after = ids.into_iter().map(|s| s.as_ref().to_owned()).collect();
        self
    }

    /// Owned by `session`'s agent; an empty session (a caller without one) leaves it unowned.
    #[must_use]
    pub fn owned_by(mut self, session: &str) -> Self {
        self.owner_session = (!session.is_empty()).then(|| session.to_owned());
        self
    }

    /// With model-facing reads and notices capped at `bytes`.
    #[must_use]
    pub fn output_limit(mut self, bytes: u64) -> Self {
        self.output_limit_bytes = Some(bytes);
        self
    }

    fn to_ffi(&self) -> TaskDecl {
        let mut decl = TaskDecl::new(&self.kind, &self.label, self.owner_session.as_deref());
        decl.output_limit_bytes = self.output_limit_bytes.into();
        decl.after = self.after.iter().map(|a| a.as_str().into()).collect();
        decl
    }
}

impl Host {
    /// Declares a task and starts it: `start` runs (on this thread) only once every registry check
    /// passed, and returns the task's control; `output` says how its output is read. Returns the id.
    ///
    /// # Errors
    /// The registry's refusal, or `start`'s own error; in both cases nothing is registered.
    pub fn start_task<C: TaskControl>(
        &self,
        decl: &Declaration,
        output: Output,
        start: impl FnOnce(TaskHandle) -> Result<C, String> + Send + 'static,
    ) -> Result<String, HostError> {
        let starter = Starter_TO::from_value(
            StarterGlue::<C, _>(Some(start), output, Default::default()),
            TD_Opaque,
        );
        host_result(self.0.start_task(decl.to_ffi(), starter)).map(String::from)
    }

    /// Starts a process task (see [`HostApi::start_process_task`]); returns its id.
    ///
    /// # Errors
    /// The registry's refusal or a process that cannot start; nothing is registered then.
    pub fn start_process_task(
        &self,
        decl: &Declaration,
        request: ProcessRequest,
    ) -> Result<String, HostError> {
        host_result(self.0.start_process_task(decl.to_ffi(), request)).map(String::from)
    }

    /// Starts a child agent task (see [`HostApi::start_subagent_task`]); returns its id.
    ///
    /// # Errors
    /// The registry's refusal; nothing is started then.
    pub fn start_subagent_task(
        &self,
        decl: &Declaration,
        request: SubagentRequest,
    ) -> Result<String, HostError> {
        host_result(self.0.start_subagent_task(decl.to_ffi(), request)).map(String::from)
    }

    /// Starts a task whose work runs elsewhere (see [`HostApi::start_external_task`]); returns the
    /// task id and the work's own id.
    ///
    /// # Errors
    /// The registry's refusal, or the start command's failure; nothing is registered then.
    pub fn start_external_task(
        &self,
        decl: &Declaration,
        request: ExternalRequest,
    ) -> Result<(String, String), HostError> {
        host_result(self.0.start_external_task(decl.to_ffi(), request))
            .map(|s| (s.task_id.into_string(), s.external_id.into_string()))
    }

    /// Runs a process in the foreground (see [`HostApi::run_process`]).
    pub fn run_process(
        &self,
        session: &str,
        request: ProcessRequest,
        timeout_ms: u64,
    ) -> ProcessResult {
        self.0.run_process(session.into(), request, timeout_ms)
    }

    /// Runs a child agent in the foreground (see [`HostApi::run_subagent`]).
    pub fn run_subagent(&self, session: &str, request: SubagentRequest) -> FfiOutcome {
        self.0.run_subagent(session.into(), request)
    }

    /// Runs external work in the foreground on the host's external-task loop (see
    /// [`HostApi::run_external`]).
    pub fn run_external(&self, session: &str, request: ExternalRequest) -> ExternalResult {
        self.0.run_external(session.into(), request)
    }
}

impl ProcessRequest {
    /// Lets a foreground run still going at its timeout become the background task `decl` declares
    /// (see [`ProcessRequest::promote_on_timeout`]).
    pub fn promote_on_timeout_as(&mut self, decl: &Declaration) {
        self.promote_on_timeout = ROption::RSome(decl.to_ffi());
    }
}
