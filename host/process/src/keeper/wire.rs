//! What the host and its keeper say to each other: serde types in `postcard`'s binary format, each in
//! a frame of a little-endian `u32` length and that many bytes. Decoding never panics: a short or
//! malformed body is a [`WireError`]. The descriptors a message carries go beside its frame
//! ([`super::fds`]).

use std::ffi::OsString;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::os_bytes;
use crate::TtySize;
use crate::exit::Exit;

/// The protocol this build's keeper speaks. A keeper is served by hosts of other builds (a host
/// upgraded in place adopts its predecessor's keeper, and a keeper replaced after a death runs the
/// binary on disk), so messages are only ever appended, and a host sends a later protocol's
/// requests only to a keeper that speaks it: one it started itself, or one whose `Handed` report
/// says so ([`Report::encode_handed`]). 1: the first handover; 2: `Rename`, `SpawnHeld`, the
/// protocol after `Handed`; 3: `KeptDir`, `Successor`, and held streams kept by name (their kept
/// files do not travel, so the keeper and a successor hold two descriptors per held task, not
/// four); 4: `Carry`, a dead keeper's held task carried on by the keeper that replaced it.
pub(crate) const PROTOCOL: u32 = 4;

/// Largest frame either side accepts (a spawn request carries a command and an environment, which
/// the kernel caps far below this).
pub(crate) const MAX_FRAME: usize = 64 << 20;

/// A malformed frame.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// The body is not a message this side knows (truncated, an unknown variant, a bad field).
    #[error("malformed frame: {0}")]
    Malformed(String),
    /// The frame is longer than the maximum (64 MiB).
    #[error("frame of {0} bytes is too long")]
    TooLong(usize),
    /// A request said it carries more descriptors than arrived.
    #[error("a request's descriptors are missing")]
    MissingDescriptors,
}

/// Where one of a child's standard streams goes.
#[derive(Debug, PartialEq, Eq, Clone, Copy, Serialize, Deserialize)]
pub(crate) enum Slot {
    /// `/dev/null`.
    Null,
    /// The next descriptor carried with the request.
    Passed,
}

/// What a child's standard streams are.
#[derive(Debug, PartialEq, Eq, Clone, Copy, Serialize, Deserialize)]
pub(crate) enum Streams {
    /// Stdin, stdout and stderr as the slots say; the child leads a process group of its own.
    Slots([Slot; 3]),
    /// A fresh pseudo-terminal of this size (columns, rows), whose master the keeper hands back;
    /// the child leads a session of its own with that terminal as its controlling one.
    Terminal(TtySize),
}

/// What to run: a resolved program, its arguments, its whole environment and its directory. Paths
/// and strings travel as their bytes (they need not be UTF-8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Launch {
    /// The program, as `execve` takes it (resolved on the child's `PATH` by the host).
    #[serde(
        serialize_with = "os_bytes::path",
        deserialize_with = "os_bytes::to_path"
    )]
    pub program: PathBuf,
    /// The arguments after the program.
    #[serde(
        serialize_with = "os_bytes::list",
        deserialize_with = "os_bytes::to_list"
    )]
    pub args: Vec<OsString>,
    /// The whole environment.
    #[serde(
        serialize_with = "os_bytes::pairs",
        deserialize_with = "os_bytes::to_pairs"
    )]
    pub env: Vec<(OsString, OsString)>,
    /// The working directory (the spawner's when `None`).
    #[serde(
        serialize_with = "os_bytes::optional_path",
        deserialize_with = "os_bytes::to_optional_path"
    )]
    pub cwd: Option<PathBuf>,
}

/// From the host to the keeper.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Request {
    /// Spawn `launch` with its streams.
    Spawn {
        id: u64,
        launch: Launch,
        streams: Streams,
    },
    /// A process group the keeper did not spawn (a dead keeper's): end it if the host dies.
    Watch { pgid: i32 },
    /// A process group that is gone: never signal that number again (and let go of what was held
    /// for it).
    Forget { pgid: i32 },
    /// What the keeper holds for the running task in group `pgid` so that a successor of the host
    /// can take it over: its output's read ends (with their kept files, but for those kept by
    /// name) and its input, beside the frame in the order [`HeldStream`] says, then the input.
    Hold { pgid: i32, hold: Hold },
    /// When the host is gone, keep its held tasks for `grace_ms` and hand them to the successor
    /// that connects to the listener beside the frame (then the host's lock, held meanwhile, then
    /// the host's listening sockets, one per address in `listens`).
    Handover {
        grace_ms: u64,
        host: i64,
        listens: Vec<String>,
    },
    /// Also end processes whose marker starts with `prefix` when the host is gone (a successor
    /// marks its own tasks with its own prefix).
    Mark { prefix: String },
    /// The host is stopping: no successor will come, so nothing is held for one (the handover
    /// asked for before is dropped).
    NoHandover,
    // Protocol 2 from here on: a keeper of protocol 1 is sent none of them.
    /// The task held in group `pgid` is now named `task` (a foreground command that became a
    /// task).
    Rename { pgid: i32, task: String },
    /// As `Spawn`, and hold the process for a successor of the host from its start, as a `Hold`
    /// request would: its descriptors travel after the streams' (a terminal's read end is the
    /// keeper's own master, so it does not travel).
    SpawnHeld {
        id: u64,
        launch: Launch,
        streams: Streams,
        hold: Hold,
    },
    // Protocol 3 from here on.
    /// The host's kept-output directory travels beside the frame: from now on a held stream that
    /// names a `file` and is not `kept` is kept by that name in it (see [`HeldStream::by_name`]).
    /// It replaces a directory told before.
    KeptDir,
    /// A successor's first frame, before the keeper hands it anything: it speaks `protocol`, so
    /// from 3 on the keeper hands over the kept files it holds by name, by name (a keeper of an
    /// earlier protocol reads this as a request it does not know, and ignores it).
    Successor { protocol: u32 },
    // Protocol 4 from here on.
    /// Hold the running task in group `pgid`, which this keeper did not spawn (a dead keeper's,
    /// whose children are the host's now), as request `id`, as a `Hold` would: its descriptors
    /// travel beside the frame in the order [`Hold::descriptors`] says. Its leader is not this
    /// keeper's child, so its exit is watched, not reaped.
    Carry { id: u64, pgid: i32, hold: Hold },
}

/// What the keeper holds of one task for a handover, and what it hands over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    /// The task's id in the registry.
    pub task: String,
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

    /// This hold as a keeper told the kept directory ([`Request::KeptDir`]) takes it: every kept
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
/// [`super::Keeper::hold`]): the hold, and its descriptors, less a terminal's read end, which is the
/// master the keeper opens. Held this way, no crash of the host finds the process started and not
/// yet held.
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
    /// True when its kept file is kept by its name in the directory the host told
    /// ([`Request::KeptDir`]), not by a descriptor that travelled with it.
    pub(crate) fn by_name(&self) -> bool {
        !self.kept && !self.file.is_empty()
    }
}

/// From the keeper to the host.
#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum Report {
    /// Request `id` runs as process `pid` (the leader of group `pid`); with `master`, the
    /// terminal's master descriptor goes beside the frame.
    Spawned { id: u64, pid: i32, master: bool },
    /// Request `id` could not be started; the OS's cause.
    Refused { id: u64, cause: String },
    /// The process of request `id` has exited and been reaped.
    Exited { id: u64, exit: Exit },
    /// To a successor: a task of the host that is gone, held for it (descriptors beside, as for
    /// [`Request::Hold`]); `exit` once its process was reaped.
    Adopt {
        id: u64,
        pgid: i32,
        exit: Option<Exit>,
        hold: Hold,
    },
    /// To a successor, after the last [`Report::Adopt`]: the gone host's row, the marker prefixes
    /// the keeper ends, the next request id to use, and beside the frame its lock and its
    /// listening sockets (one per address in `listens`).
    Handed {
        host: i64,
        markers: Vec<String>,
        next_id: u64,
        listens: Vec<String>,
    },
}

/// `message` in a frame: its length, then its body.
fn frame(message: &impl Serialize) -> Vec<u8> {
    let mut frame = vec![0; 4];
    // A Vec grows as needed: serializing into one cannot fail for these types.
    frame = postcard::to_extend(message, frame).unwrap_or_else(|_| vec![0; 4]);
    let len = u32::try_from(frame.len() - 4).unwrap_or(u32::MAX);
    frame[..4].copy_from_slice(&len.to_le_bytes());
    frame
}

fn decode<'a, T: Deserialize<'a>>(body: &'a [u8]) -> Result<T, WireError> {
    postcard::from_bytes(body).map_err(|e| WireError::Malformed(e.to_string()))
}

impl Request {
    /// The request that starts `launch` as `id`: held for a successor from its start with `held`,
    /// whose descriptors then follow the streams' in `fds`.
    pub(crate) fn start<'a>(
        id: u64,
        launch: &Launch,
        streams: Streams,
        held: Option<HeldFromStart<'a>>,
        fds: &mut Vec<BorrowedFd<'a>>,
    ) -> Self {
        let launch = launch.clone();
        match held {
            Some(h) => {
                fds.extend(h.fds.iter().copied());
                Self::SpawnHeld {
                    id,
                    launch,
                    streams,
                    hold: h.hold.clone(),
                }
            }
            None => Self::Spawn {
                id,
                launch,
                streams,
            },
        }
    }

    /// The frame (a spawn's descriptors, one per [`Slot::Passed`], go beside it).
    pub(crate) fn encode(&self) -> Vec<u8> {
        frame(self)
    }

    /// Decodes a frame's body (without its length).
    pub(crate) fn decode(body: &[u8]) -> Result<Self, WireError> {
        decode(body)
    }
}

impl Report {
    /// The frame.
    pub(crate) fn encode(&self) -> Vec<u8> {
        frame(self)
    }

    /// The frame of a `Handed` report, the keeper's [`PROTOCOL`] after the message: a host of
    /// protocol 1 reads the message and ignores what follows it.
    pub(crate) fn encode_handed(&self) -> Vec<u8> {
        frame(&(self, PROTOCOL))
    }

    /// Decodes a frame's body, and the protocol that follows a `Handed` report's message (1 when
    /// nothing follows: a keeper of protocol 1).
    pub(crate) fn decode_handed(body: &[u8]) -> Result<(Self, u32), WireError> {
        let malformed = |e: postcard::Error| WireError::Malformed(e.to_string());
        let (report, rest) = postcard::take_from_bytes(body).map_err(malformed)?;
        let protocol = match rest {
            [] => 1,
            rest => postcard::from_bytes(rest).map_err(malformed)?,
        };
        Ok((report, protocol))
    }

    /// Decodes a frame's body (without its length).
    pub(crate) fn decode(body: &[u8]) -> Result<Self, WireError> {
        decode(body)
    }
}
