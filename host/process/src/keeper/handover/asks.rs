//! What the host tells its keeper for a handover: the setup, each task held, the markers of a
//! successor, the handover withdrawn; and letting go of the keeper for an upgrade.

use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::Ordering;

use super::hold::Hold;
use crate::keeper::client::Keeper;
use crate::keeper::wire::Request;

impl Keeper {
    /// Whether the keeper speaks `protocol` (`wire::PROTOCOL`) or a later one: a keeper this host
    /// started does; one adopted from a predecessor does when its `Handed` report said
    /// so (a keeper of protocol 1 never does).
    pub(crate) fn speaks(&self, protocol: u32) -> bool {
        self.protocol() >= protocol
    }

    /// Whether this keeper, adopted from a predecessor, goes on holding the tasks it handed over
    /// (protocol 7, [`crate::keeper::wire::KEEPS_HOLDS`]).
    pub(crate) fn keeps_handed(&self) -> bool {
        self.adopted_pid.is_some() && self.speaks(crate::keeper::wire::KEEPS_HOLDS)
    }

    /// The keeper's protocol: [`crate::keeper::wire::PROTOCOL`] for one this host started, what
    /// its `Handed` report said for one adopted from a predecessor.
    pub(crate) fn protocol(&self) -> u32 {
        self.pending.lock().protocol
    }

    /// Asks the keeper to hold the running task in group `pgid` for a handover, with the
    /// descriptors `hold` describes, in its order.
    pub fn hold(&self, pgid: i32, hold: &Hold, fds: &[BorrowedFd<'_>]) {
        let (hold, fds) = match self.kept_by_name.load(Ordering::Acquire) {
            true => hold.by_name(fds, false),
            false => (hold.clone(), fds.to_vec()),
        };
        let frame = Request::Hold { pgid, hold }.for_protocol(self.protocol());
        self.write(&frame.encode(), &fds);
    }

    /// Asks the keeper to carry the running task in group `pgid`, which a dead keeper held, as it
    /// holds its own ([`Keeper::hold`]): `hold` keeps its kept files by name, and `fds` are its
    /// read ends (and input). False when this keeper cannot (a keeper of protocol 3 or earlier,
    /// one not told the kept directory, or one that is gone).
    pub fn carry(&self, pgid: i32, hold: &Hold, fds: &[BorrowedFd<'_>]) -> bool {
        if !self.speaks(4) || !self.kept_by_name.load(Ordering::Acquire) {
            return false;
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let frame = Request::Carry {
            id,
            pgid,
            hold: hold.clone(),
        }
        .for_protocol(self.protocol());
        self.write(&frame.encode(), fds)
    }

    /// Tells the keeper that the task it holds in group `pgid` is now named `task`.
    pub fn rename(&self, pgid: i32, task: &str) {
        if !self.speaks(2) {
            return;
        }
        let frame = Request::Rename {
            pgid,
            task: task.to_owned(),
        };
        self.write(&frame.encode(), &[]);
    }

    /// Asks the keeper to hand the held tasks to a successor that connects to the setup's listener
    /// within its grace once this host is gone, holding the host's lock and listening sockets
    /// meanwhile. A keeper of protocol 3 is also told `kept_dir`, the host's kept-output
    /// directory: from then on the kept files of the tasks it holds go to it by name.
    pub fn handover(&self, setup: &super::held::HoldSetup, kept_dir: Option<BorrowedFd<'_>>) {
        let frame = Request::Handover {
            grace_ms: setup.grace_ms,
            host: setup.host,
            listens: setup.listens.iter().map(|(a, _)| a.clone()).collect(),
        };
        let mut fds = vec![setup.listener.as_fd(), setup.lock.as_fd()];
        fds.extend(setup.listens.iter().map(|(_, fd)| fd.as_fd()));
        self.write(&frame.encode(), &fds);
        if let Some(dir) = kept_dir.filter(|_| self.speaks(3))
            && self.write(&Request::KeptDir.encode(), &[dir])
        {
            self.kept_by_name.store(true, Ordering::Release);
        }
    }

    /// Tells the keeper that no successor will come (the host is stopping).
    pub fn no_handover(&self) {
        self.write(&Request::NoHandover.encode(), &[]);
    }

    /// Asks the keeper to end the processes marked with `prefix` too when the host is gone.
    pub fn mark(&self, prefix: &str) {
        let frame = Request::Mark {
            prefix: prefix.to_owned(),
        };
        self.write(&frame.encode(), &[]);
    }

    /// Lets go of the keeper for a successor of this host (an upgrade, by `exec`): nothing more is
    /// asked of it, its end is no death, and it is neither awaited nor ended. The socket stays open
    /// until the `exec` closes it (it is close-on-exec): the keeper starts draining the tasks'
    /// output only once this process's pumps are gone with its image, so no byte is read twice or
    /// written over.
    pub fn leave(&self) {
        *self.open.lock() = false;
        self.pending.lock().stopped = true;
        drop(self.child.lock().take());
    }
}
