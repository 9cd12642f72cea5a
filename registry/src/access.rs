//! Reaching a task as its owner: get, list, read and kill, each authorized first.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::agent::Agent;
use crate::error::ProducerError;
use crate::error::RegistryError;
use crate::hook_scope::{self, call_reader};
use crate::ids::TaskId;
use crate::state::{LiveHooks, Record, SharedOps, State};
use crate::status::{TaskRead, TaskSnapshot};
use taskhost_common::panic_text;

use crate::registry::{KillOutcome, Registry};

impl Registry {
    /// The task and its ops lock, once the caller is authorized for it and is not inside the task's
    /// own hook (which holds that lock already).
    pub(crate) fn authorized_ops(
        &self,
        id: &str,
        caller: Option<&Agent>,
    ) -> Result<(TaskId, SharedOps), RegistryError> {
        let (task, ops) = {
            let st = self.inner.state.lock();
            let rec = authorize(&st, id, caller)?;
            (rec.id.clone(), rec.ops.clone())
        };
        hook_scope::refuse_own(id)?;
        Ok((task, ops))
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

    /// Task `id` as [`Registry::get`] sees it; a settled task is marked reported (its owner was
    /// shown its end another way, as MCP's `tasks/get` shows it), its output left unread, so no
    /// completion notice follows for it.
    ///
    /// # Errors
    /// As [`Registry::get`].
    pub fn get_acknowledged(
        &self,
        id: &str,
        caller: Option<&Agent>,
    ) -> Result<TaskSnapshot, RegistryError> {
        let mut st = self.inner.state.lock();
        authorize(&st, id, caller)?;
        let rec = st
            .records
            .get_mut(id)
            .ok_or_else(|| RegistryError::UnknownTask(id.to_owned()))?;
        rec.acknowledge();
        Ok(rec.snapshot())
    }

    /// The caller's tasks and the unowned ones, live and terminal, in registration order (every
    /// owner's for an [`Agent::overseer`]). Costs what the caller can see, not the registry's size.
    pub fn list(&self, caller: Option<&Agent>) -> Vec<TaskSnapshot> {
        let st = self.inner.state.lock();
        if caller.is_some_and(Agent::oversees) {
            let mut all: Vec<(&u64, &crate::TaskId)> = st
                .by_session
                .values()
                .flat_map(|m| m.iter())
                .chain(st.unowned.iter())
                .collect();
            all.sort_unstable_by_key(|(seq, _)| **seq);
            return all
                .into_iter()
                .filter_map(|(_, id)| st.records.get(id).map(crate::state::Record::snapshot))
                .collect();
        }
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

    /// Of `ids`, those the registry holds no task of (live or settled, any owner's), in their
    /// order: one look under the lock for all of them.
    pub fn not_held<'a>(&self, ids: impl IntoIterator<Item = &'a str>) -> Vec<&'a str> {
        let st = self.inner.state.lock();
        ids.into_iter()
            .filter(|id| !st.records.contains_key(*id))
            .collect()
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
        let (task, ops) = self.authorized_ops(id, caller)?;
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
        let (task, ops) = self.authorized_ops(id, caller)?;
        let mut ops = ops.lock();
        {
            let mut st = self.inner.state.lock();
            let rec = st
                .records
                .get_mut(id)
                .ok_or_else(|| RegistryError::UnknownTask(id.to_owned()))?;
            if rec.acknowledge() {
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
            let moved = matches!(
                rec.status,
                crate::TaskStatus::Running | crate::TaskStatus::Queued
            );
            if moved {
                rec.status = crate::TaskStatus::Stopping;
            }
            (rec.snapshot(), rec.owner.clone(), moved)
        };
        drop(ops);
        if moved {
            if let Some(journal) = &self.inner.journal {
                journal.stopping(id);
            }
            self.inner.changed(owner.as_ref());
        }
        Ok(KillOutcome::Requested(snapshot))
    }

    // ----- wait ---------------------------------------------------------------------------------
}

pub(crate) fn authorize<'s>(
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
        Some(owner) if caller.is_some_and(|c| c.oversees() || c.session() == owner.session()) => {
            Ok(rec)
        }
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
