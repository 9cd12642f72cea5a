//! The tasks a keeper holds for a successor, as the host's side knows them: should the keeper
//! die, the one that replaces it carries them ([`crate::keeper::wire::Request::Carry`]) with second
//! handles of the read ends the host reads from, so a keeper's death loses no task at the next
//! upgrade or crash. A task that cannot be carried (its output ended meanwhile, or the new keeper
//! is of an older protocol) ends with the host, and whoever asked is told its name.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use super::hold::Hold;
use crate::keeper::client::Keeper;

/// Told the names of the tasks a dead keeper held and no other could carry.
pub(crate) type UnheldHook = Arc<dyn Fn(Vec<String>) + Send + Sync>;

/// Second handles of a running process's read ends (stdout then stderr, or its terminal's
/// master), made when asked; `None` once one of them is gone.
pub type ReadEnds = Arc<dyn Fn() -> Option<Vec<OwnedFd>> + Send + Sync>;

/// What is known of one process group: the hold it is held with, and its read ends.
#[derive(Default)]
struct Entry {
    hold: Option<Hold>,
    ends: Option<ReadEnds>,
}

/// The current keeper's held tasks by group, and who is told when one cannot be carried.
#[derive(Default)]
pub(crate) struct Unheld {
    held: Mutex<HashMap<i32, Entry>>,
    tell: Mutex<Option<UnheldHook>>,
}

impl Unheld {
    /// The current keeper holds group `pgid` with `hold` (its task's name is the hold's).
    pub(crate) fn held(&self, pgid: i32, hold: &Hold) {
        self.held.lock().entry(pgid).or_default().hold = Some(hold.clone());
    }

    /// The task held in group `pgid` is now named `task`.
    pub(crate) fn renamed(&self, pgid: i32, task: &str) {
        if let Some(hold) = self
            .held
            .lock()
            .get_mut(&pgid)
            .and_then(|e| e.hold.as_mut())
        {
            hold.held_as = super::hold::HeldAs::Task(task.to_owned());
        }
    }

    /// The read ends of the process in group `pgid`, should a keeper carry it.
    pub(crate) fn read_ends(&self, pgid: i32, ends: ReadEnds) {
        self.held.lock().entry(pgid).or_default().ends = Some(ends);
    }

    /// Group `pgid` ended.
    pub(crate) fn ended(&self, pgid: i32) {
        self.held.lock().remove(&pgid);
    }

    /// Who is told from now on.
    pub(crate) fn set(&self, tell: UnheldHook) {
        *self.tell.lock() = Some(tell);
    }

    /// `keeper` replaces a dead one: it carries every task the dead one held. Returns the names of
    /// those it could not carry (forgotten here), with whom to tell them, for [`tell`].
    pub(crate) fn carry(&self, keeper: &Keeper) -> Option<(UnheldHook, Vec<String>)> {
        let mut lost = Vec::new();
        self.held.lock().retain(|&pgid, entry| {
            let Some(hold) = &entry.hold else {
                return true;
            };
            let carried = carried(hold).is_some_and(|hold| {
                let fds = entry.ends.as_ref().and_then(|ends| ends());
                fds.is_some_and(|fds| {
                    let fds: Vec<BorrowedFd<'_>> = fds.iter().map(AsFd::as_fd).collect();
                    keeper.carry(pgid, &hold, &fds)
                })
            });
            if !carried {
                // A foreground command has no task to tell of.
                lost.extend(hold.held_as.task().map(str::to_owned));
            }
            carried
        });
        let tell = self.tell.lock().clone()?;
        (!lost.is_empty()).then_some((tell, lost))
    }
}

/// `hold` as a keeper carries it: every stream kept by its name in the kept directory, nothing
/// but the read ends travelling, nothing pending (the host took what a handover brought). `None`
/// when a stream's kept file has no name, or it takes input.
fn carried(hold: &Hold) -> Option<Hold> {
    let mut hold = hold.clone();
    if hold.stdin {
        return None;
    }
    for s in &mut hold.streams {
        if s.file.is_empty() {
            return None;
        }
        s.kept = false;
        s.drained_taken();
    }
    Some(hold)
}

/// Tells what [`Unheld::carry`] could not carry, once.
pub(crate) fn tell(dead: Option<(UnheldHook, Vec<String>)>) {
    if let Some((tell, names)) = dead {
        tell(names);
    }
}
