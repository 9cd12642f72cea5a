//! The tool call a plugin thread is running: host calls the plugin makes from inside it (a foreground
//! command, a foreground subagent) end when the call is cancelled, and report progress to the caller
//! when it asked for it.

use std::cell::RefCell;
use std::sync::Arc;

use taskhost_registry::CancellationToken;

/// Reports a running call's progress: a number that grows (bytes of output so far) and a message
/// (the latest line).
pub type Progress = Arc<dyn Fn(f64, String) + Send + Sync>;

/// What a plugin thread knows of the call it runs.
#[derive(Clone, Default)]
pub(crate) struct CallContext {
    pub(crate) cancel: CancellationToken,
    pub(crate) progress: Option<Progress>,
}

thread_local! {
    static CURRENT: RefCell<Option<CallContext>> = const { RefCell::new(None) };
}

/// Marks the current thread as running a tool call, until dropped.
pub(crate) struct CallScope(Option<CallContext>);

impl CallScope {
    pub(crate) fn enter(call: CallContext) -> Self {
        Self(CURRENT.with(|c| c.replace(Some(call))))
    }

    /// The call this thread runs; outside any, a token nobody cancels and no progress.
    pub(crate) fn current() -> CallContext {
        CURRENT.with(|c| c.borrow().clone()).unwrap_or_default()
    }
}

impl Drop for CallScope {
    fn drop(&mut self) {
        let previous = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}
