//! The producer contract: how a capability hands its work to the registry.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::agent::Agent;
use crate::error::ProducerError;
use crate::ids::TaskId;
use crate::status::TaskOutcome;

/// The boxed completion future a producer hands over.
pub type DoneFuture = Pin<Box<dyn Future<Output = Result<TaskOutcome, ProducerError>> + Send>>;
pub(crate) type CancelFn = Box<dyn FnMut(Option<&str>) -> Result<(), ProducerError> + Send>;
pub(crate) type ReaderFn = Box<dyn FnMut() -> String + Send>;
pub(crate) type WriterFn = Box<dyn FnMut(&[u8], bool) -> Result<(), ProducerError> + Send>;
type RunFn = Box<dyn FnOnce(Option<&TaskId>) -> Result<TaskHooks, ProducerError> + Send>;

/// The hooks through which the registry controls and observes one piece of running work.
///
/// The registry calls `cancel` and the reader one at a time per task, never while holding its own
/// bookkeeping lock, and drops the hooks once the task settles (after draining a last stream delta),
/// so whatever they capture is released at quiescence.
pub struct TaskHooks {
    pub(crate) done: DoneFuture,
    pub(crate) cancel: CancelFn,
    pub(crate) reader: Option<ReaderFn>,
    pub(crate) peeker: Option<ReaderFn>,
    pub(crate) writer: Option<WriterFn>,
    pub(crate) watch: Option<WatchFactory>,
}

impl TaskHooks {
    /// Hooks for a final-output task.
    ///
    /// `done` must settle once the producer has released the task's resources (quiescence), and should
    /// not fail; a failure is recorded as `failed` with the error as detail. `cancel` requests
    /// termination: idempotent, and it must lead to `done` settling; an error it returns fails the kill
    /// that called it and leaves the task as it was.
    pub fn new(
        done: impl Future<Output = Result<TaskOutcome, ProducerError>> + Send + 'static,
        cancel: impl FnMut(Option<&str>) -> Result<(), ProducerError> + Send + 'static,
    ) -> Self {
        Self {
            done: Box::pin(done),
            cancel: Box::new(cancel),
            reader: None,
            peeker: None,
            writer: None,
            watch: None,
        }
    }

    /// Makes this a stream task: `reader` returns the output produced since its previous call (never
    /// re-delivering), formatting any truncation or spill notices itself.
    pub fn with_reader(mut self, reader: impl FnMut() -> String + Send + 'static) -> Self {
        self.reader = Some(Box::new(reader));
        self
    }

    /// Lets a stream task's unread output be looked at without consuming it (what `wait_for` matches):
    /// `peeker` returns what the next read would, and leaves it unread. Without one, a stream task's
    /// output cannot be watched ([`crate::RegistryError::NotWatchable`]).
    pub fn with_peeker(mut self, peeker: impl FnMut() -> String + Send + 'static) -> Self {
        self.peeker = Some(Box::new(peeker));
        self
    }

    /// Lets waits on the task's output look only at what is new and sleep until more arrives:
    /// `watch` makes an [`OutputWatch`](crate::OutputWatch) for each wait. Without one, a wait on
    /// output peeks at the whole unread output every few milliseconds.
    pub fn with_output_watch(
        mut self,
        watch: impl Fn() -> Box<dyn OutputWatch> + Send + Sync + 'static,
    ) -> Self {
        self.watch = Some(std::sync::Arc::new(watch));
        self
    }

    /// Makes the task take input: `writer(bytes, eof)` delivers `bytes` to the work as typed, then,
    /// when `eof` is set, the end of input. It may block briefly (a full terminal buffer) and must
    /// return an error rather than block for long. Without one the task takes no input
    /// ([`crate::RegistryError::NoInput`]).
    pub fn with_writer(
        mut self,
        writer: impl FnMut(&[u8], bool) -> Result<(), ProducerError> + Send + 'static,
    ) -> Self {
        self.writer = Some(Box::new(writer));
        self
    }

    /// True when the hooks carry an incremental reader.
    pub fn is_stream(&self) -> bool {
        self.reader.is_some()
    }
}

impl fmt::Debug for TaskHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskHooks")
            .field("stream", &self.is_stream())
            .field("takes_input", &self.writer.is_some())
            .finish_non_exhaustive()
    }
}

/// A producer's declaration: identity first, then the starter the registry calls once every check
/// passed (declare, then execute).
pub struct TaskStart {
    pub(crate) kind: String,
    pub(crate) label: String,
    pub(crate) output_limit_bytes: Option<u64>,
    pub(crate) owner: Option<Agent>,
    pub(crate) run: RunFn,
    /// The number of a task the journal holds already, taken over rather than begun.
    pub(crate) taken_over: Option<u64>,
    /// When the task's work began, if before its start (ms since the epoch).
    pub(crate) started_at_ms: Option<u64>,
    /// Registered `queued`: its work begins later ([`crate::Registry::begin_running`]).
    pub(crate) queued: bool,
}

impl TaskStart {
    /// Declares a task of `kind` (also the id prefix) labelled `label`, started by `run`.
    ///
    /// `run` is called at most once, after every check that can fail has passed. If it fails, nothing
    /// is registered and no id is used; it must clean up whatever it had started.
    pub fn new(
        kind: impl Into<String>,
        label: impl Into<String>,
        run: impl FnOnce() -> Result<TaskHooks, ProducerError> + Send + 'static,
    ) -> Self {
        Self::with_id(kind, label, move |_| run())
    }

    /// As [`TaskStart::new`], with `run` given the task's id when it is known before the start:
    /// always with a journal, which numbers a task durably before its start (and abandons the
    /// number if the start fails), and for a take-over; `None` otherwise. A producer that makes
    /// something outlive its host under the task's name (a keeper's hold) can name it from the
    /// start.
    pub fn with_id(
        kind: impl Into<String>,
        label: impl Into<String>,
        run: impl FnOnce(Option<&TaskId>) -> Result<TaskHooks, ProducerError> + Send + 'static,
    ) -> Self {
        Self {
            kind: kind.into(),
            label: label.into(),
            output_limit_bytes: None,
            owner: None,
            run: Box::new(run),
            taken_over: None,
            started_at_ms: None,
            queued: false,
        }
    }

    /// Registers the task `queued`: the starter returns hooks whose work has not begun (it waits
    /// for a slot or for other tasks), and the producer calls [`crate::Registry::begin_running`]
    /// once it begins. Until then the task is live, holds its owner's slot, and can be killed.
    pub fn queued(mut self) -> Self {
        self.queued = true;
        self
    }

    /// Takes over task `kind-number`, whose record the journal holds (work a host that is gone
    /// started and this one follows on): the task keeps its id and no new record is begun. Refused
    /// with [`RegistryError::Restore`](crate::RegistryError::Restore) when the registry holds that
    /// id already.
    pub fn take_over(mut self, number: u64) -> Self {
        self.taken_over = Some(number);
        self
    }

    /// Dates the task's start at `ms` (milliseconds since the epoch) rather than now: work that
    /// began before it became a task (a foreground command promoted at its timeout) shows as started
    /// when it began. A time after now is taken as now.
    pub fn started_at(mut self, ms: u64) -> Self {
        self.started_at_ms = Some(ms);
        self
    }

    /// Sets the owning agent. Without one the task is unowned: open to every caller, and it lives until
    /// the registry is disposed.
    pub fn owner(mut self, owner: Agent) -> Self {
        self.owner = Some(owner);
        self
    }

    /// Sets the byte cap for model-facing reads and notices of this task.
    pub fn output_limit_bytes(mut self, limit: u64) -> Self {
        self.output_limit_bytes = Some(limit);
        self
    }
}

impl fmt::Debug for TaskStart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskStart")
            .field("kind", &self.kind)
            .field("label", &self.label)
            .field("output_limit_bytes", &self.output_limit_bytes)
            .field("owner", &self.owner)
            .finish_non_exhaustive()
    }
}

/// A stream task's output as it grows, for one wait.
pub trait OutputWatch: Send {
    /// What arrived since the previous call (the first call: everything unread), as texts a read
    /// would show, one per stream; each is preceded by its stream's unfinished last line of the
    /// previous call, so a line that arrived in pieces is matched whole.
    fn fresh(&mut self) -> Vec<String>;

    /// Resolves once output may have arrived since the previous [`OutputWatch::fresh`].
    fn changed(&mut self) -> Pin<Box<dyn Future<Output = ()> + Send + '_>>;
}

/// Makes an [`OutputWatch`] for each wait.
pub(crate) type WatchFactory = Arc<dyn Fn() -> Box<dyn OutputWatch> + Send + Sync>;
