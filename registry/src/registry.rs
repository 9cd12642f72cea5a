//! The registry's operations: start, get, list, read, kill, wait, listeners, surfaces, agents.

use parking_lot::Mutex;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::FutureExt;
use tokio::runtime::Handle;
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::config::RegistryConfig;
use crate::error::{MAX_SAFE_INTEGER, RegistryError};
use crate::hook_scope;
use crate::ids::TaskId;
use crate::listeners::{
    Detach, ListenerSet, Registration, TaskDoneListener, TasksChangedListener, panic_text,
};
use crate::producer::{ProducerError, ReaderFn, TaskHooks, TaskStart};
use crate::state::{
    Bucket, LiveHooks, Ops, OwnerKey, Phase, Record, SharedOps, State, now_ms, owner_key,
};
use crate::status::{TaskOutcome, TaskRead, TaskSnapshot};
use crate::surface::{SurfaceScope, Surfaces};

/// Longest wait honoured; longer timeouts are clamped (a wait is bounded, not infinite).
const MAX_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

type DoneSet = ListenerSet<dyn Fn(&TaskSnapshot, Option<&Agent>) + Send + Sync>;
type ChangedSet = ListenerSet<dyn Fn(Option<&Agent>) + Send + Sync>;

/// The background task registry: one per host process, shared by every producer and surface.
///
/// Cheap to clone; clones share one registry. Every method is safe to call from any thread. Producer
/// code (starters, cancels, readers) is never called while the registry's bookkeeping lock is held, so a
/// producer may call back into the registry. A kill or read of the very task whose hook is running is
/// refused with [`RegistryError::OwnHook`] (it would wait on the call running the hook), on the hook's
/// thread and on any thread that entered its [`HookScope`](crate::HookScope).
#[derive(Clone)]
pub struct Registry {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: RegistryConfig,
    runtime: Handle,
    pub(crate) state: Mutex<State>,
    pub(crate) done_listeners: Arc<DoneSet>,
    pub(crate) changed_listeners: Arc<ChangedSet>,
    surfaces: Arc<Surfaces>,
    /// Signalled whenever a start leaves its reserved slot (committed or failed).
    pub(crate) reservations: Notify,
}

/// What [`Registry::kill`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KillOutcome {
    /// The producer accepted the cancel; the task is `stopping` (or settled since) and reported.
    Requested(TaskSnapshot),
    /// The task had already settled; it is now marked reported. Its output is not consumed.
    AlreadyFinished(TaskSnapshot),
}

impl KillOutcome {
    /// The snapshot taken right after the kill.
    pub fn snapshot(&self) -> &TaskSnapshot {
        match self {
            KillOutcome::Requested(s) | KillOutcome::AlreadyFinished(s) => s,
        }
    }
}

/// Counts for tests, diagnostics and benchmarks; taking them costs O(owners).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegistryStats {
    /// Task records held (live and terminal).
    pub records: usize,
    /// Live tasks (running or stopping) plus starts in flight.
    pub live: u64,
    /// Waiters currently parked in [`Registry::wait`].
    pub pending_waiters: usize,
    /// Owner buckets (one per owner that ever started a task, until it is disposed).
    pub owners: usize,
    /// Registered completion listeners.
    pub done_listeners: usize,
    /// Registered change listeners.
    pub changed_listeners: usize,
}

/// A settlement to announce once every lock is released.
pub(crate) struct Settled {
    snapshot: TaskSnapshot,
    owner: Option<Agent>,
}

/// Why a task is being settled.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The producer's completion resolved.
    Done,
    /// The registry force-failed it; the producer's completion is abandoned.
    Forced,
}

impl Registry {
    /// Creates an empty registry that drives completions on `runtime`.
    pub fn new(config: RegistryConfig, runtime: Handle) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                runtime,
                state: Mutex::new(State::new()),
                done_listeners: Arc::new(ListenerSet::new()),
                changed_listeners: Arc::new(ListenerSet::new()),
                surfaces: Arc::new(Surfaces::new()),
                reservations: Notify::new(),
            }),
        }
    }

    /// The registry's settings.
    pub fn config(&self) -> &RegistryConfig {
        &self.inner.config
    }

    // ----- agents -------------------------------------------------------------------------------

    /// Makes `agent` the live instance for its id, so it can own tasks. Returns the instance it
    /// replaced, if any: that one can no longer start tasks, but its tasks keep running until it is
    /// disposed.
    pub fn register_agent(&self, agent: &Agent) -> Option<Agent> {
        self.inner
            .state
            .lock()
            .agents
            .insert(agent.id().clone(), agent.clone())
    }

    /// The live instance registered under `id`.
    pub fn registered_agent(&self, id: &str) -> Option<Agent> {
        self.inner
            .state
            .lock()
            .agents
            .get(&crate::AgentId::new(id))
            .cloned()
    }

    // ----- surfaces and listeners ---------------------------------------------------------------

    /// Attaches a control surface: while attached, `start` accepts tasks of the owners it serves.
    /// `name` is diagnostic; duplicate names are independent attachments.
    pub fn attach_surface(&self, name: impl Into<String>, scope: SurfaceScope) -> Registration {
        let key = self.inner.surfaces.attach(name.into(), scope);
        let target: Weak<dyn Detach> = Arc::downgrade(&self.inner.surfaces) as Weak<dyn Detach>;
        Registration::new(target, Some(key))
    }

    /// The names of the attached surfaces, in attach order.
    pub fn surfaces(&self) -> Vec<String> {
        self.inner.surfaces.names()
    }

    /// Registers a completion listener: called exactly once per task that settles, after the record is
    /// committed, its waiters released and change listeners told. Never called after service disposal
    /// began; a registration made after that is inert.
    pub fn on_task_done(&self, listener: TaskDoneListener) -> Registration {
        let key = self.inner.done_listeners.add(listener);
        let target: Weak<dyn Detach> =
            Arc::downgrade(&self.inner.done_listeners) as Weak<dyn Detach>;
        Registration::new(target, key)
    }

    /// Registers a change listener: called after every commit that changes what [`Registry::list`]
    /// returns for an owner (registration, a move to `stopping`, settlement, owner removal, the
    /// emptying at service disposal). It carries no delivery meaning and marks nothing reported.
    pub fn on_tasks_changed(&self, listener: TasksChangedListener) -> Registration {
        let key = self.inner.changed_listeners.add(listener);
        let target: Weak<dyn Detach> =
            Arc::downgrade(&self.inner.changed_listeners) as Weak<dyn Detach>;
        Registration::new(target, key)
    }

    // ----- start --------------------------------------------------------------------------------

    /// Declares and starts a task; returns its id.
    ///
    /// Checks, in order, before the starter runs: the registry is open; an attached surface serves the
    /// owner; kind and label are non-empty; the output limit is a positive safe integer; the owner is
    /// the live instance registered under its id; the owner has a free slot (running plus stopping
    /// tasks below the limit; unowned tasks share one bucket). Then the starter runs, outside every
    /// registry lock. Once it returns hooks, registration cannot fail.
    ///
    /// # Errors
    /// The first failing check, or the starter's own error; in every case nothing is registered and no
    /// id is used.
    pub fn start(&self, spec: TaskStart) -> Result<TaskId, RegistryError> {
        let TaskStart {
            kind,
            label,
            output_limit_bytes,
            owner,
            run,
        } = spec;
        let key = owner_key(owner.as_ref());
        self.preflight(&kind, &label, output_limit_bytes, owner.as_ref(), key)?;

        let hooks = match catch_unwind(AssertUnwindSafe(run)) {
            Ok(Ok(hooks)) => hooks,
            Ok(Err(e)) => {
                self.inner.release_reservation(key);
                return Err(e.into());
            }
            Err(panic) => {
                self.inner.release_reservation(key);
                let text = format!("task starter panicked: {}", panic_text(&*panic));
                return Err(ProducerError(text).into());
            }
        };
        let TaskHooks {
            done,
            cancel,
            reader,
        } = hooks;
        let stream = reader.is_some();
        let ops: SharedOps = Arc::new(Mutex::new(Ops {
            hooks: Some(LiveHooks { cancel, reader }),
            remainder: String::new(),
            watcher: None,
        }));

        let id = {
            let mut st = self.inner.state.lock();
            let st = &mut *st;
            let n = st.counters.entry(kind.clone()).or_insert(0);
            *n += 1;
            let id = TaskId::issue(&kind, *n);
            let seq = st.next_seq;
            st.next_seq += 1;
            st.index_for(owner.as_ref()).insert(seq, id.clone());
            let bucket = st.buckets.entry(key).or_insert_with(Bucket::new);
            bucket.reserved -= 1;
            bucket.tasks.push(id.clone());
            let (settled, _) = watch::channel(None);
            st.records.insert(
                id.clone(),
                Record {
                    id: id.clone(),
                    seq,
                    kind,
                    label,
                    output_limit_bytes,
                    owner: owner.clone(),
                    stream,
                    status: crate::TaskStatus::Running,
                    detail: None,
                    output: None,
                    started_at_ms: now_ms(),
                    finished_at_ms: None,
                    reported: false,
                    pending_waiters: 0,
                    settled,
                    ops: ops.clone(),
                },
            );
            id
        };
        self.inner.reservations.notify_waiters();
        self.inner.changed(owner.as_ref());

        let inner = self.inner.clone();
        let watched = id.clone();
        let watcher = self.inner.runtime.spawn(async move {
            let outcome = match AssertUnwindSafe(done).catch_unwind().await {
                Ok(Ok(outcome)) => outcome,
                Ok(Err(e)) => {
                    tracing::warn!(task = %watched, error = %e, "producer contract violation: task completion failed");
                    TaskOutcome::failed(e.0)
                }
                Err(panic) => {
                    let text = panic_text(&*panic);
                    tracing::warn!(task = %watched, panic = %text, "producer contract violation: task completion panicked");
                    TaskOutcome::failed(format!("task completion panicked: {text}"))
                }
            };
            inner.settle(&watched, outcome, Cause::Done);
        });
        let mut ops = ops.lock();
        if ops.hooks.is_some() {
            ops.watcher = Some(watcher.abort_handle());
        }
        Ok(id)
    }

    fn preflight(
        &self,
        kind: &str,
        label: &str,
        output_limit_bytes: Option<u64>,
        owner: Option<&Agent>,
        key: OwnerKey,
    ) -> Result<(), RegistryError> {
        let mut st = self.inner.state.lock();
        if st.phase != Phase::Open {
            return Err(RegistryError::Disposed);
        }
        if !self.inner.surfaces.serves(owner) {
            return Err(RegistryError::NoSurface);
        }
        if kind.is_empty() {
            return Err(RegistryError::InvalidKind);
        }
        if label.is_empty() {
            return Err(RegistryError::InvalidLabel);
        }
        if let Some(limit) = output_limit_bytes
            && (limit == 0 || limit > MAX_SAFE_INTEGER)
        {
            return Err(RegistryError::InvalidOutputLimit(limit));
        }
        if let Some(a) = owner {
            let live = st
                .agents
                .get(a.id())
                .is_some_and(|cur| cur.same_instance(a));
            if !live {
                return Err(RegistryError::StaleOwner(a.id().clone()));
            }
        }
        let limit = self.inner.config.max_tasks_per_owner();
        let bucket = st.buckets.entry(key).or_insert_with(Bucket::new);
        if bucket.closed {
            let id = owner.map(|a| a.id().clone()).unwrap_or_else(|| "".into());
            return Err(RegistryError::StaleOwner(id));
        }
        if bucket.live >= limit {
            return Err(RegistryError::LimitReached(limit));
        }
        bucket.live += 1;
        bucket.reserved += 1;
        Ok(())
    }

    // ----- get, list, read ----------------------------------------------------------------------

    /// A non-consuming snapshot: changes neither the read cursor nor the notice state.
    ///
    /// # Errors
    /// [`RegistryError::UnknownTask`], or [`RegistryError::ForeignTask`] when the task is owned by a
    /// session other than the caller's (a caller without an agent matches only unowned tasks).
    pub fn get(&self, id: &str, caller: Option<&Agent>) -> Result<TaskSnapshot, RegistryError> {
        let st = self.inner.state.lock();
        authorize(&st, id, caller).map(Record::snapshot)
    }

    /// The caller's tasks and the unowned ones, live and terminal, in registration order. Costs what
    /// the caller can see, not the registry's size.
    pub fn list(&self, caller: Option<&Agent>) -> Vec<TaskSnapshot> {
        let st = self.inner.state.lock();
        let own = caller.and_then(|a| st.by_session.get(a.session()));
        let mut own = own.into_iter().flat_map(|m| m.iter()).peekable();
        let mut unowned = st.unowned.iter().peekable();
        let mut out = Vec::with_capacity(own.size_hint().0 + st.unowned.len());
        loop {
            let next = match (own.peek(), unowned.peek()) {
                (Some((a, _)), Some((b, _))) if a < b => own.next(),
                (Some(_), Some(_)) => unowned.next(),
                (Some(_), None) => own.next(),
                (None, Some(_)) => unowned.next(),
                (None, None) => break,
            };
            if let Some(rec) = next.and_then(|(_, id)| st.records.get(id)) {
                out.push(rec.snapshot());
            }
        }
        out
    }

    /// Reads a task. Stream kinds return the output since the previous read (consuming); final-output
    /// kinds return "" while live and the final output, idempotently, once settled. A read of a
    /// settled task marks it reported.
    ///
    /// # Errors
    /// As [`Registry::get`]; [`RegistryError::OwnHook`] from inside the task's own cancel or reader;
    /// or [`RegistryError::Producer`] if the producer's reader panicked (the cursor is then the
    /// producer's business; the task is otherwise unchanged).
    pub fn read(&self, id: &str, caller: Option<&Agent>) -> Result<TaskRead, RegistryError> {
        let (task, ops) = {
            let st = self.inner.state.lock();
            let rec = authorize(&st, id, caller)?;
            (rec.id.clone(), rec.ops.clone())
        };
        hook_scope::refuse_own(id)?;
        let mut ops = ops.lock();
        let ops = &mut *ops;
        let delta = match ops.hooks.as_mut().and_then(|h| h.reader.as_mut()) {
            Some(reader) => call_reader(&task, reader).map_err(|p| {
                ProducerError(format!("output reader panicked: {}", panic_text(&*p)))
            })?,
            None => std::mem::take(&mut ops.remainder),
        };
        let mut st = self.inner.state.lock();
        let rec = st
            .records
            .get_mut(id)
            .ok_or_else(|| RegistryError::UnknownTask(id.to_owned()))?;
        let text = if rec.status.is_terminal() {
            rec.reported = true;
            if rec.stream {
                delta
            } else {
                rec.output.clone().unwrap_or_default()
            }
        } else {
            delta
        };
        Ok(TaskRead {
            text,
            snapshot: rec.snapshot(),
        })
    }

    // ----- kill ---------------------------------------------------------------------------------

    /// Requests cancellation. A live task's producer cancel runs first; if it fails the kill fails and
    /// the task is untouched. Otherwise the task becomes `stopping` and reported. A settled task
    /// answers [`KillOutcome::AlreadyFinished`] and is marked reported; its output is not consumed.
    /// A `stopping` task is cancelled again (cancels are idempotent).
    ///
    /// # Errors
    /// As [`Registry::get`], [`RegistryError::OwnHook`] from inside the task's own cancel or reader,
    /// or [`RegistryError::Producer`] with the cancel's error.
    pub fn kill(
        &self,
        id: &str,
        caller: Option<&Agent>,
        reason: Option<&str>,
    ) -> Result<KillOutcome, RegistryError> {
        let (task, ops) = {
            let st = self.inner.state.lock();
            let rec = authorize(&st, id, caller)?;
            (rec.id.clone(), rec.ops.clone())
        };
        hook_scope::refuse_own(id)?;
        let mut ops = ops.lock();
        {
            let mut st = self.inner.state.lock();
            let rec = st
                .records
                .get_mut(id)
                .ok_or_else(|| RegistryError::UnknownTask(id.to_owned()))?;
            if rec.status.is_terminal() {
                rec.reported = true;
                return Ok(KillOutcome::AlreadyFinished(rec.snapshot()));
            }
        }
        if let Some(hooks) = ops.hooks.as_mut() {
            call_cancel(&task, hooks, reason)?;
        }
        let (snapshot, owner, moved) = {
            let mut st = self.inner.state.lock();
            let rec = st
                .records
                .get_mut(id)
                .ok_or_else(|| RegistryError::UnknownTask(id.to_owned()))?;
            rec.reported = true;
            let moved = rec.status == crate::TaskStatus::Running;
            if moved {
                rec.status = crate::TaskStatus::Stopping;
            }
            (rec.snapshot(), rec.owner.clone(), moved)
        };
        drop(ops);
        if moved {
            self.inner.changed(owner.as_ref());
        }
        Ok(KillOutcome::Requested(snapshot))
    }

    // ----- wait ---------------------------------------------------------------------------------

    /// Waits for the task to settle, for at most `timeout_ms` milliseconds, without cancelling it.
    ///
    /// Returns the terminal snapshot (marked reported), or the live snapshot when the timeout expires.
    /// An abort rejects the wait with [`RegistryError::WaitAborted`] while the task is live; if the task
    /// already settled, the terminal snapshot wins (the settlement counted this waiter as its reporter).
    ///
    /// # Errors
    /// [`RegistryError::InvalidWaitTimeout`] for a timeout that is not a positive finite number (checked
    /// first, even for settled tasks); otherwise as [`Registry::get`], or `WaitAborted`.
    ///
    /// # Cancel safety
    /// Dropping the future un-counts the waiter at once; nothing is retained for it. If the task
    /// settled while the waiter was counted, the task stays reported.
    pub async fn wait(
        &self,
        id: &str,
        timeout_ms: f64,
        caller: Option<&Agent>,
        abort: Option<&CancellationToken>,
    ) -> Result<TaskSnapshot, RegistryError> {
        if !(timeout_ms.is_finite() && timeout_ms > 0.0) {
            return Err(RegistryError::InvalidWaitTimeout(json_number(timeout_ms)));
        }
        let mut settled = {
            let mut st = self.inner.state.lock();
            let st = &mut *st;
            authorize(st, id, caller)?;
            let Some(rec) = st.records.get_mut(id) else {
                return Err(RegistryError::UnknownTask(id.to_owned()));
            };
            if rec.status.is_terminal() {
                rec.reported = true;
                return Ok(rec.snapshot());
            }
            rec.pending_waiters += 1;
            st.pending_waiters += 1;
            rec.settled.subscribe()
        };
        let mut guard = WaiterGuard {
            inner: &self.inner,
            id,
            armed: true,
        };
        let timeout = Duration::from_secs_f64(timeout_ms / 1000.0).min(MAX_WAIT);
        let aborted = async {
            match abort {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let timed_out = tokio::select! {
            biased;
            _ = settled.wait_for(Option::is_some) => false,
            _ = aborted => false,
            _ = tokio::time::sleep(timeout) => true,
        };
        guard.armed = false;
        let mut st = self.inner.state.lock();
        let st = &mut *st;
        match st.records.get_mut(id) {
            Some(rec) if rec.status.is_live() => {
                rec.pending_waiters -= 1;
                st.pending_waiters -= 1;
                if timed_out {
                    Ok(rec.snapshot())
                } else {
                    Err(RegistryError::WaitAborted)
                }
            }
            Some(rec) => Ok(rec.snapshot()),
            None => settled
                .borrow()
                .clone()
                .ok_or_else(|| RegistryError::UnknownTask(id.to_owned())),
        }
    }

    /// Counts of what the registry holds.
    pub fn stats(&self) -> RegistryStats {
        let st = self.inner.state.lock();
        RegistryStats {
            records: st.records.len(),
            live: st.buckets.values().map(|b| b.live).sum(),
            pending_waiters: st.pending_waiters,
            owners: st.buckets.keys().filter(|k| k.is_some()).count(),
            done_listeners: self.inner.done_listeners.len(),
            changed_listeners: self.inner.changed_listeners.len(),
        }
    }
}

/// Un-counts a waiter whose future was dropped before it finished.
struct WaiterGuard<'a> {
    inner: &'a Inner,
    id: &'a str,
    armed: bool,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let mut st = self.inner.state.lock();
        let st = &mut *st;
        if let Some(rec) = st.records.get_mut(self.id)
            && rec.status.is_live()
        {
            rec.pending_waiters -= 1;
            st.pending_waiters -= 1;
        }
    }
}

fn authorize<'s>(
    st: &'s State,
    id: &str,
    caller: Option<&Agent>,
) -> Result<&'s Record, RegistryError> {
    let rec = st
        .records
        .get(id)
        .ok_or_else(|| RegistryError::UnknownTask(id.to_owned()))?;
    match &rec.owner {
        None => Ok(rec),
        Some(owner) if caller.is_some_and(|c| c.session() == owner.session()) => Ok(rec),
        Some(_) => Err(RegistryError::ForeignTask(rec.id.clone())),
    }
}

/// Calls a producer cancel, turning a panic into an error.
pub(crate) fn call_cancel(
    id: &TaskId,
    hooks: &mut LiveHooks,
    reason: Option<&str>,
) -> Result<(), ProducerError> {
    let cancelled = hook_scope::run_hook(id, || {
        catch_unwind(AssertUnwindSafe(|| (hooks.cancel)(reason)))
    });
    match cancelled {
        Ok(r) => r,
        Err(p) => Err(ProducerError(format!(
            "cancel panicked: {}",
            panic_text(&*p)
        ))),
    }
}

/// Runs task `id`'s reader, marked as its hook, with a panic caught.
fn call_reader(id: &TaskId, reader: &mut ReaderFn) -> std::thread::Result<String> {
    hook_scope::run_hook(id, || catch_unwind(AssertUnwindSafe(reader)))
}

/// Renders a number the way JSON (and the original's messages) would.
fn json_number(v: f64) -> String {
    if v.is_nan() || v.is_infinite() {
        "null".to_owned()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

impl Inner {
    pub(crate) fn changed(&self, owner: Option<&Agent>) {
        self.changed_listeners
            .fire("on_tasks_changed", |l| l(owner));
    }

    pub(crate) fn announce(&self, settled: Settled) {
        self.changed(settled.owner.as_ref());
        self.done_listeners.fire("on_task_done", |l| {
            l(&settled.snapshot, settled.owner.as_ref())
        });
    }

    fn release_reservation(&self, key: OwnerKey) {
        {
            let mut st = self.state.lock();
            if let Some(b) = st.buckets.get_mut(&key) {
                b.live -= 1;
                b.reserved -= 1;
            }
        }
        self.reservations.notify_waiters();
    }

    pub(crate) fn ops_of(&self, id: &TaskId) -> Option<SharedOps> {
        self.state.lock().records.get(id).map(|r| r.ops.clone())
    }

    /// Settles a task (first outcome wins) and announces it.
    pub(crate) fn settle(&self, id: &TaskId, outcome: TaskOutcome, cause: Cause) {
        let Some(ops) = self.ops_of(id) else { return };
        let settled = self.settle_locked(&mut ops.lock(), id, outcome, cause);
        if let Some(s) = settled {
            self.announce(s);
        }
    }

    /// Settles a task whose ops lock the caller holds. Returns what to announce once that lock is
    /// released, or `None` if the task had already settled.
    pub(crate) fn settle_locked(
        &self,
        ops: &mut Ops,
        id: &TaskId,
        outcome: TaskOutcome,
        cause: Cause,
    ) -> Option<Settled> {
        if !self.state.lock().is_live(id) {
            return None;
        }
        let mut hooks = ops.hooks.take();
        if let Some(reader) = hooks.as_mut().and_then(|h| h.reader.as_mut()) {
            match call_reader(id, reader) {
                Ok(text) => ops.remainder.push_str(&text),
                Err(p) => {
                    tracing::warn!(task = %id, panic = %panic_text(&*p), "output reader panicked at settlement")
                }
            }
        }
        let watcher = ops.watcher.take();
        if cause == Cause::Forced
            && let Some(w) = &watcher
        {
            w.abort();
        }
        let settled = {
            let mut st = self.state.lock();
            let st = &mut *st;
            let rec = st.records.get_mut(id)?;
            rec.status = outcome.status.into();
            rec.detail = outcome.detail;
            rec.output = outcome.output;
            rec.finished_at_ms = Some(now_ms().max(rec.started_at_ms));
            if rec.pending_waiters > 0 {
                rec.reported = true;
                st.pending_waiters -= rec.pending_waiters;
                rec.pending_waiters = 0;
            }
            let snapshot = rec.snapshot();
            rec.settled.send_replace(Some(snapshot.clone()));
            let owner = rec.owner.clone();
            if let Some(b) = st.buckets.get_mut(&owner_key(owner.as_ref())) {
                b.live -= 1;
            }
            Settled { snapshot, owner }
        };
        drop(hooks);
        Some(settled)
    }
}
