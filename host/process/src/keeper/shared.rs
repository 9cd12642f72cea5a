//! What the keeper's spawning thread, its reaper and its handover share.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;

use parking_lot::{Condvar, Mutex};

use super::fds;
use super::handover::held::{Held, Setup};
use super::handover::kept_file::KeptDir;
use super::wire::Report;

/// What the spawning thread and the reaping thread share.
pub(crate) struct Shared {
    pub(crate) state: Mutex<State>,
    pub(crate) spawned: Condvar,
}

/// Spawns and reaps both happen under this lock, so a child is never reaped before its spawn is
/// registered, and a child whose `exec` failed is reaped by the spawn that reports the failure (std
/// waits for it, and would panic if the reaper had taken it first).
pub(crate) struct State {
    /// The host's socket, written under this lock so that a process's `Spawned` precedes its `Exited`.
    pub(crate) out: UnixStream,
    /// Request ids of the running children.
    pub(crate) ids: HashMap<i32, u64>,
    /// Children spawned so far (the reaper waits for this to change when it has none).
    pub(crate) count: u64,
    /// Set once the host cannot be written to.
    pub(crate) host_gone: bool,
    /// What the host holds here for a handover, by process group.
    pub(crate) held: HashMap<i32, Held>,
    /// Set by the host when its tasks are to be handed to a successor.
    pub(crate) handover: Option<Setup>,
    /// The marker prefixes whose processes are ended with the host.
    pub(crate) markers: Vec<String>,
    /// Above every request id seen (a successor goes on from it).
    pub(crate) next_id: u64,
    /// The host's kept-output directory, where streams held by name are kept.
    pub(crate) kept_dir: Option<KeptDir>,
    /// The leaders of the tasks carried for a dead keeper (not this one's children), watched
    /// for their exits (`carried.rs`).
    pub(crate) carried: Vec<i32>,
    /// A thread watches `carried`.
    pub(crate) watching: bool,
}

impl State {
    pub(crate) fn report(&mut self, report: &Report) {
        self.report_with(report, &[]);
    }

    pub(crate) fn report_with(&mut self, report: &Report, fds: &[BorrowedFd<'_>]) {
        if !self.host_gone && fds::send(self.out.as_fd(), &report.encode(), fds).is_err() {
            self.host_gone = true;
        }
    }
}
