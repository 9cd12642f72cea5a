//! What the host notes of a task for people's views that the task's record does not hold: where
//! its process runs (its process group's leader and its working directory), while it runs, and
//! who asked to kill it, with the reason given.

use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Weak};

use crate::process::Process;

/// How many kills are remembered; past it the oldest is forgotten.
const KILLS_KEPT: usize = 4096;

/// How many processes are noted before those gone are first swept.
const SWEEP_FROM: usize = 64;

/// Where a task's process runs and who asked to kill it. Cheap to clone; clones share one table.
#[derive(Clone, Default)]
pub struct TaskFacts(Arc<Inner>);

#[derive(Default)]
struct Inner {
    /// The processes noted, and how many were left at the last sweep of those gone.
    running: Mutex<(HashMap<String, Running>, usize)>,
    kills: Mutex<(HashMap<String, Kill>, VecDeque<String>)>,
}

struct Running {
    process: Weak<Process>,
    cwd: Option<PathBuf>,
}

/// Who asked to kill a task: the caller's owner id (or [`taskhost_abi`]'s every-owner caller of an
/// overseer's view), and the reason it gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kill {
    /// The caller's owner id.
    pub by: String,
    /// The reason given, if any.
    pub reason: Option<String>,
}

impl TaskFacts {
    /// Notes that task `id`'s process runs in `cwd` (the host's own when `None`); forgotten once
    /// the process is gone.
    pub(crate) fn started(&self, id: &str, process: &Arc<Process>, cwd: Option<PathBuf>) {
        let cwd = cwd.or_else(|| std::env::current_dir().ok());
        let mut guard = self.0.running.lock();
        let (running, swept) = &mut *guard;
        // Those gone are swept once the table doubled since the last sweep: a start costs O(1)
        // on average however many tasks run.
        if running.len() >= 2 * (*swept).max(SWEEP_FROM) {
            running.retain(|_, r| r.process.strong_count() > 0);
            *swept = running.len();
        }
        let process = Arc::downgrade(process);
        running.insert(id.to_owned(), Running { process, cwd });
    }

    /// Task `id`'s process group leader's pid and its working directory, while its process runs.
    pub fn running(&self, id: &str) -> Option<(Option<i32>, Option<PathBuf>)> {
        let running = self.0.running.lock();
        let r = running.0.get(id)?;
        let process = r.process.upgrade()?;
        Some((process.pgid(), r.cwd.clone()))
    }

    /// Notes that `kill` asked to kill task `id` (a later kill replaces an earlier one's note).
    pub fn killed(&self, id: &str, kill: Kill) {
        let mut guard = self.0.kills.lock();
        let (kills, order) = &mut *guard;
        if kills.insert(id.to_owned(), kill).is_none() {
            order.push_back(id.to_owned());
        }
        while order.len() > KILLS_KEPT {
            if let Some(old) = order.pop_front() {
                kills.remove(&old);
            }
        }
    }

    /// Who asked to kill task `id`, if a kill was noted.
    pub fn kill_of(&self, id: &str) -> Option<Kill> {
        self.0.kills.lock().0.get(id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_kills_are_forgotten_past_the_kept_number() {
        let facts = TaskFacts::default();
        let kill = |n: usize| Kill {
            by: format!("principal-{n}"),
            reason: None,
        };
        for n in 0..=KILLS_KEPT {
            facts.killed(&format!("bash-{n}"), kill(n));
        }
        assert_eq!(facts.kill_of("bash-0"), None);
        assert_eq!(facts.kill_of("bash-1"), Some(kill(1)));
        facts.killed("bash-1", kill(7));
        assert_eq!(
            facts.kill_of("bash-1"),
            Some(kill(7)),
            "a later kill's note replaces"
        );
    }
}
