//! Registering a task a producer declared: its owner looked up among the open sessions, its output
//! limit set, then the registry's fence and admission checks.

use taskhost_registry::{ProducerError, RegistryError, TaskHooks, TaskId, TaskStart};

use super::handles::Services;

/// Why a declared task was not started. Its text is model-facing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DeclareError {
    /// The owner's session is not open.
    #[error("unknown session {0}")]
    UnknownSession(String),
    /// The registry refused the task, or its start failed.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// The start returned without the work it was to begin.
    #[error("{0} started no work")]
    NoWork(String),
    /// Refused before it was recorded: the tasks it runs after, its working directory, its
    /// owner's policy (a queued task is checked as far as it can be before it waits).
    #[error("{0}")]
    Refused(String),
}

impl From<DeclareError> for String {
    fn from(e: DeclareError) -> Self {
        e.to_string()
    }
}

/// A task as its producer declares it, in host types.
#[derive(Clone, Debug, Default)]
pub struct TaskDeclaration {
    /// The task kind (`bash`, `subagent`, ...), the prefix of its id.
    pub kind: String,
    /// What the task does, as `task_list` shows it.
    pub label: String,
    /// The output limit, if the producer sets one.
    pub output_limit_bytes: Option<u64>,
    /// The owning session; `None` for an unowned task.
    pub owner_session: Option<String>,
    /// Tasks of the same owner this one runs after; honoured for process tasks
    /// ([`Services::start_process`]), refused for any other start.
    pub after: Vec<String>,
}

impl TaskDeclaration {
    /// The owning session, `""` for an unowned task (the process service's key for spill files).
    pub fn session_key(&self) -> String {
        self.owner_session.clone().unwrap_or_default()
    }
}

impl Services {
    /// Registers the task `decl` declares, started by `run` (called once, synchronously, if the
    /// registry admits the task). Returns the task id.
    ///
    /// # Errors
    /// The owner's session is not open, the registry refused the task, or `run` failed; the text
    /// says which.
    pub fn declare(
        &self,
        decl: &TaskDeclaration,
        run: impl FnOnce() -> Result<TaskHooks, ProducerError> + Send + 'static,
    ) -> Result<String, DeclareError> {
        self.register(decl, None, None, move |_| run())
    }

    /// As [`Services::declare`], with `run` given the task's id when it is known before the start
    /// (with a state, which numbers the task durably first; see [`TaskStart::with_id`]).
    ///
    /// # Errors
    /// As [`Services::declare`].
    pub(crate) fn declare_named(
        &self,
        decl: &TaskDeclaration,
        run: impl FnOnce(Option<&TaskId>) -> Result<TaskHooks, ProducerError> + Send + 'static,
    ) -> Result<String, DeclareError> {
        self.register(decl, None, None, run)
    }

    /// The declaration of the task `record` describes, taken over from a host that is gone; its
    /// owner's session is opened if it is not (its notices wait for it to come back).
    pub(crate) fn declaration_of(&self, record: &taskhost_store::TaskRecord) -> TaskDeclaration {
        if let Some(session) = &record.owner
            && !self.sessions.is_open(session)
        {
            self.sessions.open(session);
        }
        TaskDeclaration {
            kind: record.kind.clone(),
            label: record.label.clone(),
            output_limit_bytes: None,
            owner_session: record.owner.clone(),
            after: Vec::new(),
        }
    }

    /// As [`Services::declare`], for task `kind-number` of the records, which an earlier host
    /// started: it keeps its id.
    ///
    /// # Errors
    /// As [`Services::declare`], or the registry holds that task already.
    pub fn take_over(
        &self,
        decl: &TaskDeclaration,
        number: u64,
        run: impl FnOnce() -> Result<TaskHooks, ProducerError> + Send + 'static,
    ) -> Result<String, DeclareError> {
        self.register(decl, Some(number), None, move |_| run())
    }

    /// As [`Services::declare`], for work that began at `began_at_ms` (ms since the epoch) before
    /// it became a task: the task shows as started then ([`TaskStart::started_at`]).
    ///
    /// # Errors
    /// As [`Services::declare`].
    pub(crate) fn declare_begun(
        &self,
        decl: &TaskDeclaration,
        began_at_ms: u64,
        run: impl FnOnce() -> Result<TaskHooks, ProducerError> + Send + 'static,
    ) -> Result<String, DeclareError> {
        self.register(decl, None, Some(began_at_ms), move |_| run())
    }

    fn register(
        &self,
        decl: &TaskDeclaration,
        taken_over: Option<u64>,
        began_at_ms: Option<u64>,
        run: impl FnOnce(Option<&TaskId>) -> Result<TaskHooks, ProducerError> + Send + 'static,
    ) -> Result<String, DeclareError> {
        if !decl.after.is_empty() {
            return Err(DeclareError::Refused(format!(
                "after: a {} task cannot wait for other tasks (only process tasks, such as bash's, can)",
                decl.kind
            )));
        }
        self.register_queued(decl, taken_over, began_at_ms, false, run)
    }

    /// As `register`, the task registered `queued` when `queued` is set (its work begins later,
    /// [`taskhost_registry::Registry::begin_running`]); `decl.after` is the caller's to honour.
    pub(crate) fn register_queued(
        &self,
        decl: &TaskDeclaration,
        taken_over: Option<u64>,
        began_at_ms: Option<u64>,
        queued: bool,
        run: impl FnOnce(Option<&TaskId>) -> Result<TaskHooks, ProducerError> + Send + 'static,
    ) -> Result<String, DeclareError> {
        let owner = match &decl.owner_session {
            None => None,
            Some(s) => match self.sessions.agent(s) {
                Some(agent) => Some(agent),
                None => return Err(DeclareError::UnknownSession(s.clone())),
            },
        };
        let mut spec = TaskStart::with_id(decl.kind.as_str(), decl.label.as_str(), run);
        if let Some(limit) = decl.output_limit_bytes {
            spec = spec.output_limit_bytes(limit);
        }
        if let Some(owner) = owner {
            spec = spec.owner(owner);
        }
        if let Some(number) = taken_over {
            spec = spec.take_over(number);
        }
        if let Some(ms) = began_at_ms {
            spec = spec.started_at(ms);
        }
        if queued {
            spec = spec.queued();
        }
        self.registry
            .start(spec)
            .map(|id| id.as_str().to_owned())
            .map_err(DeclareError::from)
    }
}
