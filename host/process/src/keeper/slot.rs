//! The host's keeper, started again should it die: any process of the user's (a task too) can kill
//! it, and the promise that nothing outlives the host must not go with it.
//!
//! There is no fallback: while no keeper runs, a start fails naming why, so that no task ever runs
//! without a keeper to end it (and no task is ever the host's own child). A dead keeper is replaced
//! at once the first few times in a row; after that with a backoff that doubles up to
//! `MAX_BACKOFF` (`backoff.rs`), so a task that kills every keeper it sees cannot make the host spin. A keeper
//! that lived [`STABLE`] refills the budget of quick restarts. A keeper that cannot be started at
//! all is tried again on the same backoff, never given up on.

use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use super::backoff::{FIRST_BACKOFF, backoff};
use super::client::{Keeper, KeeperSpawnError, KeptProcess, KeptStreams};
use super::handover::adopt::{Handed, HandoverError};
use super::handover::held::HoldSetup;
use super::handover::state::HandoverState;
use super::handover::unheld::{ReadEnds, Unheld};
use super::wire::Launch;
use super::{HeldFromStart, Hold};
use crate::escaped::Live;

/// A keeper that lived this long refills the budget of quick restarts.
const STABLE: Duration = Duration::from_secs(30);
/// How long a start that found its keeper dead waits for the replacement.
const REPLACEMENT_WAIT: Duration = Duration::from_secs(2);

/// The current keeper of a process service.
#[derive(Clone)]
pub struct Keepers(Arc<Inner>);

struct Inner {
    program: PathBuf,
    marker_prefix: String,
    /// The host's cgroup every keeper joins, where there is one.
    cgroup: Option<PathBuf>,
    /// The service's live process groups: a new keeper is told of those its predecessor spawned.
    live: Live,
    /// What every keeper is told for a handover: the setup, and each running task held.
    handover: Mutex<HandoverState>,
    state: Mutex<State>,
    /// Signalled whenever `current` changes.
    changed: Condvar,
    /// The tasks the current keeper holds for a successor, told should it die.
    unheld: Unheld,
}

struct State {
    current: Option<Arc<Keeper>>,
    /// When the current keeper started.
    since: Instant,
    /// Keepers in a row that died (or could not start) before they lived [`STABLE`].
    deaths_in_a_row: u32,
    /// While no keeper runs: when the next one is started.
    next_start: Option<Instant>,
    stopped: bool,
}

impl State {
    /// Why no keeper runs, for a start that is refused.
    fn why_none(&self) -> String {
        let when = match self.next_start {
            Some(at) => format!(
                "another starts in {} ms",
                at.saturating_duration_since(Instant::now()).as_millis()
            ),
            None => "none will start (the host is stopping)".to_owned(),
        };
        format!(
            "no keeper runs (it ended {} time(s) in a row; {when}): the process was not started, since nothing would end it should the host die",
            self.deaths_in_a_row
        )
    }
}

impl Keepers {
    /// Starts the keeper `program` for the processes whose markers start with `marker_prefix`,
    /// whose live groups are `live`; each keeper joins `cgroup` (the host's, where it has one) and
    /// spawns into it. A keeper that cannot start is logged and tried again later;
    /// meanwhile starts are refused.
    pub fn start(program: &Path, marker_prefix: &str, cgroup: Option<PathBuf>, live: Live) -> Self {
        let inner = Self::inner(program, marker_prefix, cgroup, live);
        start_now(&inner);
        Self(inner)
    }

    /// Takes the keeper a predecessor of this host left waiting on `path` (see [`Keeper::adopt`]),
    /// before this host's services exist: [`Keepers::with_adopted`] puts it in service.
    ///
    /// # Errors
    /// As [`Keeper::adopt`].
    pub fn take_waiting(path: &Path) -> Result<(AdoptedKeeper, Handed), HandoverError> {
        let slot = Arc::new(OnceLock::new());
        let (died, named) = death_watch(slot.clone());
        let (keeper, handed) = Keeper::adopt(path, died)?;
        Ok((
            AdoptedKeeper {
                keeper,
                slot,
                named,
            },
            handed,
        ))
    }

    /// Serves with `adopted`, whose processes' markers start with one of `markers`; this
    /// service's own processes carry `marker_prefix`. Should it die, keepers of `program` take its
    /// place as [`Keepers::start`] would start them.
    pub fn with_adopted(
        program: &Path,
        marker_prefix: &str,
        adopted: AdoptedKeeper,
        markers: &[String],
        live: Live,
    ) -> Self {
        let inner = Self::inner(program, marker_prefix, None, live);
        let _ = adopted.slot.set(Arc::downgrade(&inner));
        adopted.keeper.mark(marker_prefix);
        let keeper = Arc::new(adopted.keeper);
        let _ = adopted.named.send(Arc::downgrade(&keeper));
        inner.handover.lock().marks = markers.to_vec();
        inner.state.lock().current = Some(keeper);
        Self(inner)
    }

    /// Tells this keeper, and every keeper after it, to hold the host's tasks for a successor for
    /// the setup's grace once the host is gone: the successor connects to its listener; its lock
    /// (this host's) is held meanwhile; their kept files are in `kept_dir` (see [`Keeper::handover`]).
    pub fn enable_handover(&self, setup: HoldSetup, kept_dir: Option<OwnedFd>) {
        let mut h = self.0.handover.lock();
        if let Some(k) = self.current() {
            k.handover(&setup, kept_dir.as_ref().map(AsFd::as_fd));
        }
        (h.setup, h.kept_dir) = (Some(setup), kept_dir);
    }

    /// Withdraws the handover: the host is stopping, and its tasks end with it however it ends.
    pub fn cancel_handover(&self) {
        self.0.handover.lock().setup = None;
        if let Some(k) = self.current() {
            k.no_handover();
        }
    }

    /// True once [`Keepers::enable_handover`] was called (and not withdrawn).
    pub fn hands_over(&self) -> bool {
        self.0.handover.lock().setup.is_some()
    }

    /// Holds the running task in group `pgid` for a handover (see [`Keeper::hold`]) in the current
    /// keeper, until the group ends; a keeper that replaces it carries it on (with the read ends
    /// told with [`Keepers::read_ends`]).
    pub fn hold(&self, pgid: i32, hold: Hold, fds: Vec<OwnedFd>) {
        self.0.unheld.held(pgid, &hold);
        if let Some(k) = self.current() {
            let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(AsFd::as_fd).collect();
            k.hold(pgid, &hold, &borrowed);
        }
    }

    /// Records that the current keeper goes on holding group `pgid` with `hold` as it handed it
    /// over (protocol 7: nothing is sent). False when it does not (an older keeper, one that
    /// replaced it, or no handover here): the task is to be held again with [`Keepers::hold`].
    pub(crate) fn hold_on(&self, pgid: i32, hold: &Hold) -> bool {
        let on = self.hands_over() && self.current().is_some_and(|k| k.keeps_handed());
        if on {
            self.0.unheld.held(pgid, hold);
        }
        on
    }

    /// Renames the task held in group `pgid` (see [`Keeper::rename`]).
    pub fn rename(&self, pgid: i32, task: &str) {
        self.0.unheld.renamed(pgid, task);
        if let Some(k) = self.current() {
            k.rename(pgid, task);
        }
    }

    /// Lets the keeper hold the tasks for a successor of this host (an upgrade): see
    /// [`Keeper::leave`]. No keeper is started after it. The keeper stays current, so nothing
    /// drops (and so closes) it before the `exec`: the keeper must not start draining the tasks'
    /// output while this image still reads it.
    pub fn leave(&self) {
        let current = {
            let mut st = self.0.state.lock();
            st.stopped = true;
            st.next_start = None;
            self.0.changed.notify_all();
            st.current.clone()
        };
        if let Some(k) = current {
            k.leave();
        }
    }

    fn inner(
        program: &Path,
        marker_prefix: &str,
        cgroup: Option<PathBuf>,
        live: Live,
    ) -> Arc<Inner> {
        Arc::new(Inner {
            program: program.to_owned(),
            marker_prefix: marker_prefix.to_owned(),
            cgroup,
            live,
            handover: Mutex::default(),
            state: Mutex::new(State {
                current: None,
                since: Instant::now(),
                deaths_in_a_row: 0,
                next_start: None,
                stopped: false,
            }),
            changed: Condvar::new(),
            unheld: Unheld::default(),
        })
    }

    /// Has the current keeper start a process; see [`Keeper::spawn`]. A start that finds its
    /// keeper just died waits (up to two seconds) for the replacement and asks it.
    ///
    /// # Errors
    /// [`KeeperSpawnError::Refused`] with the OS's cause, or saying that no keeper runs (and when
    /// the next one starts). Never [`KeeperSpawnError::Gone`]: there is no fallback.
    pub fn spawn(
        &self,
        launch: &Launch,
        streams: KeptStreams<'_>,
        held: Option<HeldFromStart<'_>>,
    ) -> Result<KeptProcess, KeeperSpawnError> {
        let deadline = Instant::now() + REPLACEMENT_WAIT;
        loop {
            let keeper = {
                let st = self.0.state.lock();
                match &st.current {
                    Some(k) => k.clone(),
                    None => return Err(KeeperSpawnError::Refused(st.why_none())),
                }
            };
            match keeper.spawn(launch, streams, held) {
                Ok(p) if p.held => {
                    if let Some(h) = held {
                        self.0.unheld.held(p.pid, h.hold);
                    }
                    return Ok(p);
                }
                Err(KeeperSpawnError::Gone) => {
                    let mut st = self.0.state.lock();
                    while !st.stopped
                        && st.current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &keeper))
                    {
                        if self.0.changed.wait_until(&mut st, deadline).timed_out() {
                            return Err(KeeperSpawnError::Refused(
                                "the keeper died and no other took its place in time: the process was not started".into(),
                            ));
                        }
                    }
                }
                other => return other,
            }
        }
    }

    /// Where second handles of the read ends of the process in group `pgid` are had, should a
    /// keeper that replaces a dead one carry its task (until the group ends).
    pub fn read_ends(&self, pgid: i32, ends: ReadEnds) {
        self.0.unheld.read_ends(pgid, ends);
    }

    /// Calls `tell` with the running tasks a dead keeper held for a successor that the keeper
    /// replacing it could not carry (`unheld`).
    pub fn on_unheld(&self, tell: impl Fn(Vec<String>) + Send + Sync + 'static) {
        self.0.unheld.set(Arc::new(tell));
    }

    /// Tells the current keeper that a process group is gone.
    pub fn group_ended(&self, pgid: i32) {
        self.0.unheld.ended(pgid);
        if let Some(k) = self.current() {
            k.group_ended(pgid);
        }
    }

    /// The pids of the hosts whose tasks the adopted keeper handed over (none without one).
    pub fn predecessors(&self) -> Vec<u32> {
        self.0.handover.lock().hosts()
    }

    /// The current keeper's pid.
    pub fn pid(&self) -> Option<u32> {
        self.current().and_then(|k| k.pid())
    }

    fn current(&self) -> Option<Arc<Keeper>> {
        self.0.state.lock().current.clone()
    }

    /// Stops the current keeper for good (a shutdown: its end starts no other).
    pub fn stop(&self) {
        let current = {
            let mut st = self.0.state.lock();
            st.stopped = true;
            st.next_start = None;
            self.0.changed.notify_all();
            st.current.take()
        };
        if let Some(k) = current {
            k.stop();
        }
    }
}

/// What a keeper of the service in `slot` calls should it die, and where it is named once it is
/// current.
fn death_watch(
    slot: Arc<OnceLock<Weak<Inner>>>,
) -> (
    impl FnOnce() + Send + 'static,
    std::sync::mpsc::Sender<Weak<Keeper>>,
) {
    let (tx, rx) = std::sync::mpsc::channel::<Weak<Keeper>>();
    let died = move || {
        if let Ok(me) = rx.recv()
            && let Some(inner) = slot.get().and_then(Weak::upgrade)
        {
            on_death(&inner, &me);
        }
    };
    (died, tx)
}

/// A keeper a gone predecessor left, taken back before this host's services exist.
pub struct AdoptedKeeper {
    keeper: Keeper,
    slot: Arc<OnceLock<Weak<Inner>>>,
    named: std::sync::mpsc::Sender<Weak<Keeper>>,
}

impl std::fmt::Debug for AdoptedKeeper {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdoptedKeeper")
            .field("pid", &self.keeper.pid())
            .finish()
    }
}

/// Takes the dead keeper out of service and starts another, at once or after the backoff.
fn on_death(inner: &Arc<Inner>, dead: &Weak<Keeper>) {
    let retired;
    let delay;
    {
        let mut st = inner.state.lock();
        let still_current = match (&st.current, dead.upgrade()) {
            (Some(current), Some(dead)) => Arc::ptr_eq(current, &dead),
            _ => false,
        };
        if st.stopped || !still_current {
            return;
        }
        retired = st.current.take();
        if st.since.elapsed() >= STABLE {
            st.deaths_in_a_row = 0;
        }
        st.deaths_in_a_row += 1;
        delay = backoff(st.deaths_in_a_row);
        st.next_start = Some(Instant::now() + delay);
        inner.changed.notify_all();
    }
    // Dropped after the locks: dropping a keeper waits for its process to exit.
    drop(retired);
    start_after(inner, delay);
}

/// Starts the next keeper once `delay` has passed (on a thread of its own when there is a delay).
fn start_after(inner: &Arc<Inner>, delay: Duration) {
    if delay.is_zero() {
        start_now(inner);
        return;
    }
    let weak = Arc::downgrade(inner);
    let started = std::thread::Builder::new()
        .name("taskhost-keeper-restart".into())
        .spawn(move || {
            std::thread::sleep(delay);
            if let Some(inner) = weak.upgrade() {
                start_now(&inner);
            }
        });
    if let Err(e) = started {
        tracing::error!(error = %e, "cannot wait to restart the keeper; starting it now");
        start_now(inner);
    }
}

/// Starts a keeper and tells it every live group, and has it carry every task a dead one held,
/// while no group can end unnoticed: the live map is held, so a group that ends after it was told
/// of is forgotten by the new keeper, not the dead one. A keeper that cannot start is tried again
/// after the backoff. Who asked is told the tasks it could not carry.
fn start_now(inner: &Arc<Inner>) {
    let mut unheld = None;
    let retry = {
        let live = inner.live.lock();
        let mut st = inner.state.lock();
        if st.stopped || st.current.is_some() {
            return;
        }
        let (died, tx) = death_watch(Arc::new(OnceLock::from(Arc::downgrade(inner))));
        match Keeper::start(
            &inner.program,
            &inner.marker_prefix,
            inner.cgroup.as_deref(),
            died,
        ) {
            Ok(keeper) => {
                let keeper = Arc::new(keeper);
                for &g in live.values() {
                    keeper.watch(g);
                }
                inner.handover.lock().tell(&keeper);
                unheld = inner.unheld.carry(&keeper);
                let _ = tx.send(Arc::downgrade(&keeper));
                st.current = Some(keeper);
                st.since = Instant::now();
                st.next_start = None;
                inner.changed.notify_all();
                None
            }
            Err(e) => {
                st.deaths_in_a_row += 1;
                let delay = backoff(st.deaths_in_a_row).max(FIRST_BACKOFF);
                st.next_start = Some(Instant::now() + delay);
                tracing::error!(program = %inner.program.display(), error = %e, "cannot start the keeper; task starts are refused until one runs");
                Some(delay)
            }
        }
    };
    super::handover::unheld::tell(unheld);
    if let Some(delay) = retry {
        start_after(inner, delay);
    }
}
