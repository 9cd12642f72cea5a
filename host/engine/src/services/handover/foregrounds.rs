//! Foreground commands that outlive a crash of their host. A host that hands over records each
//! foreground command that may become a task, durably and before it starts
//! ([`taskhost_store::ForegroundRecord`]), and has its keeper hold the process for it
//! ([`crate::process::keeper::HeldAs::Foreground`], by the record's id) from its start; a
//! successor that takes it over after a crash makes it a background task of the calling
//! session's, with its output from the first byte, and tells that session's bridge which task its
//! interrupted call became ([`Services::continued_calls`]).
//! An upgrade does not need this: it promotes every foreground command before it goes.

use std::sync::Arc;

use serde_json::Value;
use taskhost_store::ForegroundRecord;

use super::continued::ContinuedCall;
use crate::process::Process;
use crate::process::keeper::{HandedTask, HeldAs};
use crate::services::declare::TaskDeclaration;
use crate::services::handles::Services;
use crate::services::process_tasks::process_hooks;

impl Services {
    /// Spawns foreground command `spec` of `session`; with `carry` (the task it would become), it
    /// is recorded first, then started held by the keeper for a successor (the hold travels with
    /// the start), so a crash at any moment after its start finds both the record and the hold.
    /// The process, and its record's id.
    ///
    /// # Errors
    /// The process could not start (its record is forgotten).
    pub(crate) fn spawn_carried(
        &self,
        spec: &crate::process::ProcessSpec,
        session: &str,
        carry: Option<&TaskDeclaration>,
        request_id: Option<&Value>,
    ) -> Result<(Arc<Process>, Option<u64>), String> {
        let id = carry.and_then(|d| self.record_foreground(session, d, request_id));
        let spec = crate::process::ProcessSpec {
            held_as: id.map(HeldAs::Foreground),
            ..spec.clone()
        };
        match self.processes.spawn(&spec, session) {
            Ok(process) => Ok((process, id)),
            Err(e) => {
                if let Some(id) = id {
                    self.foreground_settled(id);
                }
                Err(e.to_string())
            }
        }
    }

    /// Records, durably and before it starts, a foreground command of `session` that would become
    /// the task `promote` declares, so that a successor of this host can carry it past a crash;
    /// returns its id, which [`Services::hold_foreground`] and [`Services::foreground_settled`]
    /// take. Nothing without a state.
    fn record_foreground(
        &self,
        session: &str,
        promote: &TaskDeclaration,
        request_id: Option<&Value>,
    ) -> Option<u64> {
        self.state.as_ref()?.foreground_began(ForegroundRecord {
            id: 0,
            session: Some(session.to_owned()),
            kind: promote.kind.clone(),
            label: promote.label.clone(),
            request: request_id.map(Value::to_string),
        })
    }

    /// Forgets carried foreground command `id`: it ended, or became a task.
    pub(crate) fn foreground_settled(&self, id: u64) {
        if let Some(state) = &self.state {
            state.foreground_ended(id);
        }
    }

    /// Serves the foreground command `task` of record `id`, handed over by a crashed
    /// predecessor's keeper, as a new background task of its calling session's; returns its id.
    /// `None` (the process ended) when its record did not reach the state before the crash or it
    /// cannot be served.
    pub(crate) fn take_back_foreground(&self, task: HandedTask, id: u64) -> Option<String> {
        let pgid = task.pgid;
        let record = self.state.as_ref().and_then(|state| {
            state
                .taken_foregrounds()
                .iter()
                .find(|r| r.id == id)
                .cloned()
        });
        let taken = record.and_then(|record| self.serve_foreground(task, &record));
        if taken.is_none() {
            self.processes.end_handed(pgid);
        }
        taken
    }

    fn serve_foreground(&self, task: HandedTask, record: &ForegroundRecord) -> Option<String> {
        if let Some(session) = &record.session
            && !self.sessions.is_open(session)
        {
            self.sessions.open(session);
        }
        let decl = TaskDeclaration {
            kind: record.kind.clone(),
            label: record.label.clone(),
            output_limit_bytes: None,
            owner_session: record.session.clone(),
            after: Vec::new(),
        };
        let pgid = task.pgid;
        // Its kept files are the ones the keeper names.
        let process = self
            .processes
            .take_over(task, [None, None], [0, 0], &decl.session_key())
            .inspect_err(
                |e| tracing::warn!(error = %e, "a carried foreground command could not be served"),
            )
            .ok()?;
        let hooks = process.clone();
        // The command began before the crash: the task shows as started then.
        let begun = crate::process::started_at_ms(pgid).unwrap_or(u64::MAX);
        let id = match self.declare_begun(&decl, begun, move || Ok(process_hooks(hooks))) {
            Ok(id) => id,
            Err(e) => {
                tracing::warn!(error = %e, "a carried foreground command could not become a task");
                process.kill();
                return None;
            }
        };
        self.processes.kept_as_task(&decl.session_key(), &process);
        self.keep_for_successor(&process, &id);
        let request = record
            .request
            .as_deref()
            .and_then(|r| serde_json::from_str(r).ok());
        if let (Some(session), Some(request)) = (&record.session, request) {
            self.continued
                .0
                .lock()
                .entry(session.clone())
                .or_default()
                .push((request, id.clone()));
        }
        tracing::info!(task = %id, "a foreground command a crashed host left running is now a task");
        Some(id)
    }

    /// The calls of `session` that a crashed predecessor left running and this host made tasks
    /// (each call's JSON-RPC id and task id), taken: its bridge is told once.
    pub fn continued_calls(&self, session: &str) -> Vec<ContinuedCall> {
        self.continued.0.lock().remove(session).unwrap_or_default()
    }
}
