//! The registry itself: construction, agents, surfaces, listeners and stats. Its operations live
//! beside it: [`start`](crate::start) (admission and registration), [`access`](crate::access) (get,
//! list, read, kill) and [`wait`](crate::wait).
//!
//! Two locks: the state lock guards bookkeeping and is never held while producer code or listeners
//! run; each task's *ops* lock serializes the producer calls of that task (cancel, read, settlement).
//! The order is always ops, then state, so a kill and a settlement of one task are strictly ordered and a
//! stream read never overlaps the final drain. A hook that calls back into the registry for its own
//! task would wait forever on the ops lock: the thread running a hook is marked with the task's id
//! (`hook_scope.rs`) and such a call is refused with `OwnHook`. At settlement the last stream delta is
//! drained into a registry-owned buffer and the producer's hooks are dropped, so what they hold (in the
//! host, a plugin generation) is released at once while the output stays readable. Bookkeeping does not
//! grow with history: records by id, per-owner buckets, per-session indexes in registration order.

use parking_lot::Mutex;
use std::sync::{Arc, Weak};

use taskhost_common::panic_text;
use tokio::runtime::Handle;
use tokio::sync::Notify;

use crate::agent::Agent;
use crate::config::RegistryConfig;
use crate::hook_scope::call_reader;
use crate::ids::TaskId;
use crate::journal::Journal;
use crate::listeners::{Detach, ListenerSet, Registration, TaskDoneListener, TasksChangedListener};
use crate::state::{Bucket, Ops, OwnerKey, SharedOps, State, now_ms, owner_key};
use crate::status::{TaskOutcome, TaskSnapshot};
use crate::surface::{SurfaceScope, Surfaces};

type DoneSet = ListenerSet<dyn Fn(&TaskSnapshot, Option<&Agent>) + Send + Sync>;
type ChangedSet = ListenerSet<dyn Fn(Option<&Agent>) + Send + Sync>;

/// The background task registry: one per host process, shared by every producer and surface.
///
/// Cheap to clone; clones share one registry. Every method is safe to call from any thread. Producer
/// code (starters, cancels, readers) is never called while the registry's bookkeeping lock is held, so a
/// producer may call back into the registry. A kill or read of the very task whose hook is running is
/// refused with [`RegistryError::OwnHook`](crate::RegistryError::OwnHook) (it would wait on the call running the hook), on the hook's
/// thread and on any thread that entered its [`HookScope`](crate::HookScope).
#[derive(Clone)]
pub struct Registry {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: RegistryConfig,
    pub(crate) runtime: Handle,
    pub(crate) state: Mutex<State>,
    pub(crate) done_listeners: Arc<DoneSet>,
    pub(crate) changed_listeners: Arc<ChangedSet>,
    pub(crate) surfaces: Arc<Surfaces>,
    /// Signalled whenever a start leaves its reserved slot (committed or failed).
    pub(crate) reservations: Notify,
    /// Where records are made durable; `None` keeps everything in memory.
    pub(crate) journal: Option<Arc<dyn Journal>>,
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
    pub(crate) snapshot: TaskSnapshot,
    pub(crate) owner: Option<Agent>,
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
        Self::build(config, runtime, None)
    }

    /// A registry whose records `journal` makes durable: a start is answered once its record is
    /// written (its number comes from the journal), and completion listeners hear of a settlement
    /// once it is written.
    pub fn with_journal(
        config: RegistryConfig,
        runtime: Handle,
        journal: Arc<dyn Journal>,
    ) -> Self {
        Self::build(config, runtime, Some(journal))
    }

    fn build(config: RegistryConfig, runtime: Handle, journal: Option<Arc<dyn Journal>>) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                runtime,
                state: Mutex::new(State::new()),
                done_listeners: Arc::new(ListenerSet::new()),
                changed_listeners: Arc::new(ListenerSet::new()),
                surfaces: Arc::new(Surfaces::new()),
                reservations: Notify::new(),
                journal,
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

    /// Counts of what the registry holds.
    pub fn stats(&self) -> RegistryStats {
        let st = self.inner.state.lock();
        RegistryStats {
            records: st.records.len(),
            live: st.buckets.values().map(Bucket::live).sum(),
            pending_waiters: st.pending_waiters.count(),
            owners: st.buckets.keys().filter(|k| k.is_some()).count(),
            done_listeners: self.inner.done_listeners.len(),
            changed_listeners: self.inner.changed_listeners.len(),
        }
    }

    /// How many unsettled tasks there are of each kind (kinds with none left out).
    pub fn live_by_kind(&self) -> std::collections::BTreeMap<String, usize> {
        let st = self.inner.state.lock();
        let mut counts = std::collections::BTreeMap::new();
        for rec in st.records.values().filter(|r| !r.status.is_terminal()) {
            *counts.entry(rec.kind.clone()).or_insert(0) += 1;
        }
        counts
    }
}

impl Inner {
    pub(crate) fn changed(&self, owner: Option<&Agent>) {
        self.changed_listeners
            .fire("on_tasks_changed", |l| l(owner));
    }

    /// Tells the listeners of a settlement: at once, or with a journal once the settlement is
    /// durable.
    pub(crate) fn announce(&self, settled: Settled) {
        match self.journal.clone() {
            Some(journal) => {
                let snapshot = settled.snapshot.clone();
                journal.settled(&snapshot, Box::new(self.teller(settled)));
            }
            None => self.tell(settled),
        }
    }

    /// Tells the listeners of a settlement now (the journal holds it already, or there is none).
    pub(crate) fn tell(&self, settled: Settled) {
        self.teller(settled)();
    }

    fn teller(&self, settled: Settled) -> impl FnOnce() + Send + 'static {
        let (changed, done) = (self.changed_listeners.clone(), self.done_listeners.clone());
        move || {
            changed.fire("on_tasks_changed", |l| l(settled.owner.as_ref()));
            done.fire("on_task_done", |l| {
                l(&settled.snapshot, settled.owner.as_ref())
            });
        }
    }

    pub(crate) fn release_reservation(&self, key: OwnerKey) {
        {
            let mut st = self.state.lock();
            if let Some(b) = st.buckets.get_mut(&key) {
                b.release_reservation();
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
            let waited = st.release_waiters(id.as_str());
            let rec = st.records.get_mut(id)?;
            rec.status = outcome.status.into();
            rec.detail = outcome.detail;
            rec.output = outcome.output;
            rec.finished_at_ms = Some(now_ms().max(rec.started_at_ms));
            if waited {
                rec.reported = true;
            }
            let snapshot = rec.snapshot();
            rec.settled.send_replace(Some(snapshot.clone()));
            let owner = rec.owner.clone();
            if let Some(b) = st.buckets.get_mut(&owner_key(owner.as_ref())) {
                b.settle_one();
            }
            Settled { snapshot, owner }
        };
        drop(hooks);
        Some(settled)
    }
}
