//! A process task that must wait (a limit is reached, or it runs after other tasks): checked as far
//! as it can be, recorded `queued`, its spec kept with it, and put in line.

use taskhost_common::wording;
use taskhost_registry::TaskId;
use tokio::sync::oneshot;

use super::deferred::{self, Deferred, Pending};
use super::{QueuedSpec, after};
use crate::process::{OwnerBounds, ProcessSpec};
use crate::services::{DeclareError, Services, TaskDeclaration};

impl Services {
    /// Records the process task `decl` declares `queued` and puts it in line; `taken_over`: a
    /// queued task of a host that is gone, which keeps its number. Returns its id.
    ///
    /// # Errors
    /// As [`Services::declare`], or the start is refused before it is recorded: a task of `after`
    /// that is unknown, another owner's or itself; a working directory that is not one; a policy
    /// the owner's processes cannot run under.
    pub(crate) fn start_queued(
        &self,
        decl: &TaskDeclaration,
        spec: ProcessSpec,
        taken_over: Option<u64>,
    ) -> Result<String, DeclareError> {
        let caller = decl
            .owner_session
            .as_ref()
            .and_then(|s| self.sessions.agent(s));
        let after = after::checked(&self.registry, &decl.after, caller.as_ref())?;
        self.queue_checked(decl, spec, after, taken_over, None)
    }

    /// As [`Services::start_queued`], its `after` checked already; with `doomed` the task settles
    /// `failed` with that detail instead of running.
    pub(super) fn queue_checked(
        &self,
        decl: &TaskDeclaration,
        spec: ProcessSpec,
        after: Vec<TaskId>,
        taken_over: Option<u64>,
        doomed: Option<String>,
    ) -> Result<String, DeclareError> {
        let session = decl.session_key();
        if taken_over.is_none() {
            self.refuse_unstartable(&spec, &session)?;
        }
        let deferred = Deferred::new();
        let (place, placed) = oneshot::channel();
        let row = QueuedSpec::new(&spec, &after).to_json();
        let pending = Pending {
            services: self.clone(),
            spec,
            session: session.clone(),
            after: after.clone(),
            deferred: deferred.clone(),
            doomed: doomed.clone(),
        };
        let state = self.state.clone();
        let id = self.register_queued(decl, taken_over, None, true, move |id| {
            if let (Some(state), Some(id), None) = (&state, id, taken_over) {
                state.queue_task(id.as_str(), row);
            }
            Ok(deferred::hooks(pending, placed))
        })?;
        let task = TaskId::new(id.as_str());
        let _ = deferred.id.set(task.clone());
        let ticket =
            (after.is_empty() && doomed.is_none()).then(|| self.queue.enqueue(&session, &task));
        if ticket.is_none() && !after.is_empty() {
            let ids: Vec<String> = after.iter().map(|a| a.as_str().to_owned()).collect();
            self.registry
                .set_queued_notes([(task, wording::waiting_note(&ids))]);
        }
        drop(place.send(ticket));
        Ok(id)
    }

    /// Refuses, before anything is recorded, a start that could not begin however long it waited:
    /// its working directory is not one, or its owner's policy cannot be met.
    fn refuse_unstartable(&self, spec: &ProcessSpec, session: &str) -> Result<(), DeclareError> {
        crate::process::check_workdir(spec).map_err(|e| DeclareError::Refused(e.to_string()))?;
        if let Some(policies) = &self.policies {
            policies.bounds_of(session).map_err(DeclareError::Refused)?;
        }
        Ok(())
    }
}
