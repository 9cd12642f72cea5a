//! The spill files each session owns, removed with the session.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use parking_lot::Mutex;

use super::Process;

/// Spill files by owning session ("" for unowned), removed when the session is disposed. Holds only
/// files that exist: a stream's planned path is forgotten when its process settles without spilling.
/// A set per session, so recording and forgetting cost the same however many tasks the session has.
#[derive(Default)]
pub(crate) struct Spills(pub(crate) Mutex<HashMap<String, HashSet<PathBuf>>>);

impl Spills {
    pub(crate) fn record(&self, session: &str, paths: impl IntoIterator<Item = PathBuf>) {
        self.0
            .lock()
            .entry(session.to_owned())
            .or_default()
            .extend(paths);
    }

    /// Forgets the planned spill paths of `process`'s streams that never became a file.
    pub(crate) fn forget_unused(&self, session: &str, process: &Process) {
        let unused: Vec<PathBuf> = {
            let s = process.streams.lock();
            [&s.out, &s.err]
                .into_iter()
                .filter(|b| b.spill_file().is_none())
                .filter_map(|b| b.planned_spill().cloned())
                .collect()
        };
        self.forget(session, unused);
    }

    /// Forgets spill paths of `session` that will never be files.
    pub(crate) fn forget(&self, session: &str, unused: impl IntoIterator<Item = PathBuf>) {
        let mut map = self.0.lock();
        if let Some(paths) = map.get_mut(session) {
            for p in unused {
                paths.remove(&p);
            }
            if paths.is_empty() {
                map.remove(session);
            }
        }
    }
}
