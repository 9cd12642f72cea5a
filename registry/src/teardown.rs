//! Owner disposal and service disposal: cancel live work, await it (boundedly), drop the records.

use std::collections::BTreeMap;

use crate::access::call_cancel;
use crate::agent::Agent;
use crate::ids::TaskId;
use crate::registry::{Cause, Inner, Registry};
use crate::state::{Phase, State, owner_key};
use crate::status::{TaskOutcome, TaskStatus};

/// Cancel reason given to producers when their owner is disposed.
pub const OWNER_DISPOSED: &str = "owner disposed";
/// Cancel reason given to producers when the registry is disposed.
pub const SERVICE_DISPOSED: &str = "tasks service disposed";

impl Registry {
    /// Disposes an owner: unregisters it (if it is still the live instance), cancels its live tasks
    /// with reason `owner disposed`, awaits them to quiescence, then drops all its records (terminal
    /// ones too) and announces the emptied set once (only if it had tasks). Other instances under the
    /// same id, replacements included, are untouched.
    ///
    /// Teardown marks the tasks reported before cancelling (no reader is left). A cancel that fails
    /// force-fails the record (`cancel threw during teardown; work may be orphaned: <error>`); a
    /// producer that does not settle within the teardown grace is force-failed
    /// (`did not stop within <N> ms of cancel; work may be orphaned`). So this always finishes, within
    /// about one grace.
    ///
    /// # Cancel safety
    /// Dropping the future part way leaves the owner closed to new starts and its remaining tasks as
    /// they are; calling it again finishes the job.
    pub async fn dispose_agent(&self, agent: &Agent) {
        let key = owner_key(Some(agent));
        {
            let mut st = self.inner.state.lock();
            if st
                .agents
                .get(agent.id())
                .is_some_and(|a| a.same_instance(agent))
            {
                st.agents.remove(agent.id());
            }
            match st.buckets.get_mut(&key) {
                Some(bucket) => bucket.closed = true,
                None => return,
            }
        }
        self.inner
            .await_reservations(|st| st.buckets.get(&key).map_or(0, |b| b.reserved()))
            .await;
        let live = {
            let mut st = self.inner.state.lock();
            let tasks = st
                .buckets
                .get(&key)
                .map(|b| b.tasks.clone())
                .unwrap_or_default();
            mark_live_reported(&mut st, &tasks)
        };
        self.inner.teardown(&live, OWNER_DISPOSED).await;
        let had_tasks = {
            let mut st = self.inner.state.lock();
            let tasks = st.buckets.remove(&key).map(|b| b.tasks).unwrap_or_default();
            for id in &tasks {
                st.remove_record(id);
            }
            !tasks.is_empty()
        };
        if had_tasks {
            self.inner.changed(Some(agent));
        }
    }

    /// Disposes the registry: closes completion listeners first (none fires from here on), refuses new
    /// starts, cancels every live task with reason `tasks service disposed`, awaits them (boundedly, as
    /// in [`Registry::dispose_agent`]), clears every record, announces the emptied set once per owner
    /// (`None` for unowned tasks), then closes change listeners. A second call returns at once.
    ///
    /// # Cancel safety
    /// Dropping the future part way leaves the registry refusing starts with its remaining tasks as
    /// they are.
    pub async fn dispose(&self) {
        {
            let mut st = self.inner.state.lock();
            if st.phase != Phase::Open {
                return;
            }
            st.phase = Phase::Disposing;
        }
        self.inner.done_listeners.close();
        self.inner
            .await_reservations(|st| st.buckets.values().map(|b| b.reserved()).sum())
            .await;
        let live = {
            let mut st = self.inner.state.lock();
            let all: Vec<TaskId> = st.records.keys().cloned().collect();
            mark_live_reported(&mut st, &all)
        };
        self.inner
            .teardown(&live, crate::teardown::SERVICE_DISPOSED)
            .await;
        let owners = {
            let mut st = self.inner.state.lock();
            let mut owners: BTreeMap<Option<u64>, Option<Agent>> = BTreeMap::new();
            for rec in st.records.values() {
                owners
                    .entry(owner_key(rec.owner.as_ref()))
                    .or_insert_with(|| rec.owner.clone());
            }
            let phase = Phase::Disposed;
            *st = State::new();
            st.phase = phase;
            owners
        };
        for owner in owners.values() {
            self.inner.changed(owner.as_ref());
        }
        self.inner.changed_listeners.close();
    }
}

/// Marks the live tasks among `ids` reported and returns them.
fn mark_live_reported(st: &mut State, ids: &[TaskId]) -> Vec<TaskId> {
    ids.iter()
        .filter(|id| match st.records.get_mut(*id) {
            Some(rec) if rec.status.is_live() => {
                rec.reported = true;
                true
            }
            _ => false,
        })
        .cloned()
        .collect()
}

impl Inner {
    /// Waits until `reserved` reads zero: no start is between its preflight and its commit.
    async fn await_reservations(&self, reserved: impl Fn(&State) -> u64) {
        loop {
            let notified = self.reservations.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if reserved(&self.state.lock()) == 0 {
                return;
            }
            notified.await;
        }
    }

    /// Cancels each task with `reason` and awaits all of them, force-failing any that do not settle
    /// within the grace.
    async fn teardown(&self, ids: &[TaskId], reason: &str) {
        let mut pending = Vec::with_capacity(ids.len());
        for id in ids {
            let Some(ops) = self.ops_of(id) else { continue };
            let mut ops = ops.lock();
            let settled_rx = {
                let st = self.state.lock();
                match st.records.get(id) {
                    Some(rec) if rec.status.is_live() => rec.settled.subscribe(),
                    _ => continue,
                }
            };
            let cancelled = match ops.hooks.as_mut() {
                Some(hooks) => call_cancel(id, hooks, Some(reason)),
                None => Ok(()),
            };
            match cancelled {
                Ok(()) => {
                    let owner = {
                        let mut st = self.state.lock();
                        st.records.get_mut(id).and_then(|rec| {
                            (rec.status == TaskStatus::Running).then(|| {
                                rec.status = TaskStatus::Stopping;
                                rec.owner.clone()
                            })
                        })
                    };
                    drop(ops);
                    if let Some(owner) = owner {
                        if let Some(journal) = &self.journal {
                            journal.stopping(id.as_str());
                        }
                        self.changed(owner.as_ref());
                    }
                    pending.push((id.clone(), settled_rx));
                }
                Err(e) => {
                    tracing::warn!(task = %id, error = %e, "cancel threw during teardown; work may be orphaned");
                    let detail = format!("cancel threw during teardown; work may be orphaned: {e}");
                    let settled = self.settle_locked(
                        &mut ops,
                        id,
                        TaskOutcome::failed(detail),
                        Cause::Forced,
                    );
                    drop(ops);
                    if let Some(s) = settled {
                        self.announce(s);
                    }
                }
            }
        }
        let grace = self.config.teardown_grace();
        let waits = pending.into_iter().map(|(id, mut rx)| async move {
            if tokio::time::timeout(grace, rx.wait_for(Option::is_some)).await.is_err() {
                let ms = grace.as_millis();
                tracing::warn!(task = %id, grace_ms = ms as u64, "task did not stop after cancel; work may be orphaned");
                let detail = format!("did not stop within {ms} ms of cancel; work may be orphaned");
                self.settle(&id, TaskOutcome::failed(detail), Cause::Forced);
            }
        });
        futures::future::join_all(waits).await;
    }
}
