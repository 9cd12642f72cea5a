//! What the run observed, shared by its threads, and what it found wrong.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use crate::SESSIONS;

/// One settlement as the registry's completion listeners saw it.
pub struct Settled {
    pub session: Option<String>,
    pub reported: bool,
}

/// What the run observed, shared by its threads.
#[derive(Default)]
pub struct Ledger {
    /// Every settlement, by task id, in order.
    pub settled: Mutex<HashMap<String, Vec<Settled>>>,
    /// Task ids each session started.
    pub started: Vec<Mutex<HashSet<String>>>,
    /// Unread tasks (never read before the end) and their expected read.
    pub unread: Mutex<Vec<(usize, String, String)>>,
    /// What went wrong, as text.
    pub failures: Mutex<Vec<String>>,
}

impl Ledger {
    pub fn new() -> Self {
        Self {
            started: (0..SESSIONS).map(|_| Mutex::default()).collect(),
            ..Self::default()
        }
    }

    pub fn fail(&self, what: String) {
        self.failures.lock().unwrap().push(what);
    }

    pub fn started(&self, session: usize, id: &str) {
        self.started[session].lock().unwrap().insert(id.to_owned());
    }

    pub fn owner_of(&self, id: &str) -> Option<usize> {
        (0..SESSIONS).find(|&s| self.started[s].lock().unwrap().contains(id))
    }
}

/// FNV-1a, to name an output in a failure without printing it.
pub fn checksum(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}
