//! External work an earlier host of the state directory left running, followed on by this one.

use taskhost_registry::TaskId;

use super::work::ExternalWork;
use crate::services::Services;

impl Services {
    /// Takes over the external tasks `adopted` (what opening the state found of hosts that are
    /// gone): each keeps its id and owner, its work is polled by its recorded command, and its
    /// output is followed from where its owner's reads stood, so nothing read is repeated and
    /// nothing written is lost. An owner not connected here gets its session opened (its notices
    /// wait for it); one that comes back finds its tasks live. Returns the ids taken over; one that
    /// cannot be (no tasks plugin attached, a malformed record) is logged and left to the next host.
    pub fn adopt_external(&self, adopted: &[taskhost_store::Adopted]) -> Vec<String> {
        let mut taken = Vec::new();
        for a in adopted {
            let record = &a.record;
            let Some((_, number)) = TaskId::new(record.id.as_str()).parts() else {
                tracing::warn!(task = %record.id, "an external task's record has a malformed id");
                continue;
            };
            let decl = self.declaration_of(record);
            let work = ExternalWork::resume(
                &self.processes,
                &self.runtime,
                &decl.session_key(),
                &a.external,
            );
            let hooks = work.clone();
            match self.take_over(&decl, number, move || Ok(hooks.hooks())) {
                Ok(id) => {
                    self.keep_external(&id, &work, a.external.read_offset);
                    taken.push(id);
                }
                Err(e) => tracing::warn!(
                    task = %record.id,
                    error = %e,
                    "an external task of a host that stopped could not be taken over"
                ),
            }
        }
        taken
    }
}
