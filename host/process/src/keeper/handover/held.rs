//! What the keeper holds of its host's tasks for a handover (the keeper's side).

use std::os::fd::OwnedFd;
use std::time::Duration;

use super::hold::{HeldStream, Hold};
use super::kept_file::{KeptDir, KeptFile};
use crate::exit::Exit;

/// What a host asked for with [`crate::keeper::wire::Request::Handover`].
pub(crate) struct Setup {
    pub(crate) grace: Duration,
    pub(crate) host: i64,
    pub(crate) listener: OwnedFd,
    pub(crate) lock: OwnedFd,
    /// The host's listening sockets by address: clients that connect while no host runs wait in
    /// their backlog for the successor.
    pub(crate) listens: Vec<(String, OwnedFd)>,
}

/// One output stream of a held task.
pub(crate) struct HeldFds {
    pub(crate) read: OwnedFd,
    pub(crate) file: KeptFile,
    /// The file's length once draining started (`None` before: the host writes it).
    pub(crate) len: Option<u64>,
    /// The file holds the head and the latest output: drained output stays in memory.
    pub(crate) rolled: bool,
    /// Its end was read (or it failed).
    pub(crate) ended: bool,
}

impl HeldFds {
    pub(crate) fn new(read: OwnedFd, file: KeptFile) -> Self {
        Self {
            read,
            file,
            len: None,
            rolled: false,
            ended: false,
        }
    }
}

/// What the keeper holds of a task of its host.
pub(crate) struct Held {
    /// The host's request id of the task's process.
    pub(crate) id: u64,
    pub(crate) hold: Hold,
    pub(crate) streams: Vec<HeldFds>,
    pub(crate) stdin: Option<OwnedFd>,
    /// Set when the process was reaped.
    pub(crate) exit: Option<Exit>,
}

impl Held {
    /// This task as held on after a handover to a successor (which took what was drained and
    /// reads the output now): nothing pending, and draining starts afresh at the next handover.
    pub(crate) fn handed_on(&mut self) {
        for s in &mut self.streams {
            s.len = None;
            s.rolled = false;
            s.ended = false;
        }
        self.hold
            .streams
            .iter_mut()
            .for_each(HeldStream::drained_taken);
    }
}

/// What a host's tasks are held with for its successor.
pub struct HoldSetup {
    /// How long the keeper waits for a successor, ms.
    pub grace_ms: u64,
    /// The host's row in the state database.
    pub host: i64,
    /// The listening socket a successor connects to.
    pub listener: OwnedFd,
    /// The host's lock in the state directory.
    pub lock: OwnedFd,
    /// The host's own listening sockets by address (`unix:PATH`, `http://...`), kept open for
    /// the successor.
    pub listens: Vec<(String, OwnedFd)>,
}

/// What is held of spawn `id`: `hold`, with `fds` in the order [`Hold::descriptors`] says, its
/// streams kept by name kept in `kept_dir`. `None` when a descriptor is missing.
pub(crate) fn held(
    id: u64,
    hold: Hold,
    fds: Vec<OwnedFd>,
    kept_dir: Option<&KeptDir>,
) -> Option<Held> {
    let mut fds = fds.into_iter();
    let mut streams = Vec::new();
    for s in &hold.streams {
        let read = fds.next()?;
        let file = match (s.kept, kept_dir) {
            (true, _) => KeptFile::Open(std::fs::File::from(fds.next()?)),
            (false, Some(dir)) if s.by_name() => KeptFile::named(dir, &s.file),
            (false, _) => KeptFile::None,
        };
        streams.push(HeldFds::new(read, file));
    }
    let stdin = if hold.stdin { fds.next() } else { None };
    Some(Held {
        id,
        hold,
        streams,
        stdin,
        exit: None,
    })
}
