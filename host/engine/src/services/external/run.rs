//! External work as a background task, or run to its end in a call's foreground.

use std::sync::Arc;

use parking_lot::Mutex;
use taskhost_registry::{ProducerError, TaskOutcome};

use super::work::{External, ExternalWork};
use crate::services::{CallContext, Services, TaskDeclaration};

/// How external work run in the foreground ended.
#[derive(Debug)]
pub struct ExternalRun {
    /// The work's id.
    pub id: String,
    /// Everything it wrote to its output file, as a terminal shows it.
    pub output: String,
    /// Its end, as its poll said; `None` when the call was cancelled first (the work was then
    /// cancelled too).
    pub outcome: Option<TaskOutcome>,
}

impl Services {
    /// Starts the external work `external` describes as the task `decl` declares; returns the task's
    /// id and the work's own id. Must not be called on the runtime's threads (the start command runs
    /// to its end first).
    ///
    /// # Errors
    /// As [`Services::declare`], or the start command failed or printed no usable id.
    pub fn start_external(
        &self,
        decl: &TaskDeclaration,
        external: External,
    ) -> Result<(String, String), crate::services::DeclareError> {
        let session = decl.session_key();
        let (processes, runtime) = (self.processes.clone(), self.runtime.clone());
        let started = Arc::new(Mutex::new(None));
        let slot = started.clone();
        let task_id = self.declare(decl, move || {
            let work = ExternalWork::start(&processes, &runtime, &session, external)
                .map_err(ProducerError)?;
            *slot.lock() = Some(work.clone());
            Ok(work.hooks())
        })?;
        let work = started.lock().take();
        let Some(work) = work else {
            return Err(crate::services::DeclareError::NoWork(task_id));
        };
        self.keep_external(&task_id, &work, 0);
        Ok((task_id, work.id))
    }

    /// With durable state, records how task `task_id`'s work is followed and, after each read,
    /// where its reads stand: a host that comes after this one follows it on from there.
    pub(crate) fn keep_external(&self, task_id: &str, work: &ExternalWork, read_offset: u64) {
        let Some(state) = self.state.clone() else {
            return;
        };
        state.set_external(task_id, work.record(read_offset));
        let id = task_id.to_owned();
        work.mark_reads(move |offset| state.external_read(&id, offset));
    }

    /// Runs the external work `external` describes for `session` in the foreground of `call`, on
    /// the same loop a background task's work runs on, to its end. A cancelled call cancels the work.
    /// Must not be called on the runtime's threads.
    ///
    /// # Errors
    /// The session already runs its limit of foreground calls, or the start command failed.
    pub fn run_external(
        &self,
        session: &str,
        external: External,
        call: &CallContext,
    ) -> Result<ExternalRun, String> {
        let _slot = self
            .sessions
            .begin_foreground(session)
            .map_err(|e| e.to_string())?;
        let work = ExternalWork::start(&self.processes, &self.runtime, session, external)?;
        let outcome = self.runtime.block_on(async {
            tokio::select! {
                outcome = work.settled() => Some(outcome),
                () = call.cancel.cancelled() => None,
            }
        });
        if outcome.is_none() {
            work.cancel();
        }
        Ok(ExternalRun {
            output: work.read(),
            id: work.id,
            outcome,
        })
    }
}
