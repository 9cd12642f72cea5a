//! Tasks registered `queued` ([`crate::TaskStart::queued`]): their work begins when their producer
//! says so, and until then their detail says what they wait for.

use crate::ids::TaskId;
use crate::registry::Registry;
use crate::state::Phase;
use crate::status::TaskStatus;

impl Registry {
    /// Task `id`, `queued`, begins its work: it is `running` from now on, its queued note gone.
    /// The journal and the change listeners are told. False (nothing changed) when the task is not
    /// queued (it was killed meanwhile, or is unknown) or the registry is being disposed (no work
    /// begins then: see [`Registry::is_open`]).
    pub fn begin_running(&self, id: &str) -> bool {
        let owner = {
            let mut st = self.inner.state.lock();
            if st.phase != Phase::Open {
                return false;
            }
            match st.records.get_mut(id) {
                Some(rec) if rec.status == TaskStatus::Queued => {
                    rec.status = TaskStatus::Running;
                    rec.detail = None;
                    rec.owner.clone()
                }
                _ => return false,
            }
        };
        if let Some(journal) = &self.inner.journal {
            journal.started(id);
        }
        self.inner.changed(owner.as_ref());
        true
    }

    /// False once the registry's disposal began (the host stops): a queued task's work does not
    /// begin then, and its producer may keep it for a later host.
    pub fn is_open(&self) -> bool {
        self.inner.state.lock().phase == Phase::Open
    }

    /// Sets the detail of each task of `notes` that is still `queued` (what it waits for, how many
    /// are ahead of it), in one step; tasks no longer queued are skipped. No listener is told: a
    /// note is read with the task, it is no change of what a list holds.
    pub fn set_queued_notes(&self, notes: impl IntoIterator<Item = (TaskId, String)>) {
        let mut st = self.inner.state.lock();
        for (id, note) in notes {
            if let Some(rec) = st.records.get_mut(&id)
                && rec.status == TaskStatus::Queued
            {
                rec.detail = Some(note);
            }
        }
    }
}

impl Registry {
    /// Task `id`'s snapshot once it settled (at once when it has), without marking it reported
    /// (its owner is still owed its notice); `None` when the registry does not hold it, or drops it
    /// before it settles (its owner was disposed).
    ///
    /// # Cancel safety
    /// Dropping the future changes nothing.
    pub async fn ended(&self, id: &str) -> Option<crate::TaskSnapshot> {
        let mut settled = self.inner.state.lock().records.get(id)?.settled.subscribe();
        loop {
            if let Some(snapshot) = settled.borrow_and_update().clone() {
                return Some(snapshot);
            }
            settled.changed().await.ok()?;
        }
    }
}
