//! A queued process task's hooks, the host's: until its turn they read nothing and a cancel takes
//! it out of line (it settles `killed` without running); once its slot came the process runs and
//! the hooks are its own.

use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;
use taskhost_registry::{
    CancellationToken, ProducerError, SERVICE_DISPOSED, TaskHooks, TaskId, TaskOutcome,
};
use tokio::sync::oneshot;

use super::after;
use super::slots::{Slot, Ticket};
use crate::process::{Process, ProcessSpec};
use crate::services::Services;

/// The detail of a queued task killed (or disposed with its owner) before it ran.
pub(super) const REMOVED: &str = "removed from the queue before it ran";

/// Where a queued task stands.
enum Stage {
    /// In line, or waiting for the tasks it runs after.
    Waiting,
    /// Killed before it ran.
    Cancelled,
    /// Its process runs.
    Running(Arc<Process>),
}

/// What a queued task's hooks share.
pub(super) struct Deferred {
    stage: Mutex<Stage>,
    cancelled: CancellationToken,
    /// Its id, once the registry recorded it.
    pub(super) id: OnceLock<TaskId>,
}

impl Deferred {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            stage: Mutex::new(Stage::Waiting),
            cancelled: CancellationToken::new(),
            id: OnceLock::new(),
        })
    }

    fn process(&self) -> Option<Arc<Process>> {
        match &*self.stage.lock() {
            Stage::Running(p) => Some(p.clone()),
            _ => None,
        }
    }

    /// Kills the process, or takes the task out of line; with `parked` the task stays recorded
    /// `queued` for the next host (this one stops).
    fn cancel(&self, services: &Services, reason: Option<&str>) {
        let mut stage = self.stage.lock();
        if let Stage::Running(p) = &*stage {
            p.kill();
            return;
        }
        if reason == Some(SERVICE_DISPOSED)
            && let (Some(state), Some(id)) = (&services.state, self.id.get())
        {
            state.park_queued(id.as_str());
        }
        *stage = Stage::Cancelled;
        self.cancelled.cancel();
    }
}

/// What the task runs once its turn comes.
pub(super) struct Pending {
    pub(super) services: Services,
    pub(super) spec: ProcessSpec,
    pub(super) session: String,
    pub(super) after: Vec<TaskId>,
    pub(super) deferred: Arc<Deferred>,
    /// Set when it is not to run: the detail it settles `failed` with.
    pub(super) doomed: Option<String>,
}

/// The hooks of a queued task; it waits for `placed` (its ticket, when it is in line already)
/// before anything else: its id is known by then.
pub(super) fn hooks(pending: Pending, placed: oneshot::Receiver<Option<Ticket>>) -> TaskHooks {
    let (killed, read, peeked) = (
        pending.deferred.clone(),
        pending.deferred.clone(),
        pending.deferred.clone(),
    );
    let services = pending.services.clone();
    let tty = pending.spec.tty.is_some().then(|| pending.deferred.clone());
    let done = async move {
        let ticket = placed
            .await
            .map_err(|_| ProducerError("never placed".into()))?;
        let id = pending.deferred.id.get().cloned();
        let Some(id) = id else {
            return Ok(TaskOutcome::killed().with_detail(REMOVED));
        };
        let outcome = run_in_turn(&pending, &id, ticket).await;
        if let Some(state) = &pending.services.state {
            state.unqueue(id.as_str());
        }
        Ok(outcome)
    };
    let cancel = move |reason: Option<&str>| {
        killed.cancel(&services, reason);
        Ok(())
    };
    let hooks = TaskHooks::new(done, cancel)
        .with_reader(move || read.process().map(|p| p.read()).unwrap_or_default())
        .with_peeker(move || peeked.process().map(|p| p.peek()).unwrap_or_default());
    let Some(input) = tty else { return hooks };
    hooks.with_writer(move |text: &[u8], eof: bool| match input.process() {
        Some(p) => p
            .write_input(text, eof)
            .map_err(|e| ProducerError(e.to_string())),
        None => Err(ProducerError(
            "the task is queued: it takes input once it runs".into(),
        )),
    })
}

/// Waits for the task's turn (out of line at once when it is killed), then runs it.
async fn run_in_turn(p: &Pending, id: &TaskId, ticket: Option<Ticket>) -> TaskOutcome {
    let cancelled = p.deferred.cancelled.clone();
    let slot = tokio::select! {
        () = cancelled.cancelled() => {
            p.services.queue.withdraw(id.as_str());
            return TaskOutcome::killed().with_detail(REMOVED);
        }
        slot = turn(p, id, ticket) => slot,
    };
    let slot = match slot {
        Ok(slot) => slot,
        Err(detail) => return TaskOutcome::failed(detail),
    };
    if !p.services.registry.begin_running(id.as_str()) {
        // The host stops: the task stays queued for the next one.
        if !p.services.registry.is_open()
            && let Some(state) = &p.services.state
        {
            state.park_queued(id.as_str());
        }
        return TaskOutcome::killed().with_detail(REMOVED);
    }
    run(p, id, slot).await
}

/// The task's slot, once the tasks it runs after ended and its turn came.
async fn turn(p: &Pending, id: &TaskId, ticket: Option<Ticket>) -> Result<Slot, String> {
    if let Some(detail) = &p.doomed {
        return Err(detail.clone());
    }
    let ticket = match ticket {
        Some(ticket) => ticket,
        None => {
            after::ended(&p.services.registry, &p.after).await?;
            p.services.queue.enqueue(&p.session, id)
        }
    };
    ticket
        .granted()
        .await
        .ok_or_else(|| "the host stopped before it ran".to_owned())
}

/// Starts the process, holding `slot` until it ended; a process that cannot start settles the task
/// `failed` saying why.
async fn run(p: &Pending, id: &TaskId, slot: Slot) -> TaskOutcome {
    let mut spec = p.spec.clone();
    spec.keep_output = p.services.state.is_some();
    spec.held_as = p
        .services
        .state
        .as_ref()
        .map(|_| crate::process::keeper::HeldAs::Task(id.as_str().to_owned()));
    let (processes, session) = (p.services.processes.clone(), p.session.clone());
    let cwd = spec.workdir.clone();
    let spawned = tokio::task::spawn_blocking(move || processes.spawn(&spec, &session)).await;
    let process = match spawned {
        Ok(Ok(process)) => process,
        Ok(Err(e)) => return TaskOutcome::failed(format!("could not start: {e}")),
        Err(e) => return TaskOutcome::failed(format!("could not start: {e}")),
    };
    {
        let mut stage = p.deferred.stage.lock();
        if matches!(*stage, Stage::Cancelled) {
            process.kill();
        }
        *stage = Stage::Running(process.clone());
    }
    p.services.facts.started(id.as_str(), &process, cwd);
    p.services.keep_for_successor(&process, id.as_str());
    if let Some(state) = &p.services.state {
        state.unqueue(id.as_str());
    }
    let exit = process.wait().await;
    drop(slot);
    process.outcome(&exit)
}
