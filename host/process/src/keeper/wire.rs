//! What the host and its keeper say to each other: serde types in `postcard`'s binary format, each in
//! a frame of a little-endian `u32` length and that many bytes. Decoding never panics: a short or
//! malformed body is a [`WireError`]. The descriptors a message carries go beside its frame
//! ([`super::fds`]).

use std::ffi::OsString;
use std::os::fd::BorrowedFd;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::HeldFromStart;
use super::handover::hold::{Hold, NamedHold};
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
/// four); 4: `Carry`, a dead keeper's held task carried on by the keeper that replaced it; 5: holds
/// typed ([`super::HeldAs`]) in `Hold`, `SpawnHeld`, `Carry` and `Adopt`, where earlier protocols
/// named them by a string (their variants, `…Named`, are still read and sent to such a peer:
/// [`Request::for_protocol`], [`Request::typed`], [`Report::for_protocol`], [`Report::typed`]); 6:
/// `NoRoom`, a keeper's refusal of a successor whose open-file limit cannot hold the tasks'
/// descriptors (an earlier successor is only disconnected); 7: the keeper goes on holding what it
/// handed to a successor of protocol 7, which does not hold its tasks again (an earlier one does,
/// and the keeper forgets its holds for it), and says its pid after `Handed`'s protocol.
pub(crate) const PROTOCOL: u32 = 7;

/// The first protocol that reads [`Report::NoRoom`].
pub(crate) const NO_ROOM: u32 = 6;

/// The first protocol whose keeper goes on holding the tasks it handed over.
pub(crate) const KEEPS_HOLDS: u32 = 7;

/// The first protocol whose holds are typed.
const TYPED_HOLDS: u32 = 5;

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
    /// `Hold` as protocols 1 to 4 send it.
    HoldNamed { pgid: i32, hold: NamedHold },
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
    /// `SpawnHeld` as protocols 2 to 4 send it.
    SpawnHeldNamed {
        id: u64,
        launch: Launch,
        streams: Streams,
        hold: NamedHold,
    },
    // Protocol 3 from here on.
    /// The host's kept-output directory travels beside the frame: from now on a held stream that
    /// names a `file` and is not `kept` is kept by that name in it (see [`super::HeldStream::by_name`]).
    /// It replaces a directory told before.
    KeptDir,
    /// A successor's first frame, before the keeper hands it anything: it speaks `protocol`, so
    /// from 3 on the keeper hands over the kept files it holds by name, by name (a keeper of an
    /// earlier protocol reads this as a request it does not know, and ignores it).
    Successor { protocol: u32 },
    // Protocol 4 from here on.
    /// `Carry` as protocol 4 sends it.
    CarryNamed { id: u64, pgid: i32, hold: NamedHold },
    // Protocol 5 from here on: holds typed.
    /// What the keeper holds for the running task in group `pgid` so that a successor of the host
    /// can take it over: its output's read ends (with their kept files, but for those kept by
    /// name) and its input, beside the frame in the order [`super::HeldStream`] says, then the
    /// input.
    Hold { pgid: i32, hold: Hold },
    /// As `Spawn`, and hold the process for a successor of the host from its start, as a `Hold`
    /// request would: its descriptors travel after the streams' (a terminal's read end is the
    /// keeper's own master, so it does not travel).
    SpawnHeld {
        id: u64,
        launch: Launch,
        streams: Streams,
        hold: Hold,
    },
    /// Hold the running task in group `pgid`, which this keeper did not spawn (a dead keeper's,
    /// whose children are the host's now), as request `id`, as a `Hold` would: its descriptors
    /// travel beside the frame in the order [`Hold::descriptors`] says. Its leader is not this
    /// keeper's child, so its exit is watched, not reaped.
    Carry { id: u64, pgid: i32, hold: Hold },
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
    /// `Adopt` as a keeper sends it to a successor of protocol 4 or earlier.
    AdoptNamed {
        id: u64,
        pgid: i32,
        exit: Option<Exit>,
        hold: NamedHold,
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
    // Protocol 5 from here on.
    /// To a successor: a task of the host that is gone, held for it (descriptors beside, as for
    /// [`Request::Hold`]); `exit` once its process was reaped.
    Adopt {
        id: u64,
        pgid: i32,
        exit: Option<Exit>,
        hold: Hold,
    },
    /// To a successor of protocol 6 or later, instead of the tasks: its open-file limit of `limit`
    /// cannot hold the `descriptors` they come with. The keeper holds them for another successor.
    NoRoom { descriptors: u64, limit: u64 },
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
    /// The request that starts `launch` as `id` on a keeper of `protocol`: held for a successor
    /// from its start with `held`, whose descriptors then follow the streams' in `fds`.
    pub(crate) fn start<'a>(
        id: u64,
        launch: &Launch,
        streams: Streams,
        held: Option<HeldFromStart<'a>>,
        fds: &mut Vec<BorrowedFd<'a>>,
        protocol: u32,
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
                .for_protocol(protocol)
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

    /// This request as a keeper of `protocol` reads it: before protocol 5, a hold named by a
    /// string.
    pub(crate) fn for_protocol(self, protocol: u32) -> Self {
        if protocol >= TYPED_HOLDS {
            return self;
        }
        match self {
            Self::Hold { pgid, hold } => Self::HoldNamed {
                pgid,
                hold: hold.into(),
            },
            Self::SpawnHeld {
                id,
                launch,
                streams,
                hold,
            } => Self::SpawnHeldNamed {
                id,
                launch,
                streams,
                hold: hold.into(),
            },
            Self::Carry { id, pgid, hold } => Self::CarryNamed {
                id,
                pgid,
                hold: hold.into(),
            },
            other => other,
        }
    }

    /// This request with its hold typed, whichever protocol sent it.
    pub(crate) fn typed(self) -> Self {
        match self {
            Self::HoldNamed { pgid, hold } => Self::Hold {
                pgid,
                hold: hold.into(),
            },
            Self::SpawnHeldNamed {
                id,
                launch,
                streams,
                hold,
            } => Self::SpawnHeld {
                id,
                launch,
                streams,
                hold: hold.into(),
            },
            Self::CarryNamed { id, pgid, hold } => Self::Carry {
                id,
                pgid,
                hold: hold.into(),
            },
            other => other,
        }
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

    /// This report as a successor of `protocol` reads it: before protocol 5, a hold named by a
    /// string.
    pub(crate) fn for_protocol(self, protocol: u32) -> Self {
        match self {
            Self::Adopt {
                id,
                pgid,
                exit,
                hold,
            } if protocol < TYPED_HOLDS => Self::AdoptNamed {
                id,
                pgid,
                exit,
                hold: hold.into(),
            },
            other => other,
        }
    }

    /// This report with its hold typed, whichever protocol sent it.
    pub(crate) fn typed(self) -> Self {
        match self {
            Self::AdoptNamed {
                id,
                pgid,
                exit,
                hold,
            } => Self::Adopt {
                id,
                pgid,
                exit,
                hold: hold.into(),
            },
            other => other,
        }
    }

    /// The frame of a `Handed` report: the keeper's [`PROTOCOL`] after the message, then its pid
    /// (since protocol 7). A host of protocol 1 reads the message and ignores what follows it, one
    /// of 2 to 6 the protocol.
    pub(crate) fn encode_handed(&self) -> Vec<u8> {
        frame(&(self, PROTOCOL, std::process::id()))
    }

    /// Decodes a frame's body; with the protocol that follows a `Handed` report's message (1 when
    /// nothing follows: a keeper of protocol 1) and the keeper's pid after it (`None` before
    /// protocol 7).
    pub(crate) fn decode_handed(body: &[u8]) -> Result<(Self, u32, Option<u32>), WireError> {
        let malformed = |e: postcard::Error| WireError::Malformed(e.to_string());
        let (report, rest) = postcard::take_from_bytes(body).map_err(malformed)?;
        if rest.is_empty() {
            return Ok((report, 1, None));
        }
        let (protocol, rest) = postcard::take_from_bytes(rest).map_err(malformed)?;
        let pid = match rest {
            [] => None,
            rest => Some(postcard::from_bytes(rest).map_err(malformed)?),
        };
        Ok((report, protocol, pid))
    }

    /// Decodes a frame's body (without its length).
    pub(crate) fn decode(body: &[u8]) -> Result<Self, WireError> {
        decode(body)
    }
}
