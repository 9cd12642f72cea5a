//! Tasks whose keeper died while it held them for a successor: they run on, but end with the host
//! should it crash (a replacing keeper holds none of them). Their records say so, so that a crash
//! then names the keeper's death, and each owner is told once, on its own session.

use std::collections::BTreeMap;

use taskhost_abi::wording;
use taskhost_registry::Agent;

use crate::services::handles::Services;

impl Services {
    /// From now on, each death of a keeper that held running tasks for a successor marks their
    /// records and tells each owner which of its tasks lost their crash protection.
    pub(crate) fn tell_unheld(&self) {
        let Some(state) = self.state.clone() else {
            return;
        };
        let (registry, sessions) = (self.registry.clone(), self.sessions.clone());
        self.processes.on_unheld(move |tasks| {
            let host = Agent::overseer("taskhost");
            state.unheld(tasks.iter().map(String::as_str));
            let mut by_owner: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for id in tasks {
                let Ok(task) = registry.get(&id, Some(&host)) else {
                    continue;
                };
                if let (Some(owner), false) = (task.owner_session, task.status.is_terminal()) {
                    by_owner.entry(owner.as_str().to_owned()).or_default().push(id);
                }
            }
            for (owner, ids) in by_owner {
                tracing::warn!(owner, tasks = ?ids, "the keeper died: these tasks end with the host should it crash");
                sessions.notify(&owner, None, &wording::unheld_notice(&ids.join(", ")));
            }
        });
    }
}
