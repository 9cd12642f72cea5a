//! Control surfaces and the fence: `start` refuses work no attached surface could collect or stop.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashSet};

use crate::agent::Agent;
use crate::ids::SessionId;
use crate::listeners::Detach;

/// Which owners an attached control surface serves.
///
/// A taskhost process is one composition, so its surfaces are [`SurfaceScope::Global`]; the
/// per-session scope is the seam for a host that serves several compositions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SurfaceScope {
    /// Every owner, and unowned tasks.
    Global,
    /// Only agents of these sessions; never unowned tasks.
    Sessions(HashSet<SessionId>),
}

impl SurfaceScope {
    fn serves(&self, owner: Option<&Agent>) -> bool {
        match (self, owner) {
            (SurfaceScope::Global, _) => true,
            (SurfaceScope::Sessions(s), Some(a)) => s.contains(a.session()),
            (SurfaceScope::Sessions(_), None) => false,
        }
    }
}

/// Attached surfaces by attach key: the last key issued, and each surface's name and scope.
type Table = (u64, BTreeMap<u64, (String, SurfaceScope)>);

/// The attached surfaces. Duplicate names are independent attachments.
pub(crate) struct Surfaces {
    inner: Mutex<Table>,
}

impl Surfaces {
    pub(crate) fn new() -> Self {
        Self {
            inner: Mutex::new((0, BTreeMap::new())),
        }
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, Table> {
        self.inner.lock()
    }

    pub(crate) fn attach(&self, name: String, scope: SurfaceScope) -> u64 {
        let mut g = self.lock();
        g.0 += 1;
        let key = g.0;
        g.1.insert(key, (name, scope));
        key
    }

    pub(crate) fn serves(&self, owner: Option<&Agent>) -> bool {
        self.lock().1.values().any(|(_, scope)| scope.serves(owner))
    }

    pub(crate) fn names(&self) -> Vec<String> {
        self.lock().1.values().map(|(n, _)| n.clone()).collect()
    }
}

impl Detach for Surfaces {
    fn detach(&self, key: u64) {
        self.lock().1.remove(&key);
    }
}
