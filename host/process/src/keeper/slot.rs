//! The host's keeper, started again should it die: a task of the user's can kill it, and the
//! promise that nothing outlives the host must not go with it.

use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use super::client::{Keeper, KeeperSpawnError, KeptProcess, KeptStreams};
use super::wire::Launch;
use crate::escaped::Live;

/// How many times a dead keeper is replaced before the host gives up on keepers (a keeper that
/// cannot stay up would otherwise be restarted forever).
const MAX_RESTARTS: u32 = 5;

/// The current keeper of a process service.
#[derive(Clone)]
pub struct Keepers(Arc<Inner>);

struct Inner {
    program: PathBuf,
    marker_prefix: String,
    /// The service's live process groups: a new keeper is told of those its predecessor spawned.
    live: Live,
    state: Mutex<State>,
}

struct State {
    current: Option<Arc<Keeper>>,
    restarts: u32,
    stopped: bool,
}

impl Keepers {
    /// Starts the keeper `program` for the processes whose markers start with `marker_prefix`,
    /// whose live groups are `live`. A keeper that cannot start is logged, and the service spawns
    /// its processes itself.
    pub fn start(program: &Path, marker_prefix: &str, live: Live) -> Self {
        let inner = Arc::new(Inner {
            program: program.to_owned(),
            marker_prefix: marker_prefix.to_owned(),
            live,
            state: Mutex::new(State {
                current: None,
                restarts: 0,
                stopped: false,
            }),
        });
        replace(&inner, None);
        Self(inner)
    }

    fn current(&self) -> Option<Arc<Keeper>> {
        self.0.state.lock().current.clone()
    }

    /// Has the current keeper start a process; see [`Keeper::spawn`].
    ///
    /// # Errors
    /// [`KeeperSpawnError::Gone`] when no keeper runs (the caller starts the process itself);
    /// [`KeeperSpawnError::Refused`] with the OS's cause.
    pub fn spawn(
        &self,
        launch: &Launch,
        streams: KeptStreams<'_>,
    ) -> Result<KeptProcess, KeeperSpawnError> {
        self.current()
            .ok_or(KeeperSpawnError::Gone)?
            .spawn(launch, streams)
    }

    /// Tells the current keeper that a process group is gone.
    pub fn group_ended(&self, pgid: i32) {
        if let Some(k) = self.current() {
            k.group_ended(pgid);
        }
    }

    /// The current keeper's pid.
    pub fn pid(&self) -> Option<u32> {
        self.current().and_then(|k| k.pid())
    }

    /// Stops the current keeper for good (a shutdown: its end starts no other).
    pub fn stop(&self) {
        let current = {
            let mut st = self.0.state.lock();
            st.stopped = true;
            st.current.take()
        };
        if let Some(k) = current {
            k.stop();
        }
    }
}

/// Starts a keeper in place of `dead` (none at first) and tells it every live group, while no
/// group can end unnoticed: the live map is held, so a group that ends after it was told of is
/// forgotten by the new keeper, not the dead one.
fn replace(inner: &Arc<Inner>, dead: Option<&Weak<Keeper>>) {
    // Dropped here, after the locks: dropping a keeper waits for its process to exit.
    let retired = replace_locked(inner, dead);
    drop(retired);
}

/// [`replace`] under the locks; returns the dead keeper taken out of service.
fn replace_locked(inner: &Arc<Inner>, dead: Option<&Weak<Keeper>>) -> Option<Arc<Keeper>> {
    let live = inner.live.lock();
    let mut st = inner.state.lock();
    if st.stopped {
        return None;
    }
    let mut retired = None;
    if let Some(dead) = dead {
        let still_current = match (&st.current, dead.upgrade()) {
            (Some(current), Some(dead)) => Arc::ptr_eq(current, &dead),
            _ => false,
        };
        if !still_current {
            return None;
        }
        retired = st.current.take();
        if st.restarts >= MAX_RESTARTS {
            tracing::error!(
                restarts = st.restarts,
                "the keeper keeps dying: task processes may outlive a crash of the host"
            );
            return retired;
        }
        st.restarts += 1;
    }
    let (tx, rx) = std::sync::mpsc::channel::<Weak<Keeper>>();
    let weak = Arc::downgrade(inner);
    let on_death = move || {
        if let (Some(inner), Ok(me)) = (weak.upgrade(), rx.recv()) {
            replace(&inner, Some(&me));
        }
    };
    match Keeper::start(&inner.program, &inner.marker_prefix, on_death) {
        Ok(keeper) => {
            let keeper = Arc::new(keeper);
            for &g in live.values() {
                keeper.watch(g);
            }
            let _ = tx.send(Arc::downgrade(&keeper));
            st.current = Some(keeper);
        }
        Err(e) => {
            tracing::error!(program = %inner.program.display(), error = %e, "cannot start the keeper: task processes may outlive a crash of the host");
        }
    }
    retired
}
