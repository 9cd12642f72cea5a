//! Listener sets with per-listener containment, and the guards that unregister them.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Weak};
use taskhost_common::panic_text;

use crate::agent::Agent;
use crate::status::TaskSnapshot;

/// Called once per task when it settles, with the terminal snapshot and the exact owner instance.
pub type TaskDoneListener = Arc<dyn Fn(&TaskSnapshot, Option<&Agent>) + Send + Sync>;

/// Called after every commit that changes what `list` returns for an owner; `None` means an unowned
/// task changed, so every caller's visible set did.
pub type TasksChangedListener = Arc<dyn Fn(Option<&Agent>) + Send + Sync>;

/// One ordered set of listeners. Firing copies the set, so a listener may register or unregister
/// listeners (itself included) without deadlock; each call is contained: a panic is logged and the
/// remaining listeners still run.
pub(crate) struct ListenerSet<F: ?Sized> {
    inner: Mutex<SetInner<F>>,
}

struct SetInner<F: ?Sized> {
    next: u64,
    closed: bool,
    entries: BTreeMap<u64, Arc<F>>,
}

impl<F: ?Sized> ListenerSet<F> {
    pub(crate) fn new() -> Self {
        Self {
            inner: Mutex::new(SetInner {
                next: 0,
                closed: false,
                entries: BTreeMap::new(),
            }),
        }
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, SetInner<F>> {
        // A poisoned set only means a panic happened while it was locked; its map is still whole.
        self.inner.lock()
    }

    /// Adds a listener; returns its key, or `None` once the set is closed.
    pub(crate) fn add(&self, listener: Arc<F>) -> Option<u64> {
        let mut g = self.lock();
        if g.closed {
            return None;
        }
        g.next += 1;
        let key = g.next;
        g.entries.insert(key, listener);
        Some(key)
    }

    pub(crate) fn remove(&self, key: u64) {
        self.lock().entries.remove(&key);
    }

    /// Closes the set: no listener runs or registers after this.
    pub(crate) fn close(&self) {
        let mut g = self.lock();
        g.closed = true;
        g.entries.clear();
    }

    pub(crate) fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Calls `call` on each listener, in registration order, each contained.
    pub(crate) fn fire(&self, what: &str, call: impl Fn(&F)) {
        let listeners: Vec<Arc<F>> = {
            let g = self.lock();
            if g.closed {
                return;
            }
            g.entries.values().cloned().collect()
        };
        for l in listeners {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(|| call(&l))) {
                tracing::error!(listener = what, panic = %panic_text(&*panic), "task listener panicked");
            }
        }
    }
}

/// Something a guard can detach from: a listener set or the surface table.
pub(crate) trait Detach: Send + Sync {
    fn detach(&self, key: u64);
}

impl<F: ?Sized + Send + Sync> Detach for ListenerSet<F> {
    fn detach(&self, key: u64) {
        self.remove(key);
    }
}

/// Keeps a registration (a listener or a control surface) in force; dropping it, or calling
/// [`Registration::dispose`], undoes it. Disposing twice is a no-op.
#[must_use = "dropping a Registration undoes it at once"]
pub struct Registration {
    target: Option<(Weak<dyn Detach>, u64)>,
}

impl Registration {
    pub(crate) fn new(target: Weak<dyn Detach>, key: Option<u64>) -> Self {
        Self {
            target: key.map(|k| (target, k)),
        }
    }

    /// Undoes the registration now. Idempotent.
    pub fn dispose(&mut self) {
        if let Some((target, key)) = self.target.take()
            && let Some(t) = target.upgrade()
        {
            t.detach(key);
        }
    }

    /// True while the registration is in force (it was accepted and not yet disposed).
    pub fn is_active(&self) -> bool {
        self.target.is_some()
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.dispose();
    }
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("active", &self.is_active())
            .finish()
    }
}
