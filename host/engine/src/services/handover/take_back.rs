//! Running processes a gone predecessor's keeper handed to this host, served again as the same
//! tasks.

use parking_lot::Mutex;
use taskhost_registry::TaskId;

use crate::process::keeper::{Handed, HandedTask, HeldAs};
use crate::services::handles::Services;
use crate::services::process_tasks::holding;

impl Services {
    /// Takes back the tasks `handed` holds that opening the state made this host's
    /// ([`taskhost_store::Store::taken_over`]): each keeps its id, owner, process and kept output,
    /// and its owner's reads go on where they stood. An owner not connected here gets its session
    /// opened (its notices wait for it). A handed task without such a record (it settled
    /// meanwhile) is ended. Returns the ids taken back.
    pub fn take_back(&self, handed: Handed) -> Vec<String> {
        let Some(state) = self.state.clone() else {
            return Vec::new();
        };
        if !self.processes.hands_over() {
            // This host hands nothing over (a grace of 0): its keeper need hold nothing on.
            self.processes.cancel_handover();
        }
        // By id: a lookup per handed task, not a scan of every record.
        let records: Records<'_> = state
            .taken_over()
            .iter()
            .map(|r| (r.id.as_str(), r))
            .collect();
        let parts: Vec<Mutex<Vec<HandedTask>>> =
            split(handed.tasks).into_iter().map(Mutex::new).collect();
        let take = |part: &Mutex<Vec<HandedTask>>| {
            let tasks = std::mem::take(&mut *part.lock());
            self.take_back_part(&state, &records, tasks)
        };
        let Some((first, others)) = parts.split_first() else {
            return Vec::new();
        };
        // Each task's take-back waits on the kernel and the keeper as much as it computes: the
        // tasks are taken back on as many threads as there are cores.
        std::thread::scope(|scope| {
            let threads: Vec<_> = others
                .iter()
                .map(|part| {
                    let thread = std::thread::Builder::new()
                        .name("taskhost-take-back".into())
                        .spawn_scoped(scope, || take(part));
                    (part, thread)
                })
                .collect();
            let mut taken = take(first);
            for (part, thread) in threads {
                match thread {
                    Ok(thread) => taken.extend(
                        thread
                            .join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                    ),
                    Err(e) => {
                        tracing::warn!(error = %e, "no thread for part of the take-back");
                        taken.extend(take(part));
                    }
                }
            }
            taken
        })
    }

    /// Takes back `tasks` (see [`Services::take_back`]); the ids taken back.
    fn take_back_part(
        &self,
        state: &taskhost_store::Store,
        records: &Records<'_>,
        tasks: Vec<HandedTask>,
    ) -> Vec<String> {
        let mut taken = Vec::new();
        for task in tasks {
            let id = match &task.hold.held_as {
                HeldAs::Foreground(id) => {
                    let id = *id;
                    taken.extend(self.take_back_foreground(task, id));
                    continue;
                }
                HeldAs::Task(id) => id.clone(),
            };
            let record = records.get(id.as_str()).map(|r| (*r).clone());
            match (record, TaskId::new(id.as_str()).parts()) {
                (Some(record), Some((_, number))) => {
                    taken.extend(self.take_back_task(state, task, &record, number));
                }
                _ => self.processes.end_handed(task.pgid),
            }
        }
        taken
    }

    /// Serves `task`, handed over with its record `record`, again as task `number` of its owner's;
    /// its id. `None` (the process ended) when it cannot be served or registered.
    fn take_back_task(
        &self,
        state: &taskhost_store::Store,
        task: HandedTask,
        record: &taskhost_store::TaskRecord,
        number: u64,
    ) -> Option<String> {
        let decl = self.declaration_of(record);
        let output = state.output_dir();
        let files = [&record.stdout_path, &record.stderr_path]
            .map(|name| name.as_ref().map(|name| output.path().join(name)));
        let pgid = task.pgid;
        let process = match self
            .processes
            .take_over(task, files, record.read, &decl.session_key())
        {
            Ok(process) => process,
            Err(e) => {
                tracing::warn!(task = %record.id, error = %e, "a handed task could not be served");
                self.processes.end_handed(pgid);
                return None;
            }
        };
        if record.stdout_path.is_none() {
            state.set_output(&record.id, process.output_files());
        }
        self.keep_reads(&process, &record.id);
        let hooks = process.clone();
        let slot = self.queue.hold(&decl.session_key());
        match self.take_over(&decl, number, move || Ok(holding(hooks, Some(slot)))) {
            Ok(id) => {
                self.processes.hold_for_handover(&process, &id);
                Some(id)
            }
            Err(e) => {
                tracing::warn!(task = %record.id, error = %e, "a handed task could not be registered");
                process.kill();
                None
            }
        }
    }
}

/// The taken-over records by id.
type Records<'a> = std::collections::HashMap<&'a str, &'a taskhost_store::TaskRecord>;

/// `tasks` in as many parts as there are cores (at most four), and no more parts than blocks of 64
/// tasks begun: a few tasks are not worth a thread.
fn split(mut tasks: Vec<HandedTask>) -> Vec<Vec<HandedTask>> {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let parts = cores.min(4).min(tasks.len().div_ceil(64)).max(1);
    let size = tasks.len().div_ceil(parts);
    let mut split = Vec::with_capacity(parts);
    while tasks.len() > size {
        split.push(tasks.split_off(tasks.len() - size));
    }
    split.push(tasks);
    split
}
