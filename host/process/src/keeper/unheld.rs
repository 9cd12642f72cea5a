//! The tasks a keeper holds for a successor, as the host's side knows them: should the keeper
//! die, the one that replaces it holds none of them (see `handover_state`), so they end with the
//! host, and whoever asked is told their names.

use parking_lot::Mutex;
use std::sync::Arc;

/// Told the names of the tasks a dead keeper held (see [`Unheld::on_death`]).
pub(super) type UnheldHook = Arc<dyn Fn(Vec<String>) + Send + Sync>;

/// The current keeper's held tasks (group, task name), and who is told when it dies.
#[derive(Default)]
pub(super) struct Unheld {
    held: Mutex<Vec<(i32, String)>>,
    tell: Mutex<Option<UnheldHook>>,
}

impl Unheld {
    /// The current keeper holds group `pgid` as task `task`.
    pub(super) fn held(&self, pgid: i32, task: &str) {
        let mut held = self.held.lock();
        held.retain(|(g, _)| *g != pgid);
        held.push((pgid, task.to_owned()));
    }

    /// Group `pgid` ended.
    pub(super) fn ended(&self, pgid: i32) {
        self.held.lock().retain(|(g, _)| *g != pgid);
    }

    /// Who is told from now on.
    pub(super) fn set(&self, tell: UnheldHook) {
        *self.tell.lock() = Some(tell);
    }

    /// The current keeper died: takes the names of the tasks it held (forgotten here), with whom
    /// to tell them, for [`Unheld::tell`] once the next keeper is starting.
    pub(super) fn on_death(&self) -> Option<(UnheldHook, Vec<String>)> {
        let names: Vec<String> = std::mem::take(&mut *self.held.lock())
            .into_iter()
            .map(|(_, task)| task)
            .collect();
        let tell = self.tell.lock().clone()?;
        (!names.is_empty()).then_some((tell, names))
    }
}

/// Tells what [`Unheld::on_death`] took, once.
pub(super) fn tell(dead: Option<(UnheldHook, Vec<String>)>) {
    if let Some((tell, names)) = dead {
        tell(names);
    }
}
