//! Which tasks' producer hooks the current thread is inside, so a hook that calls back into the
//! registry to kill or read its own task is refused at once instead of waiting forever on that
//! task's ops lock, which the call that ran the hook holds.
//!
//! The registry marks the thread that runs a hook. A host that runs hook code on other threads (a
//! plugin's own executor) carries the mark there with [`HookScope::current`] and [`HookScope::enter`];
//! a hook that hands the call-back to a thread nobody marked is not detected.

use std::cell::RefCell;
use std::marker::PhantomData;

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::RegistryError;
use crate::ids::TaskId;
use crate::producer::ReaderFn;

thread_local! {
    static INSIDE: RefCell<Vec<TaskId>> = const { RefCell::new(Vec::new()) };
}

/// The tasks whose hooks a thread is running, innermost last: a hook of one task may kill or read
/// another, whose hook then runs inside it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HookScope(Vec<TaskId>);

impl HookScope {
    /// The calling thread's scope, or `None` when it runs no hook.
    pub fn current() -> Option<HookScope> {
        INSIDE.with(|inside| {
            let inside = inside.borrow();
            (!inside.is_empty()).then(|| HookScope(inside.clone()))
        })
    }

    /// Marks the calling thread as running inside this scope until the guard drops (which restores
    /// what the thread had before).
    pub fn enter(self) -> ScopeGuard {
        let before = INSIDE.with(|inside| std::mem::replace(&mut *inside.borrow_mut(), self.0));
        ScopeGuard {
            before,
            _thread_bound: PhantomData,
        }
    }
}

/// Restores the thread's previous scope when dropped. Not `Send`: a scope belongs to one thread.
#[must_use = "the scope ends when the guard drops"]
pub struct ScopeGuard {
    before: Vec<TaskId>,
    _thread_bound: PhantomData<*const ()>,
}

impl Drop for ScopeGuard {
    fn drop(&mut self) {
        let before = std::mem::take(&mut self.before);
        INSIDE.with(|inside| *inside.borrow_mut() = before);
    }
}

/// Runs `hook`, a producer hook of task `id`, with the calling thread marked as inside it.
pub(crate) fn run_hook<R>(id: &TaskId, hook: impl FnOnce() -> R) -> R {
    INSIDE.with(|inside| inside.borrow_mut().push(id.clone()));
    struct Pop;
    impl Drop for Pop {
        fn drop(&mut self) {
            INSIDE.with(|inside| inside.borrow_mut().pop());
        }
    }
    let _pop = Pop;
    hook()
}

/// Refuses a kill or read of `id` from inside one of `id`'s own hooks.
pub(crate) fn refuse_own(id: &str) -> Result<(), RegistryError> {
    let inside = INSIDE.with(|inside| inside.borrow().iter().any(|t| t.as_str() == id));
    if inside {
        return Err(RegistryError::OwnHook(id.to_owned()));
    }
    Ok(())
}

/// Runs task `id`'s reader, marked as its hook, with a panic caught.
pub(crate) fn call_reader(id: &TaskId, reader: &mut ReaderFn) -> std::thread::Result<String> {
    run_hook(id, || catch_unwind(AssertUnwindSafe(reader)))
}
