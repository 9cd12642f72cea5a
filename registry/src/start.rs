//! Starting a task: every check before the starter runs, then the registration that cannot fail.

use parking_lot::Mutex;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use futures::FutureExt;
use tokio::sync::watch;

use crate::agent::Agent;
use crate::error::ProducerError;
use crate::error::{MAX_SAFE_INTEGER, RegistryError};
use crate::ids::TaskId;
use crate::journal::JournalStart;
use crate::producer::{TaskHooks, TaskStart};
use crate::state::{Bucket, LiveHooks, Ops, OwnerKey, Phase, Record, SharedOps, now_ms, owner_key};
use crate::status::TaskOutcome;
use taskhost_common::panic_text;

use crate::registry::{Cause, Registry};

/// What a started task is, as its record keeps it.
struct Identity {
    kind: String,
    label: String,
    output_limit_bytes: Option<u64>,
    owner: Option<Agent>,
    stream: bool,
    started_at_ms: u64,
    queued: bool,
}

impl Registry {
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
            taken_over,
            started_at_ms,
            queued,
        } = spec;
        let started_at_ms = started_at_ms.map_or_else(now_ms, |ms| ms.min(now_ms()));
        let key = owner_key(owner.as_ref());
        self.refuse_held(&kind, taken_over)?;
        self.preflight(&kind, &label, output_limit_bytes, owner.as_ref(), key)?;
        let number = match taken_over {
            Some(n) => Some(n),
            None => self.journal_begin(&kind, &label, owner.as_ref(), key, started_at_ms)?,
        };
        let failed = |e: RegistryError| {
            self.inner.release_reservation(key);
            if let (Some(journal), Some(n), None) = (&self.inner.journal, number, taken_over) {
                journal.abandon(&kind, n);
            }
            Err(e)
        };
        let known = number.map(|n| TaskId::issue(&kind, n));
        let hooks = match catch_unwind(AssertUnwindSafe(|| run(known.as_ref()))) {
            Ok(Ok(hooks)) => hooks,
            Ok(Err(e)) => return failed(e.into()),
            Err(panic) => {
                let text = format!("task starter panicked: {}", panic_text(&*panic));
                return failed(ProducerError(text).into());
            }
        };
        let identity = Identity {
            kind,
            label,
            output_limit_bytes,
            owner,
            stream: hooks.reader.is_some(),
            started_at_ms,
            queued,
        };
        Ok(self.admit(identity, hooks, key, number, taken_over.is_some()))
    }

    /// Makes a started task's hooks live, registers it (in the slot its preflight reserved, under
    /// the journal's number if any), tells the journal (unless the task was `taken_over`: its
    /// work began under the host that started it) and the watchers, and awaits its end. Runs
    /// after the starter returned: nothing here can fail.
    fn admit(
        &self,
        identity: Identity,
        hooks: TaskHooks,
        key: OwnerKey,
        number: Option<u64>,
        taken_over: bool,
    ) -> TaskId {
        let TaskHooks {
            done,
            cancel,
            reader,
            peeker,
            writer,
            watch,
        } = hooks;
        let ops: SharedOps = Arc::new(Mutex::new(Ops {
            hooks: Some(LiveHooks {
                cancel,
                reader,
                peeker,
                writer,
                watch,
            }),
            remainder: String::new(),
            watcher: None,
        }));
        let owner = identity.owner.clone();
        let queued = identity.queued;
        let id = self.register(identity, key, ops.clone(), number);
        if let Some(journal) = self.inner.journal.as_ref().filter(|_| !taken_over) {
            if queued {
                journal.queued(id.as_str());
            } else {
                journal.started(id.as_str());
            }
        }
        self.inner.reservations.notify_waiters();
        self.inner.changed(owner.as_ref());
        self.watch_completion(&id, done, &ops);
        id
    }

    /// Refuses to take over task `kind-n` when the registry holds it already.
    fn refuse_held(&self, kind: &str, taken_over: Option<u64>) -> Result<(), RegistryError> {
        match taken_over {
            Some(n)
                if self
                    .inner
                    .state
                    .lock()
                    .records
                    .contains_key(&TaskId::issue(kind, n)) =>
            {
                Err(RegistryError::Restore(format!(
                    "task {kind}-{n} is already held"
                )))
            }
            _ => Ok(()),
        }
    }

    /// Issues the id and records the task, in the slot its preflight reserved. Cannot fail.
    /// With a journal, records the task about to start and takes its number from it (durably,
    /// before the starter runs); `None` without one.
    fn journal_begin(
        &self,
        kind: &str,
        label: &str,
        owner: Option<&Agent>,
        key: OwnerKey,
        started_at_ms: u64,
    ) -> Result<Option<u64>, RegistryError> {
        let Some(journal) = &self.inner.journal else {
            return Ok(None);
        };
        let start = JournalStart {
            kind,
            label,
            owner_session: owner.map(|a| a.session().as_str()),
            started_at_ms,
        };
        journal.begin(&start).map(Some).map_err(|e| {
            self.inner.release_reservation(key);
            RegistryError::Journal(e)
        })
    }

    /// Makes the record of a started task, numbered `number` when the journal gave one.
    fn register(
        &self,
        identity: Identity,
        key: OwnerKey,
        ops: SharedOps,
        number: Option<u64>,
    ) -> TaskId {
        let Identity {
            kind,
            label,
            output_limit_bytes,
            owner,
            stream,
            started_at_ms,
            queued,
        } = identity;
        let mut st = self.inner.state.lock();
        let st = &mut *st;
        let counter = st.counters.entry(kind.clone()).or_insert(0);
        let n = number.unwrap_or(*counter + 1);
        *counter = n.max(*counter);
        let id = TaskId::issue(&kind, n);
        let seq = st.next_seq;
        st.next_seq += 1;
        st.index_for(owner.as_ref()).insert(seq, id.clone());
        let bucket = st.buckets.entry(key).or_insert_with(Bucket::new);
        bucket.commit_reservation();
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
                owner,
                stream,
                status: if queued {
                    crate::TaskStatus::Queued
                } else {
                    crate::TaskStatus::Running
                },
                detail: None,
                output: None,
                started_at_ms,
                finished_at_ms: None,
                reported: false,
                pending_waiters: Default::default(),
                settled,
                ops,
            },
        );
        id
    }

    /// Settles task `id` when its completion resolves (a failed or panicking completion settles it
    /// `failed`); the watcher can be aborted through the task's ops while its hooks live.
    fn watch_completion(&self, id: &TaskId, done: crate::producer::DoneFuture, ops: &SharedOps) {
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
        if !bucket.try_reserve(limit) {
            return Err(RegistryError::LimitReached(limit));
        }
        Ok(())
    }
}
