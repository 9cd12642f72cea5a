//! What the host and its keeper say to each other: serde types in `postcard`'s binary format, each in
//! a frame of a little-endian `u32` length and that many bytes. Decoding never panics: a short or
//! malformed body is a [`WireError`]. The descriptors a message carries go beside its frame
//! ([`super::fds`]).

use std::ffi::OsString;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::os_bytes;
use crate::{Exit, TtySize};

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
    /// A process group that is gone: never signal that number again.
    Forget { pgid: i32 },
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

    /// Decodes a frame's body (without its length).
    pub(crate) fn decode(body: &[u8]) -> Result<Self, WireError> {
        decode(body)
    }
}
