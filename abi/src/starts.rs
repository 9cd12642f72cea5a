//! The host handle's calls that start work: plugin tasks (stream, final-output, or told by their
//! first read), process tasks, subagent tasks, external tasks, and the foreground runs.

use abi_stable::sabi_trait::TD_Opaque;

use crate::glue::StarterGlue;
use crate::objects::*;
use crate::sdk::{Host, TaskControl, TaskHandle, TaskKind};
use crate::types::*;

impl Host {
    /// Declares a task and starts it: `start` runs (on this thread) only once every registry check
    /// passed, and returns the task's control. Returns the task id.
    ///
    /// # Errors
    /// The registry's refusal, or `start`'s own error; in both cases nothing is registered.
    ///
    /// Whether the task streams is decided by its control's first [`TaskControl::read`] (`Some`:
    /// a stream). [`Host::start_stream_task`] and [`Host::start_final_task`] say it outright.
    pub fn start_task<C: TaskControl>(
        &self,
        kind: &str,
        label: &str,
        owner_session: Option<&str>,
        start: impl FnOnce(TaskHandle) -> Result<C, String> + Send + 'static,
    ) -> Result<String, String> {
        self.start_kind(TaskKind::Probe, kind, label, owner_session, start)
    }

    /// Declares and starts a stream task: its output is read incrementally through
    /// [`TaskControl::read`] (a `None` reads as no new output). Returns its id.
    ///
    /// # Errors
    /// As [`Host::start_task`].
    pub fn start_stream_task<C: TaskControl>(
        &self,
        kind: &str,
        label: &str,
        owner_session: Option<&str>,
        start: impl FnOnce(TaskHandle) -> Result<C, String> + Send + 'static,
    ) -> Result<String, String> {
        self.start_kind(TaskKind::Stream, kind, label, owner_session, start)
    }

    /// Declares and starts a final-output task: reads return nothing while it runs and the output
    /// its outcome carries once it settles. Returns its id.
    ///
    /// # Errors
    /// As [`Host::start_task`].
    pub fn start_final_task<C: TaskControl>(
        &self,
        kind: &str,
        label: &str,
        owner_session: Option<&str>,
        start: impl FnOnce(TaskHandle) -> Result<C, String> + Send + 'static,
    ) -> Result<String, String> {
        self.start_kind(TaskKind::Final, kind, label, owner_session, start)
    }

    fn start_kind<C: TaskControl>(
        &self,
        task_kind: TaskKind,
        kind: &str,
        label: &str,
        owner_session: Option<&str>,
        start: impl FnOnce(TaskHandle) -> Result<C, String> + Send + 'static,
    ) -> Result<String, String> {
        let decl = task_decl(kind, label, owner_session);
        let starter = Starter_TO::from_value(
            StarterGlue::<C, _>(Some(start), task_kind, Default::default()),
            TD_Opaque,
        );
        self.0
            .start_task(decl, starter)
            .into_result()
            .map(String::from)
            .map_err(String::from)
    }

    /// Starts a process task (see [`HostApi::start_process_task`]); returns its id.
    ///
    /// # Errors
    /// The registry's refusal; nothing is started then.
    pub fn start_process_task(
        &self,
        kind: &str,
        label: &str,
        owner_session: Option<&str>,
        request: ProcessRequest,
    ) -> Result<String, String> {
        let decl = task_decl(kind, label, owner_session);
        self.0
            .start_process_task(decl, request)
            .into_result()
            .map(String::from)
            .map_err(String::from)
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

    /// Starts a child agent task (see [`HostApi::start_subagent_task`]); returns its id.
    ///
    /// # Errors
    /// The registry's refusal; nothing is started then.
    pub fn start_subagent_task(
        &self,
        kind: &str,
        label: &str,
        owner_session: Option<&str>,
        request: SubagentRequest,
    ) -> Result<String, String> {
        let decl = task_decl(kind, label, owner_session);
        self.0
            .start_subagent_task(decl, request)
            .into_result()
            .map(String::from)
            .map_err(String::from)
    }

    /// Starts a task whose work runs elsewhere (see [`HostApi::start_external_task`]); returns the task
    /// id and the work's own id.
    ///
    /// # Errors
    /// The registry's refusal, or the start command's failure; nothing is registered then.
    pub fn start_external_task(
        &self,
        kind: &str,
        label: &str,
        owner_session: Option<&str>,
        request: ExternalRequest,
    ) -> Result<(String, String), String> {
        let decl = task_decl(kind, label, owner_session);
        self.0
            .start_external_task(decl, request)
            .into_result()
            .map(|s| (s.task_id.into_string(), s.external_id.into_string()))
            .map_err(String::from)
    }

    /// Runs a child agent in the foreground (see [`HostApi::run_subagent`]).
    pub fn run_subagent(&self, session: &str, request: SubagentRequest) -> FfiOutcome {
        self.0.run_subagent(session.into(), request)
    }
}

/// A task declaration without an output limit.
fn task_decl(kind: &str, label: &str, owner_session: Option<&str>) -> TaskDecl {
    TaskDecl::new(kind, label, owner_session)
}
