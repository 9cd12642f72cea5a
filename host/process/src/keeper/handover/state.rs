//! What every keeper of a host is told for a handover (the host's side): the setup and the extra
//! marker prefixes. The tasks held are not kept here (the host would hold a second copy of every
//! task's descriptors for a keeper that may never die): a keeper that replaces a dead one carries
//! them with second handles made of the host's own read ends when it starts (`unheld.rs`).

use std::os::fd::{AsFd, OwnedFd};

use super::held::HoldSetup;
use crate::keeper::client::Keeper;

/// A host's handover as every keeper of it is told.
#[derive(Default)]
pub(crate) struct HandoverState {
    /// The grace, this host's row, the successors' listener and this host's lock.
    pub(crate) setup: Option<HoldSetup>,
    /// Marker prefixes of processes to end with the host besides the keeper's own.
    pub(crate) marks: Vec<String>,
    /// The host's kept-output directory, told with the setup (see [`Keeper::handover`]).
    pub(crate) kept_dir: Option<OwnedFd>,
}

impl HandoverState {
    /// The pids of the hosts whose processes the marks name (`<host pid>:<service>:`): a
    /// handed-over task was started by one of them.
    pub(crate) fn hosts(&self) -> Vec<u32> {
        self.marks
            .iter()
            .filter_map(|m| m.split(':').next()?.parse().ok())
            .collect()
    }

    /// Tells `keeper` everything (a new keeper, or the setup changed).
    pub(crate) fn tell(&self, keeper: &Keeper) {
        if let Some(setup) = &self.setup {
            keeper.handover(setup, self.kept_dir.as_ref().map(AsFd::as_fd));
        }
        for prefix in &self.marks {
            keeper.mark(prefix);
        }
    }
}
