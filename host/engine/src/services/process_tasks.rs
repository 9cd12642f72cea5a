//! Background processes as registry tasks, with hooks the host owns (a process task never keeps a
//! plugin loaded).

use std::sync::Arc;

use taskhost_registry::{ProducerError, TaskHooks};

use super::declare::TaskDeclaration;
use super::handles::Services;
use super::queue::Slot;
use crate::process::keeper::HeldAs;
use crate::process::{Process, ProcessSpec};

/// The registry hooks of a process task. A process on a terminal also takes input.
pub(crate) fn process_hooks(process: Arc<Process>) -> TaskHooks {
    holding(process, None)
}

/// As [`process_hooks`], the task's queue slot held until the process ended.
pub(crate) fn holding(process: Arc<Process>, slot: Option<Slot>) -> TaskHooks {
    let (waited, killed, read, peeked, watched) = (
        process.clone(),
        process.clone(),
        process.clone(),
        process.clone(),
        process.clone(),
    );
    let done = async move {
        let exit = waited.wait().await;
        drop(slot);
        Ok(waited.outcome(&exit))
    };
    let cancel = move |_reason: Option<&str>| {
        killed.kill();
        Ok(())
    };
    let hooks = TaskHooks::new(done, cancel)
        .with_reader(move || read.read())
        .with_peeker(move || peeked.peek())
        .with_output_watch(move || Box::new(watched.output_watch()));
    if !process.takes_input() {
        return hooks;
    }
    hooks.with_writer(move |input: &[u8], eof: bool| {
        process
            .write_input(input, eof)
            .map_err(|e| ProducerError(e.to_string()))
    })
}

impl Services {
    /// Starts `spec` as the background task `decl` declares. A process that cannot start fails the
    /// start: no task is registered, no id issued. Past a limit on running tasks, or with tasks
    /// to run after (`decl.after`), the task is recorded `queued` instead and begins in its turn
    /// (see [`super::queue`]).
    ///
    /// # Errors
    /// As [`Services::declare`], or the process could not be spawned, or (queued) the start was
    /// refused before it was recorded ([`super::DeclareError::Refused`]).
    pub fn start_process(
        &self,
        decl: &TaskDeclaration,
        spec: ProcessSpec,
    ) -> Result<String, super::DeclareError> {
        if decl.after.is_empty()
            && let Some(slot) = self.queue.try_take(&decl.session_key())
        {
            return self.start_now(decl, spec, slot);
        }
        self.start_queued(decl, spec, None)
    }

    /// Starts `spec` at once, holding `slot` until it ended.
    fn start_now(
        &self,
        decl: &TaskDeclaration,
        mut spec: ProcessSpec,
        slot: Slot,
    ) -> Result<String, super::DeclareError> {
        let session = decl.session_key();
        let processes = self.processes.clone();
        let cwd = spec.workdir.clone();
        // With a durable state, a task's output is kept there, and its record names the files.
        spec.keep_output = self.state.is_some();
        let started = Arc::new(parking_lot::Mutex::new(None));
        let kept = started.clone();
        let id = self.declare_named(decl, move |id| {
            // Held for a successor from its start under its id, when the id is known by then.
            spec.held_as = id.map(|id| HeldAs::Task(id.as_str().to_owned()));
            let process = processes
                .spawn(&spec, &session)
                .map_err(|e| ProducerError(e.to_string()))?;
            *kept.lock() = Some(process.clone());
            Ok(holding(process, Some(slot)))
        })?;
        if let Some(process) = started.lock().take() {
            self.facts.started(&id, &process, cwd);
            self.keep_for_successor(&process, &id);
        }
        Ok(id)
    }

    /// With a durable state, records where task `id`'s kept output is, keeps its reads' positions
    /// and asks the keeper to hold it for a successor of this host (when it hands over).
    pub(crate) fn keep_for_successor(&self, process: &Arc<Process>, id: &str) {
        if let Some(state) = &self.state {
            state.set_output(id, process.output_files());
            self.keep_reads(process, id);
            self.processes.hold_for_handover(process, id);
        }
    }

    /// Records where the reads of task `id`'s output stand each time they move, so that a
    /// successor of this host that takes the task over repeats nothing (only a host that hands
    /// over has one: a read of another host's task costs no write).
    pub(crate) fn keep_reads(&self, process: &Process, id: &str) {
        if !self.processes.hands_over() {
            return;
        }
        if let Some(state) = self.state.clone() {
            let id = id.to_owned();
            process.on_reads(move |out, err| state.read_to(&id, out, err));
        }
    }

    /// Adopts a running process, started at `began_at_ms` (ms since the epoch), as the background
    /// task `decl` declares, which shows as started then: the registry's fence and admission checks
    /// run first, exactly as for a start; refused, the process is the caller's again.
    ///
    /// # Errors
    /// As [`Services::declare`].
    pub fn adopt_process(
        &self,
        decl: &TaskDeclaration,
        process: Arc<Process>,
        began_at_ms: u64,
    ) -> Result<String, super::DeclareError> {
        self.declare_begun(decl, began_at_ms, move || Ok(process_hooks(process)))
    }
}
