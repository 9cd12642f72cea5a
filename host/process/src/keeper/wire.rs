//! What the host and its keeper say to each other over their socket: length-prefixed binary frames,
//! and the descriptors a spawn request carries beside its frame.
//!
//! A frame is a little-endian `u32` length and that many bytes: a tag, then the fields. Strings are
//! a `u32` length and their bytes; lists a `u32` count and their items. Decoding never panics: a
//! short or malformed frame is a [`WireError`]. Descriptors (a request's streams, a terminal's
//! master in the answer) travel as `SCM_RIGHTS` with the frame's first byte; the frame says how many
//! it carries, and the receiver takes them in order from the descriptors it has received (the kernel
//! never merges two descriptor-carrying sends into one read, so they arrive in the order of the
//! frames).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use crate::{Exit, TtySize};

/// Largest frame either side accepts (a spawn request carries a command and an environment, which
/// the kernel caps far below this).
pub(crate) const MAX_FRAME: usize = 64 << 20;

/// A malformed frame.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum WireError {
    /// The frame ended before a field did.
    #[error("frame truncated")]
    Truncated,
    /// The frame's tag is not one this side knows.
    #[error("unknown frame tag {0}")]
    UnknownTag(u8),
    /// The frame is longer than the maximum (64 MiB).
    #[error("frame of {0} bytes is too long")]
    TooLong(usize),
    /// A request said it carries more descriptors than arrived.
    #[error("a request's descriptors are missing")]
    MissingDescriptors,
}

/// Where one of a child's standard streams goes.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) enum Slot {
    /// `/dev/null`.
    Null,
    /// The next descriptor carried with the request.
    Passed,
}

/// What a child's standard streams are.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) enum Streams {
    /// Stdin, stdout and stderr as the slots say; the child leads a process group of its own.
    Slots([Slot; 3]),
    /// A fresh pseudo-terminal of this size (columns, rows), whose master the keeper hands back;
    /// the child leads a session of its own with that terminal as its controlling one.
    Terminal(TtySize),
}

/// What to run: a resolved program, its arguments, its whole environment and its directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The program, as `execve` takes it (resolved on the child's `PATH` by the host).
    pub program: PathBuf,
    /// The arguments after the program.
    pub args: Vec<OsString>,
    /// The whole environment.
    pub env: Vec<(OsString, OsString)>,
    /// The working directory (the spawner's when `None`).
    pub cwd: Option<PathBuf>,
}

/// From the host to the keeper.
#[derive(Debug, PartialEq, Eq)]
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
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Report {
    /// Request `id` runs as process `pid` (the leader of group `pid`); with `master`, the
    /// terminal's master descriptor goes beside the frame.
    Spawned { id: u64, pid: i32, master: bool },
    /// Request `id` could not be started; the OS's cause.
    Refused { id: u64, cause: String },
    /// The process of request `id` has exited and been reaped.
    Exited { id: u64, exit: Exit },
}

const SPAWN: u8 = 1;
const WATCH: u8 = 2;
const FORGET: u8 = 3;
const SPAWNED: u8 = 4;
const REFUSED: u8 = 5;
const EXITED: u8 = 6;

/// A frame being written: the length is filled in by [`Frame::finish`].
struct Frame(Vec<u8>);

impl Frame {
    fn new(tag: u8) -> Self {
        let mut v = Vec::with_capacity(256);
        v.extend_from_slice(&[0; 4]);
        v.push(tag);
        Self(v)
    }
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
        self
    }
    /// The frame with its length filled in.
    fn finish(&mut self) -> Vec<u8> {
        let mut frame = std::mem::take(&mut self.0);
        let len = (frame.len() - 4) as u32;
        frame[..4].copy_from_slice(&len.to_le_bytes());
        frame
    }
}

/// A frame's body being read.
struct Fields<'a>(&'a [u8]);

impl<'a> Fields<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], WireError> {
        if self.0.len() < n {
            return Err(WireError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], WireError> {
        self.take(N)?.try_into().map_err(|_| WireError::Truncated)
    }
    fn u8(&mut self) -> Result<u8, WireError> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, WireError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, WireError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, WireError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn i32(&mut self) -> Result<i32, WireError> {
        Ok(i32::from_le_bytes(self.array()?))
    }
    fn bytes(&mut self) -> Result<&'a [u8], WireError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    fn os(&mut self) -> Result<OsString, WireError> {
        Ok(OsString::from_vec(self.bytes()?.to_vec()))
    }
    /// A count of items, each at least `min` bytes long: a count the frame cannot hold is refused
    /// before anything is allocated for it.
    fn count(&mut self, min: usize) -> Result<usize, WireError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min) > self.0.len() {
            return Err(WireError::Truncated);
        }
        Ok(n)
    }
}

impl Request {
    /// The frame (a spawn's descriptors, one per [`Slot::Passed`], go beside it).
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            Request::Spawn {
                id,
                launch,
                streams,
            } => spawn_frame(*id, launch, *streams),
            Request::Watch { pgid } => Frame::new(WATCH).i32(*pgid).finish(),
            Request::Forget { pgid } => Frame::new(FORGET).i32(*pgid).finish(),
        }
    }

    /// Decodes a frame's body (without its length).
    pub(crate) fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut f = Fields(body);
        match f.u8()? {
            SPAWN => {
                let id = f.u64()?;
                let program = PathBuf::from(f.os()?);
                let args = (0..f.count(4)?).map(|_| f.os()).collect::<Result<_, _>>()?;
                let env = (0..f.count(8)?)
                    .map(|_| Ok((f.os()?, f.os()?)))
                    .collect::<Result<_, _>>()?;
                let cwd = match f.u32()? {
                    u32::MAX => None,
                    n => Some(PathBuf::from(OsString::from_vec(
                        f.take(n as usize)?.to_vec(),
                    ))),
                };
                let streams = match f.u8()? {
                    0 => {
                        let mut slots = [Slot::Null; 3];
                        for s in &mut slots {
                            if f.u8()? != 0 {
                                *s = Slot::Passed;
                            }
                        }
                        Streams::Slots(slots)
                    }
                    _ => Streams::Terminal(TtySize {
                        cols: f.u16()?,
                        rows: f.u16()?,
                    }),
                };
                Ok(Request::Spawn {
                    id,
                    launch: Launch {
                        program,
                        args,
                        env,
                        cwd,
                    },
                    streams,
                })
            }
            WATCH => Ok(Request::Watch { pgid: f.i32()? }),
            FORGET => Ok(Request::Forget { pgid: f.i32()? }),
            tag => Err(WireError::UnknownTag(tag)),
        }
    }
}

impl Report {
    /// The frame.
    pub(crate) fn encode(&self) -> Vec<u8> {
        match self {
            Report::Spawned { id, pid, master } => Frame::new(SPAWNED)
                .u64(*id)
                .i32(*pid)
                .u8(u8::from(*master))
                .finish(),
            Report::Refused { id, cause } => Frame::new(REFUSED)
                .u64(*id)
                .bytes(cause.as_bytes())
                .finish(),
            Report::Exited { id, exit } => {
                let (kind, value) = match exit {
                    Exit::Code(c) => (0, *c),
                    Exit::Signal(s) => (1, *s),
                    Exit::Unknown => (2, 0),
                };
                Frame::new(EXITED).u64(*id).u8(kind).i32(value).finish()
            }
        }
    }

    /// Decodes a frame's body (without its length).
    pub(crate) fn decode(body: &[u8]) -> Result<Self, WireError> {
        let mut f = Fields(body);
        match f.u8()? {
            SPAWNED => Ok(Report::Spawned {
                id: f.u64()?,
                pid: f.i32()?,
                master: f.u8()? != 0,
            }),
            REFUSED => Ok(Report::Refused {
                id: f.u64()?,
                cause: String::from_utf8_lossy(f.bytes()?).into_owned(),
            }),
            EXITED => {
                let id = f.u64()?;
                let exit = match (f.u8()?, f.i32()?) {
                    (0, c) => Exit::Code(c),
                    (1, s) => Exit::Signal(s),
                    _ => Exit::Unknown,
                };
                Ok(Report::Exited { id, exit })
            }
            tag => Err(WireError::UnknownTag(tag)),
        }
    }
}

/// The frame of a [`Request::Spawn`], from a borrowed launch.
pub(crate) fn spawn_frame(id: u64, launch: &Launch, streams: Streams) -> Vec<u8> {
    let mut f = Frame::new(SPAWN);
    f.u64(id).bytes(launch.program.as_os_str().as_bytes());
    f.u32(launch.args.len() as u32);
    for a in &launch.args {
        f.bytes(a.as_bytes());
    }
    f.u32(launch.env.len() as u32);
    for (k, v) in &launch.env {
        f.bytes(k.as_bytes()).bytes(v.as_bytes());
    }
    match &launch.cwd {
        Some(dir) => f.bytes(dir.as_os_str().as_bytes()),
        None => f.u32(u32::MAX),
    };
    match streams {
        Streams::Slots(slots) => {
            f.u8(0);
            for s in slots {
                f.u8(u8::from(s == Slot::Passed));
            }
        }
        Streams::Terminal(size) => {
            f.u8(1).u16(size.cols).u16(size.rows);
        }
    }
    f.finish()
}

/// Sends one whole frame with `fds` attached to its first byte.
pub(crate) fn send(
    socket: BorrowedFd<'_>,
    frame: &[u8],
    fds: &[BorrowedFd<'_>],
) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(3))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(std::io::Error::other(
            "too many descriptors for one request",
        ));
    }
    let sent = loop {
        match sendmsg(
            socket,
            &[IoSlice::new(frame)],
            &mut control,
            SendFlags::NOSIGNAL,
        ) {
            Ok(n) => break n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    };
    // The descriptors went with the first byte; the rest is plain data.
    let mut rest = &frame[sent..];
    while !rest.is_empty() {
        match rustix::net::send(socket, rest, SendFlags::NOSIGNAL) {
            Ok(n) => rest = &rest[n..],
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// Reads frames, and the descriptors that came with them, from a stream socket.
pub(crate) struct Receiver {
    buf: Vec<u8>,
    fds: VecDeque<OwnedFd>,
}

impl Receiver {
    pub(crate) fn new() -> Self {
        Self {
            buf: Vec::new(),
            fds: VecDeque::new(),
        }
    }

    /// The next frame's body, `None` at the end of the stream.
    ///
    /// # Errors
    /// A read error, or a frame longer than [`MAX_FRAME`].
    pub(crate) fn next(&mut self, socket: BorrowedFd<'_>) -> std::io::Result<Option<Vec<u8>>> {
        use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
        loop {
            if let Some(body) = self.complete()? {
                return Ok(Some(body));
            }
            let mut chunk = [0u8; 64 * 1024];
            let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(8))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let got = match recvmsg(
                socket,
                &mut [IoSliceMut::new(&mut chunk)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            ) {
                Ok(got) => got,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            };
            for message in control.drain() {
                if let RecvAncillaryMessage::ScmRights(fds) = message {
                    self.fds.extend(fds);
                }
            }
            if got.bytes == 0 {
                return Ok(None);
            }
            self.buf.extend_from_slice(&chunk[..got.bytes]);
        }
    }

    /// Takes `n` of the descriptors received so far, in order.
    pub(crate) fn take_fds(&mut self, n: usize) -> Result<Vec<OwnedFd>, WireError> {
        if self.fds.len() < n {
            return Err(WireError::MissingDescriptors);
        }
        Ok(self.fds.drain(..n).collect())
    }

    /// Drops every descriptor received so far (after a frame that could not be read, they belong to
    /// no request).
    pub(crate) fn discard_fds(&mut self) {
        self.fds.clear();
    }

    fn complete(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        let Some(len) = self.buf.get(..4) else {
            return Ok(None);
        };
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        if len > MAX_FRAME {
            return Err(std::io::Error::other(WireError::TooLong(len)));
        }
        if self.buf.len() < 4 + len {
            return Ok(None);
        }
        let body = self.buf[4..4 + len].to_vec();
        self.buf.drain(..4 + len);
        Ok(Some(body))
    }
}
