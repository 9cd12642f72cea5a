//! Foreground commands that outlive a crash of their host. A host that hands over records each
//! foreground command that may become a task ([`taskhost_store::ForegroundRecord`]) and has its
//! keeper hold the process as `foreground:N`; a successor that takes it over after a crash makes
//! it a background task of the calling session's, with its output from the first byte, and tells
//! that session's bridge which task its interrupted call became ([`Services::continued_calls`]).
//! An upgrade does not need this: it promotes every foreground command before it goes.

use std::sync::Arc;

use serde_json::Value;
use taskhost_store::{FOREGROUND_PREFIX, ForegroundRecord};

use super::continued::ContinuedCall;
use super::declare::TaskDeclaration;
use super::handles::Services;
use super::process_tasks::process_hooks;
use crate::process::keeper::HandedTask;
use crate::process::{Process, ProcessService};

impl Services {
    /// Records foreground command `process` of `session`, which would become the task `promote`
    /// declares, so that a successor of this host can carry it past a crash; returns the number to
    /// forget it by ([`Services::foreground_settled`]). Nothing without a handover.
    pub(crate) fn carry_foreground(
        &self,
        process: &Arc<Process>,
        session: &str,
        promote: &TaskDeclaration,
        request_id: Option<&Value>,
    ) -> Option<u64> {
        let state = self.state.as_ref()?;
        let number = ProcessService::handover_number(process)?;
        let [stdout_path, stderr_path] = process
            .output_files()
            .map(|f| f.map(|p| p.display().to_string()));
        state.foreground_began(ForegroundRecord {
            number,
            session: Some(session.to_owned()),
            kind: promote.kind.clone(),
            label: promote.label.clone(),
            request: request_id.map(Value::to_string),
            stdout_path,
            stderr_path,
        });
        self.processes
            .hold_for_handover(process, &format!("{FOREGROUND_PREFIX}{number}"));
        Some(number)
    }

    /// Forgets carried foreground command `number`: it ended, or became a task.
    pub(crate) fn foreground_settled(&self, number: u64) {
        if let Some(state) = &self.state {
            state.foreground_ended(number);
        }
    }

    /// Serves the foreground command `task`, handed over by a crashed predecessor's keeper, as a
    /// new background task of its calling session's; returns its id. `None` (the process ended)
    /// when its record did not reach the state before the crash or it cannot be served.
    pub(super) fn take_back_foreground(&self, task: HandedTask) -> Option<String> {
        let pgid = task.pgid;
        let record = self.state.as_ref().and_then(|state| {
            let number: u64 = task
                .hold
                .task
                .strip_prefix(FOREGROUND_PREFIX)?
                .parse()
                .ok()?;
            state
                .taken_foregrounds()
                .iter()
                .find(|r| r.number == number)
                .cloned()
        });
        let taken = record.and_then(|record| self.serve_foreground(task, &record));
        if taken.is_none() {
            crate::process::end_group(pgid);
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
        };
        let files = [&record.stdout_path, &record.stderr_path]
            .map(|p| p.as_ref().map(std::path::PathBuf::from));
        let process = self
            .processes
            .take_over(task, files, [0, 0], &decl.session_key())
            .inspect_err(
                |e| tracing::warn!(error = %e, "a carried foreground command could not be served"),
            )
            .ok()?;
        let hooks = process.clone();
        let id = match self.declare(&decl, move || Ok(process_hooks(hooks))) {
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
