//! What the host tells its keeper for a handover: the setup, each task held, the markers of a
//! successor, the handover withdrawn; and letting go of the keeper for an upgrade.

use std::net::Shutdown;
use std::os::fd::{AsFd, BorrowedFd};

use super::client::Keeper;
use super::wire::Request;

impl Keeper {
    /// Asks the keeper to hold the running task in group `pgid` for a handover, with the
    /// descriptors `hold` describes, in its order.
    pub fn hold(&self, pgid: i32, hold: &super::wire::Hold, fds: &[BorrowedFd<'_>]) {
        let frame = Request::Hold {
            pgid,
            hold: hold.clone(),
        };
        self.write(&frame.encode(), fds);
    }

    /// Asks the keeper to hand the held tasks to a successor that connects to the setup's listener
    /// within its grace once this host is gone, holding the host's lock and listening sockets
    /// meanwhile.
    pub fn handover(&self, setup: &super::held::HoldSetup) {
        let frame = Request::Handover {
            grace_ms: setup.grace_ms,
            host: setup.host,
            listens: setup.listens.iter().map(|(a, _)| a.clone()).collect(),
        };
        let mut fds = vec![setup.listener.as_fd(), setup.lock.as_fd()];
        fds.extend(setup.listens.iter().map(|(_, fd)| fd.as_fd()));
        self.write(&frame.encode(), &fds);
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

    /// Lets go of the keeper for a successor of this host (an upgrade): its side of the socket is
    /// closed, so the keeper holds the tasks for the successor, and the keeper is neither awaited
    /// nor ended.
    pub fn leave(&self) {
        let mut open = self.open.lock();
        *open = false;
        self.pending.lock().stopped = true;
        let _ = self.socket.shutdown(Shutdown::Both);
        drop(self.child.lock().take());
    }
}
