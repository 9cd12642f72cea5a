//! The bridge between a plugin's task hooks and the registry's: each call goes to the plugin on its
//! generation's threads, and the generation stays loaded while the task lives.

use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use taskhost_abi::abi_stable::std_types::{RResult, RStr, RString};
use taskhost_abi::{Completion, FfiOutcome, HooksBox};
use taskhost_registry::{ProducerError, TaskHooks};

use super::convert;
use super::generation::{GenBox, Generation};

/// Settles one task: hands the plugin's outcome, copied into host memory, to the registry.
pub(crate) struct HostCompletion(
    pub(crate) Mutex<Option<tokio::sync::oneshot::Sender<taskhost_registry::TaskOutcome>>>,
);

impl Completion for HostCompletion {
    fn complete(&self, outcome: FfiOutcome) {
        let tx = self.0.lock().take();
        if let Some(tx) = tx {
            let _ = tx.send(convert::outcome(&outcome));
        }
    }
}

/// Counts a generation's live task; the count drops when the registry drops the task's hooks.
struct LiveTask(Arc<Generation>);

impl LiveTask {
    fn new(generation: Arc<Generation>) -> Self {
        generation.live_tasks.fetch_add(1, Ordering::Relaxed);
        Self(generation)
    }
}

impl Drop for LiveTask {
    fn drop(&mut self) {
        self.0.live_tasks.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A plugin's hooks of one task, called on its generation's threads.
#[derive(Clone)]
struct OnPlugin {
    generation: Arc<Generation>,
    hooks: Arc<Mutex<GenBox<HooksBox>>>,
}

impl OnPlugin {
    /// Runs `f` on the hooks on a generation thread; `None` once the generation is unloading.
    fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut HooksBox) -> R + Send + 'static,
    ) -> Option<R> {
        let hooks = self.hooks.clone();
        self.generation
            .executor
            .call(move || f(hooks.lock().get_mut()))
    }

    /// [`OnPlugin::call`] of a hook that can fail, its error (or the unloading) as the producer's.
    fn fallible(
        &self,
        f: impl FnOnce(&mut HooksBox) -> RResult<(), RString> + Send + 'static,
    ) -> Result<(), ProducerError> {
        self.call(move |h| f(h).into_result().map_err(|e| e.as_str().to_owned()))
            .unwrap_or_else(|| Err("the task's plugin generation is unloading".to_owned()))
            .map_err(ProducerError)
    }
}

/// Wraps a plugin's task hooks as registry hooks that call into the plugin on its own threads.
pub(crate) fn registry_hooks(
    generation: Arc<Generation>,
    hooks: HooksBox,
    rx: tokio::sync::oneshot::Receiver<taskhost_registry::TaskOutcome>,
) -> TaskHooks {
    let stream = hooks.is_stream();
    let takes_input = hooks.takes_input();
    let on_plugin = OnPlugin {
        hooks: Arc::new(Mutex::new(GenBox::new(hooks, generation.clone()))),
        generation: generation.clone(),
    };
    let live = LiveTask::new(generation);
    let done = async move {
        let outcome = rx.await.map_err(|_| {
            ProducerError::from("producer dropped the task's completion without settling it")
        });
        drop(live);
        outcome
    };
    let cancelling = on_plugin.clone();
    let cancel = move |reason: Option<&str>| {
        let reason = reason.map(str::to_owned);
        cancelling.fallible(move |h| h.cancel(reason.as_deref().map(RStr::from).into()))
    };
    let mut task_hooks = TaskHooks::new(done, cancel);
    if takes_input {
        let writing = on_plugin.clone();
        task_hooks = task_hooks.with_writer(move |input: &[u8], eof: bool| {
            let input = String::from_utf8_lossy(input).into_owned();
            writing.fallible(move |h| h.write(RStr::from(input.as_str()), eof))
        });
    }
    if !stream {
        return task_hooks;
    }
    let peeking = on_plugin.clone();
    task_hooks
        .with_reader(move || {
            on_plugin
                .call(|h| h.read().into_string())
                .unwrap_or_default()
        })
        .with_peeker(move || peeking.call(|h| h.peek().into_string()).unwrap_or_default())
}
