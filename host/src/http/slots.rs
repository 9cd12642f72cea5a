//! Places per principal: at most a cap of something (event streams, connections) held by one
//! principal at once, each place held until its [`Slot`] drops.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// How many places each principal holds, and the cap.
#[derive(Clone)]
pub(super) struct Slots {
    held: Arc<Mutex<HashMap<String, usize>>>,
    cap: usize,
}

impl Slots {
    /// No place held; at most `cap` per principal.
    pub(super) fn new(cap: usize) -> Self {
        Self {
            held: Arc::default(),
            cap,
        }
    }

    /// The cap.
    pub(super) fn cap(&self) -> usize {
        self.cap
    }

    /// A place for `owner`, or `None` when it holds the cap.
    pub(super) fn take(&self, owner: &str) -> Option<Slot> {
        let mut held = self.held.lock();
        let n = held.entry(owner.to_owned()).or_insert(0);
        if *n >= self.cap {
            return None;
        }
        *n += 1;
        Some(Slot {
            held: self.held.clone(),
            owner: owner.to_owned(),
        })
    }
}

/// One place of a principal, given back when dropped.
pub(super) struct Slot {
    held: Arc<Mutex<HashMap<String, usize>>>,
    owner: String,
}

impl Slot {
    /// The principal's owner holding the place.
    pub(super) fn owner(&self) -> &str {
        &self.owner
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut held = self.held.lock();
        if let Some(n) = held.get_mut(&self.owner) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.owner);
            }
        }
    }
}
