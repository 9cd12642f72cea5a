//! The slots: how many process tasks run, for the host and for each owner, and whose turn is next.

use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use taskhost_common::wording;
use taskhost_registry::{Registry, TaskId};
use tokio::sync::oneshot;

use super::turns::Turns;

pub use crate::policy::OwnerLimit;

/// The host's queue of process tasks. Cheap to clone; clones share one queue.
#[derive(Clone)]
pub struct Queue(Arc<Inner>);

struct Inner {
    registry: Registry,
    host_max: Option<u64>,
    owner_max: Option<OwnerLimit>,
    turns: Mutex<Turns<oneshot::Sender<Slot>>>,
}

/// A running task's place among the slots: dropped when its work ended, which frees the slot for
/// the next task in turn.
pub struct Slot(Option<(Weak<Inner>, String)>);

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some((inner, owner)) = self.0.take()
            && let Some(inner) = inner.upgrade()
        {
            inner.turns.lock().ended(&owner);
            Queue(inner).dispatch();
        }
    }
}

/// A queued task's place in line: its slot once its turn came.
pub(crate) struct Ticket {
    granted: oneshot::Receiver<Slot>,
}

impl Ticket {
    /// The slot, once the task's turn came; `None` when the queue is gone.
    ///
    /// # Cancel safety
    /// Dropping the future leaves the task in line: withdraw it ([`Queue::withdraw`]).
    pub(crate) async fn granted(self) -> Option<Slot> {
        self.granted.await.ok()
    }
}

impl Queue {
    /// A queue with the host's limit `host_max` (`[tasks] max_running`) and each owner's
    /// `owner_max` (`None`: no policy limits any owner).
    pub fn new(registry: Registry, host_max: Option<u64>, owner_max: Option<OwnerLimit>) -> Self {
        Self(Arc::new(Inner {
            registry,
            host_max,
            owner_max,
            turns: Mutex::new(Turns::new()),
        }))
    }

    /// True when some limit applies: without one, nothing is counted or queued for a slot.
    pub fn limited(&self) -> bool {
        self.0.host_max.is_some() || self.0.owner_max.is_some()
    }

    /// A slot for a task of `owner` now, when one is free and none of `owner`'s tasks waits for
    /// one; `None`: the task must queue.
    pub fn try_take(&self, owner: &str) -> Option<Slot> {
        if !self.limited() {
            return Some(Slot(None));
        }
        let mut turns = self.0.turns.lock();
        if turns.waiting_of(owner) > 0 || !self.may_run(&turns, owner) {
            return None;
        }
        turns.run(owner);
        Some(Slot(Some((Arc::downgrade(&self.0), owner.to_owned()))))
    }

    /// A slot for a task of `owner` that already runs (a predecessor handed it over): counted
    /// whatever the limits say, so the tasks waiting start only as slots free.
    pub fn hold(&self, owner: &str) -> Slot {
        if !self.limited() {
            return Slot(None);
        }
        self.0.turns.lock().run(owner);
        Slot(Some((Arc::downgrade(&self.0), owner.to_owned())))
    }

    /// Puts task `id` of `owner` in line for a slot; every waiting task's detail then says how
    /// many are ahead of it.
    pub(crate) fn enqueue(&self, owner: &str, id: &TaskId) -> Ticket {
        let (grant, granted) = oneshot::channel();
        self.0
            .turns
            .lock()
            .push(owner, id.as_str().to_owned(), grant);
        self.dispatch();
        Ticket { granted }
    }

    /// Takes task `id` out of line (killed, or its owner gone): it will not run.
    pub(crate) fn withdraw(&self, id: &str) {
        let removed = self.0.turns.lock().remove(id);
        if removed.is_some() {
            self.refresh_notes();
        }
    }

    /// How many tasks would run before queued task `id` if nothing else arrived; `None` for a
    /// task not in line.
    pub fn ahead_of(&self, id: &str) -> Option<usize> {
        let ranks = self.0.turns.lock().ranks();
        ranks.into_iter().find(|(r, _)| r == id).map(|(_, n)| n)
    }

    /// Tasks running and waiting for a slot, for diagnostics and benchmarks.
    pub fn counts(&self) -> (u64, usize) {
        let turns = self.0.turns.lock();
        let waiting = turns.ranks().len();
        (turns.total(), waiting)
    }

    fn may_run(&self, turns: &Turns<oneshot::Sender<Slot>>, owner: &str) -> bool {
        let host = self.0.host_max.is_none_or(|max| turns.total() < max);
        let own = || {
            self.0
                .owner_max
                .as_ref()
                .and_then(|f| f(owner))
                .is_none_or(|max| turns.running_of(owner) < max)
        };
        host && own()
    }

    /// Gives free slots to the tasks whose turn it is, then refreshes what every waiting task's
    /// detail says.
    fn dispatch(&self) {
        loop {
            let next = {
                let mut turns = self.0.turns.lock();
                turns.next(|t, owner| self.may_run(t, owner))
            };
            let Some((owner, _, grant)) = next else { break };
            let slot = Slot(Some((Arc::downgrade(&self.0), owner)));
            // A task gone from the line meanwhile frees its slot again as the slot drops.
            drop(grant.send(slot));
        }
        self.refresh_notes();
    }

    fn refresh_notes(&self) {
        let ranks = self.0.turns.lock().ranks();
        self.0.registry.set_queued_notes(
            ranks
                .into_iter()
                .map(|(id, ahead)| (TaskId::new(id.as_str()), wording::ahead_note(ahead))),
        );
    }
}
