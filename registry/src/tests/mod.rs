//! Behavior tests of the registry, one per behavior, named after it. Most are ported from the original
//! implementation's suite (catalog sections 2.1-2.3); the rest cover the bounded teardown and races.

mod concurrency;
mod input;
mod journal;
mod listeners;
mod output_wait;
mod owners;
mod queued;
mod read_kill;
mod restore;
mod start;
mod wait;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

use crate::{
    Agent, ProducerError, Registration, Registry, RegistryConfig, SurfaceScope, TaskHooks,
    TaskOutcome, TaskStart,
};

/// A registry with one global surface attached (kept alive by the returned registration).
pub(crate) fn registry() -> (Registry, Registration) {
    registry_with(RegistryConfig::new())
}

pub(crate) fn registry_with(config: RegistryConfig) -> (Registry, Registration) {
    let reg = Registry::new(config, tokio::runtime::Handle::current());
    let surface = reg.attach_surface("test", SurfaceScope::Global);
    (reg, surface)
}

pub(crate) fn agent(reg: &Registry, id: &str, session: &str) -> Agent {
    let a = Agent::new(id, session);
    reg.register_agent(&a);
    a
}

/// How a probe answers a cancel.
#[derive(Clone)]
pub(crate) enum OnCancel {
    /// Settles with this outcome.
    Settle(TaskOutcome),
    /// Returns Ok and never settles.
    Hang,
    /// Returns this error.
    Fail(String),
    /// Panics.
    Panic,
}

#[derive(Default)]
pub(crate) struct ProbeState {
    pub(crate) output: String,
    pub(crate) cancels: Vec<Option<String>>,
    pub(crate) runs: usize,
    settle: Option<oneshot::Sender<Result<TaskOutcome, ProducerError>>>,
}

/// A producer the test drives by hand.
#[derive(Clone)]
pub(crate) struct Probe {
    pub(crate) state: Arc<Mutex<ProbeState>>,
    on_cancel: Arc<Mutex<OnCancel>>,
}

impl Probe {
    pub(crate) fn new() -> Self {
        Self {
            state: Arc::default(),
            on_cancel: Arc::new(Mutex::new(OnCancel::Settle(TaskOutcome::killed()))),
        }
    }

    pub(crate) fn on_cancel(&self, c: OnCancel) -> &Self {
        *self.on_cancel.lock().unwrap() = c;
        self
    }

    fn hooks(&self) -> (TaskHooks, Arc<Mutex<ProbeState>>) {
        let (tx, rx) = oneshot::channel();
        let state = self.state.clone();
        {
            let mut s = state.lock().unwrap();
            s.runs += 1;
            s.settle = Some(tx);
        }
        let done = async move {
            match rx.await {
                Ok(r) => r,
                Err(_) => std::future::pending().await,
            }
        };
        let cancel_state = state.clone();
        let on_cancel = self.on_cancel.clone();
        let cancel = move |reason: Option<&str>| {
            let mode = on_cancel.lock().unwrap().clone();
            let mut s = cancel_state.lock().unwrap();
            match mode {
                OnCancel::Fail(e) => return Err(ProducerError(e)),
                OnCancel::Panic => {
                    drop(s);
                    panic!("probe cancel panicked")
                }
                OnCancel::Hang => {}
                OnCancel::Settle(o) => {
                    if let Some(tx) = s.settle.take() {
                        let _ = tx.send(Ok(o));
                    }
                }
            }
            s.cancels.push(reason.map(str::to_owned));
            Ok(())
        };
        (TaskHooks::new(done, cancel), state)
    }

    /// A final-output task declaration.
    pub(crate) fn final_task(&self, kind: &str, label: &str) -> TaskStart {
        let p = self.clone();
        TaskStart::new(kind, label, move || Ok(p.hooks().0))
    }

    /// A stream task declaration: reads drain what [`Probe::push`] added.
    pub(crate) fn stream_task(&self, kind: &str, label: &str) -> TaskStart {
        let p = self.clone();
        TaskStart::new(kind, label, move || {
            let (hooks, state) = p.hooks();
            Ok(hooks.with_reader(move || std::mem::take(&mut state.lock().unwrap().output)))
        })
    }

    pub(crate) fn push(&self, text: &str) {
        self.state.lock().unwrap().output.push_str(text);
    }

    pub(crate) fn settle(&self, outcome: TaskOutcome) {
        if let Some(tx) = self.state.lock().unwrap().settle.take() {
            let _ = tx.send(Ok(outcome));
        }
    }

    pub(crate) fn fail_done(&self, error: &str) {
        if let Some(tx) = self.state.lock().unwrap().settle.take() {
            let _ = tx.send(Err(ProducerError(error.to_owned())));
        }
    }

    pub(crate) fn runs(&self) -> usize {
        self.state.lock().unwrap().runs
    }

    pub(crate) fn cancels(&self) -> Vec<Option<String>> {
        self.state.lock().unwrap().cancels.clone()
    }
}

/// Lets spawned completions run (settlement happens on the runtime, not inline).
pub(crate) async fn settle_pass() {
    for _ in 0..5 {
        tokio::task::yield_now().await;
    }
    tokio::time::sleep(Duration::from_millis(5)).await;
}

/// Records every event a listener sees, as text.
#[derive(Clone, Default)]
pub(crate) struct EventLog(pub(crate) Arc<Mutex<Vec<String>>>);

impl EventLog {
    pub(crate) fn push(&self, e: String) {
        self.0.lock().unwrap().push(e);
    }
    pub(crate) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// Watches both listener kinds: `changed:<session|none>` and `done:<id>:<status>:<reported>`.
pub(crate) fn watch_events(reg: &Registry) -> (EventLog, Registration, Registration) {
    let log = EventLog::default();
    let l1 = log.clone();
    let changed = reg.on_tasks_changed(Arc::new(move |owner: Option<&Agent>| {
        l1.push(format!(
            "changed:{}",
            owner.map_or("none".to_owned(), |a| a.session().to_string())
        ))
    }));
    let l2 = log.clone();
    let done = reg.on_task_done(Arc::new(
        move |s: &crate::TaskSnapshot, _: Option<&Agent>| {
            l2.push(format!("done:{}:{}:{}", s.id, s.status, s.reported))
        },
    ));
    (log, changed, done)
}
