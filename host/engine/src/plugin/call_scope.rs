//! The tool call a plugin thread is running: host calls the plugin makes from inside it (a foreground
//! command, a foreground subagent) end when the call is cancelled, and report progress to the caller
//! when it asked for it.

use std::cell::RefCell;

use crate::services::CallContext;

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
