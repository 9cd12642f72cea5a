//! The tool call a plugin thread is running: host calls the plugin makes from inside it (a foreground
//! command, a foreground subagent) end when the call is cancelled.

use std::cell::RefCell;

use taskhost_registry::CancellationToken;

thread_local! {
    static CURRENT: RefCell<Option<CancellationToken>> = const { RefCell::new(None) };
}

/// Marks the current thread as running a tool call whose cancellation is `token`, until dropped.
pub(crate) struct CallScope(Option<CancellationToken>);

impl CallScope {
    pub(crate) fn enter(token: CancellationToken) -> Self {
        Self(CURRENT.with(|c| c.replace(Some(token))))
    }

    /// The cancellation of the tool call this thread runs; a token nobody cancels outside any.
    pub(crate) fn current() -> CancellationToken {
        CURRENT.with(|c| c.borrow().clone()).unwrap_or_default()
    }
}

impl Drop for CallScope {
    fn drop(&mut self) {
        let previous = self.0.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}
