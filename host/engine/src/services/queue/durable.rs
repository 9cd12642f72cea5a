//! A queued task's spec as the state keeps it (`queue` in `tasks.db`), and the next host's
//! queueing again of what a host that is gone left queued, in its order.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use taskhost_registry::{TaskId, TaskStatus};

use crate::process::{ProcessSpec, TtySize};
use crate::services::Services;

/// What a queued process task runs and waits for, as JSON in its row.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct QueuedSpec {
    command: String,
    argv: Option<Vec<String>>,
    workdir: Option<PathBuf>,
    extra_env: Vec<(String, String)>,
    grace_ms: u64,
    tail_bytes: usize,
    spill_cap: u64,
    tty: Option<TtySize>,
    after: Vec<String>,
}

impl QueuedSpec {
    pub(crate) fn new(spec: &ProcessSpec, after: &[TaskId]) -> Self {
        Self {
            command: spec.command.clone(),
            argv: spec.argv.clone(),
            workdir: spec.workdir.clone(),
            extra_env: spec.extra_env.clone(),
            grace_ms: u64::try_from(spec.grace.as_millis()).unwrap_or(u64::MAX),
            tail_bytes: spec.tail_bytes,
            spill_cap: spec.spill_cap,
            tty: spec.tty,
            after: after.iter().map(|a| a.as_str().to_owned()).collect(),
        }
    }

    pub(crate) fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    fn process_spec(&self) -> ProcessSpec {
        let mut spec = ProcessSpec::new(self.command.as_str());
        spec.argv = self.argv.clone();
        spec.workdir = self.workdir.clone();
        spec.extra_env = self.extra_env.clone();
        spec.grace = Duration::from_millis(self.grace_ms);
        spec.tail_bytes = self.tail_bytes;
        spec.spill_cap = self.spill_cap;
        spec.tty = self.tty;
        spec
    }
}

impl Services {
    /// Queues again the tasks `requeued` (what opening the state found queued by hosts that are
    /// gone), in their order: each keeps its id and owner (an owner not connected here gets its
    /// session opened), and waits for its turn as before. A task it runs after that this host does
    /// not hold is looked up in the records. Returns the ids queued; one that cannot be (a
    /// malformed row, no tasks plugin attached) is logged and left to the next host.
    pub fn requeue(&self, requeued: &[taskhost_store::Requeued]) -> Vec<String> {
        let mut taken = Vec::new();
        for r in requeued {
            let record = &r.record;
            let (Some((_, number)), Ok(spec)) = (
                TaskId::new(record.id.as_str()).parts(),
                serde_json::from_str::<QueuedSpec>(&r.spec),
            ) else {
                tracing::warn!(task = %record.id, "a queued task's row is malformed; it is left queued");
                continue;
            };
            let decl = self.declaration_of(record);
            let caller = decl
                .owner_session
                .as_ref()
                .and_then(|s| self.sessions.agent(s));
            let (after, doomed) = self.after_on_record(&spec.after, caller.as_ref());
            let queued =
                self.queue_checked(&decl, spec.process_spec(), after, Some(number), doomed);
            match queued {
                Ok(id) => taken.push(id),
                Err(e) => tracing::warn!(
                    task = %record.id,
                    error = %e,
                    "a queued task of a host that stopped could not be queued again"
                ),
            }
        }
        taken
    }

    /// The tasks of `after` still to wait for (those the registry holds), and the detail the
    /// task settles with, without running, when the records say one did not complete with exit 0
    /// (or hold it no more); one they hold as completed with exit 0 is done with.
    fn after_on_record(
        &self,
        after: &[String],
        caller: Option<&taskhost_registry::Agent>,
    ) -> (Vec<TaskId>, Option<String>) {
        let mut due = Vec::new();
        for id in after {
            if let Ok(snapshot) = self.registry.get(id, caller) {
                due.push(snapshot.id);
                continue;
            }
            let record = self.state.as_ref().and_then(|s| s.task(id).ok().flatten());
            let how = match record {
                None => "it is gone".to_owned(),
                Some(r) => {
                    let exit_zero = matches!(r.detail.as_deref(), None | Some("exit code: 0"));
                    if TaskStatus::parse(&r.status) == Some(TaskStatus::Completed) && exit_zero {
                        continue;
                    }
                    match r.detail {
                        Some(d) => format!("{}, {d}", r.status),
                        None => r.status,
                    }
                }
            };
            return (due, Some(taskhost_common::wording::not_run_after(id, &how)));
        }
        (due, None)
    }
}
