//! What the keeper holds of a task for a handover, as it travels: the typed name it is held for
//! ([`HeldAs`], protocol 5), the process's number and settings, and its output streams. A peer of
//! an earlier protocol knew a hold by a string ([`NamedHold`]); the one conversion between the two
//! is here, used only on the wire to such a peer.

use std::os::fd::BorrowedFd;

use serde::{Deserialize, Serialize};

/// Whom the keeper holds a process for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum HeldAs {
    /// A task, by its registry id (`bash-3`).
    Task(String),
    /// A foreground command that may become a task, by the id of its row among the host's
    /// foreground records (a successor makes it a task of its caller's after a crash).
    Foreground(u64),
}

/// How protocols 1 to 4 named a foreground command's hold: this, then its row's id.
const FOREGROUND_NAME: &str = "foreground:";

impl HeldAs {
    /// The task's id, when it is held for a task.
    pub fn task(&self) -> Option<&str> {
        match self {
            HeldAs::Task(id) => Some(id),
            HeldAs::Foreground(_) => None,
        }
    }

    /// The name a peer of protocol 4 or earlier knows it by.
    fn to_name(&self) -> String {
        match self {
            HeldAs::Task(id) => id.clone(),
            HeldAs::Foreground(id) => format!("{FOREGROUND_NAME}{id}"),
        }
    }

    /// What a name a peer of protocol 4 or earlier sent means.
    fn from_name(name: String) -> Self {
        let foreground = name
            .strip_prefix(FOREGROUND_NAME)
            .and_then(|id| id.parse().ok());
        match foreground {
            Some(id) => HeldAs::Foreground(id),
            None => HeldAs::Task(name),
        }
    }
}

/// What the keeper holds of one task for a handover, and what it hands over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// Whom it is held for.
    pub held_as: HeldAs,
    /// The host's number for the process (its marker's).
    pub n: u64,
    /// Bytes of each stream kept in memory.
    pub tail_bytes: u64,
    /// The kill's grace, ms.
    pub grace_ms: u64,
    /// Its output is one terminal's master (which also takes its input).
    pub terminal: bool,
    /// Its output streams, stdout first.
    pub streams: Vec<HeldStream>,
    /// A write end of its stdin travels last.
    pub stdin: bool,
}

/// A [`Hold`] as protocols 1 to 4 carry it: named by a string, the task's id or `foreground:ID`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NamedHold {
    task: String,
    n: u64,
    tail_bytes: u64,
    grace_ms: u64,
    terminal: bool,
    streams: Vec<HeldStream>,
    stdin: bool,
}

impl From<Hold> for NamedHold {
    fn from(h: Hold) -> Self {
        Self {
            task: h.held_as.to_name(),
            n: h.n,
            tail_bytes: h.tail_bytes,
            grace_ms: h.grace_ms,
            terminal: h.terminal,
            streams: h.streams,
            stdin: h.stdin,
        }
    }
}

impl From<NamedHold> for Hold {
    fn from(h: NamedHold) -> Self {
        Self {
            held_as: HeldAs::from_name(h.task),
            n: h.n,
            tail_bytes: h.tail_bytes,
            grace_ms: h.grace_ms,
            terminal: h.terminal,
            streams: h.streams,
            stdin: h.stdin,
        }
    }
}

impl Hold {
    /// How many descriptors travel with it: each stream's read end and kept file, then the input.
    pub(crate) fn descriptors(&self) -> usize {
        self.streams
            .iter()
            .map(|s| 1 + usize::from(s.kept))
            .sum::<usize>()
            + usize::from(self.stdin)
    }

    /// How many descriptors travel with it beside a `Spawn`: as [`Hold::descriptors`], less a
    /// terminal's read end (the master the keeper opens itself).
    pub(crate) fn descriptors_at_start(&self) -> usize {
        self.descriptors() - usize::from(self.terminal && !self.streams.is_empty())
    }

    /// This hold as a keeper told the kept directory (`Request::KeptDir`) takes it: every kept
    /// stream that names its file is kept by that name, and its file is left out of `fds` (the
    /// hold's descriptors in its order; a terminal's read end left out when `at_start`).
    pub(crate) fn by_name<'a>(
        &self,
        fds: &[BorrowedFd<'a>],
        at_start: bool,
    ) -> (Hold, Vec<BorrowedFd<'a>>) {
        let mut hold = self.clone();
        let mut fds = fds.iter().copied();
        let mut kept_fds = Vec::new();
        for (i, s) in hold.streams.iter_mut().enumerate() {
            if !(at_start && self.terminal && i == 0) {
                kept_fds.extend(fds.next());
            }
            if s.kept {
                let file = fds.next();
                if s.file.is_empty() {
                    kept_fds.extend(file);
                } else {
                    s.kept = false;
                }
            }
        }
        kept_fds.extend(fds);
        (hold, kept_fds)
    }
}

/// What the keeper holds of a process from its start, for a successor of the host (see
/// [`crate::keeper::Keeper::hold`]): the hold, and its descriptors, less a terminal's read end,
/// which is the master the keeper opens. Held this way, no crash of the host finds the process
/// started and not yet held.
#[derive(Clone, Copy)]
pub struct HeldFromStart<'a> {
    /// What is held, under which task's name.
    pub hold: &'a Hold,
    /// Its descriptors in the order of the hold's streams, each read end then its kept file (a
    /// terminal's read end left out).
    pub fds: &'a [BorrowedFd<'a>],
}

/// One output stream held for a handover: its read end travels beside the frame, then its kept
/// file when `kept`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeldStream {
    /// The kept file's cap (past it the file holds the head and the latest output).
    pub cap: u64,
    /// A kept file travels after the read end. Not set, with a `file` named, to a keeper told the
    /// kept directory (protocol 3): the file is kept by its name there (`HeldStream::by_name`).
    pub kept: bool,
    /// The kept file's name in the host's kept directory (its record may not name it yet).
    pub file: String,
    /// Output the keeper drained while no host ran and could not write to the file (the file is
    /// past its cap), oldest first.
    pub pending: Vec<u8>,
    /// Output drained while no host ran that was dropped (beyond what the keeper keeps in memory).
    pub dropped: u64,
}

impl HeldStream {
    /// Forgets what the keeper drained while no host ran: a successor took it.
    pub(crate) fn drained_taken(&mut self) {
        self.pending = Vec::new();
        self.dropped = 0;
    }

    /// True when its kept file is kept by its name in the directory the host told
    /// (`Request::KeptDir`), not by a descriptor that travelled with it.
    pub(crate) fn by_name(&self) -> bool {
        !self.kept && !self.file.is_empty()
    }
}
