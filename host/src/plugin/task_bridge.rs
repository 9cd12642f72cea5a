//! The bridge between a plugin's task hooks and the registry's: each call goes to the plugin on its
//! generation's threads, and the generation stays loaded while the task lives.

use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use taskhost_abi::abi_stable::std_types::{ROption, RStr};
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

/// Wraps a plugin's task hooks as registry hooks that call into the plugin on its own threads.
pub(crate) fn registry_hooks(
    generation: Arc<Generation>,
    hooks: HooksBox,
    rx: tokio::sync::oneshot::Receiver<taskhost_registry::TaskOutcome>,
) -> TaskHooks {
    let stream = hooks.is_stream();
    let takes_input = hooks.takes_input();
    let hooks = Arc::new(Mutex::new(GenBox::new(hooks, generation.clone())));
    let live = LiveTask::new(generation.clone());
    let done = async move {
        let outcome = rx.await.map_err(|_| {
            ProducerError::from("producer dropped the task's completion without settling it")
        });
        drop(live);
        outcome
    };
    let (cancel_hooks, cancel_gen) = (hooks.clone(), generation.clone());
    let cancel = move |reason: Option<&str>| {
        let reason = reason.map(str::to_owned);
        let hooks = cancel_hooks.clone();
        cancel_gen
            .executor
            .call(move || {
                let mut h = hooks.lock();
                let reason: ROption<RStr<'_>> = reason.as_deref().map(RStr::from).into();
                h.get_mut()
                    .cancel(reason)
                    .into_result()
                    .map_err(|e| e.as_str().to_owned())
            })
            .unwrap_or_else(|| Err("the task's plugin generation is unloading".to_owned()))
            .map_err(ProducerError)
    };
    let mut task_hooks = TaskHooks::new(done, cancel);
    if takes_input {
        let (write_hooks, write_gen) = (hooks.clone(), generation.clone());
        task_hooks = task_hooks.with_writer(move |input: &[u8], eof: bool| {
            let input = String::from_utf8_lossy(input).into_owned();
            let hooks = write_hooks.clone();
            write_gen
                .executor
                .call(move || {
                    let mut h = hooks.lock();
                    h.get_mut()
                        .write(RStr::from(input.as_str()), eof)
                        .into_result()
                        .map_err(|e| e.as_str().to_owned())
                })
                .unwrap_or_else(|| Err("the task's plugin generation is unloading".to_owned()))
                .map_err(ProducerError)
        });
    }
    if !stream {
        return task_hooks;
    }
    let output = move |peek: bool| {
        let hooks = hooks.clone();
        generation
            .executor
            .call(move || {
                let mut h = hooks.lock();
                let h = h.get_mut();
                let text = if peek { h.peek() } else { h.read() };
                text.as_str().to_owned()
            })
            .unwrap_or_default()
    };
    let peek = output.clone();
    task_hooks
        .with_reader(move || output(false))
        .with_peeker(move || peek(true))
}
