//! The client's standard streams, as a stdio session and the bridge read and write them: on the
//! reactor, with no blocking thread per read and per write, wherever that can be had without
//! changing the streams for anyone else who holds them.
//!
//! - A pipe (how most clients launch a server) is reopened through `/proc/self/fd` on an open file
//!   description of its own, non-blocking there (rmcp's `stdio_pipes` does the same for two pipes).
//! - A socket (Node's clients pass a socketpair) is read and written with `MSG_DONTWAIT`: each call
//!   declines to wait, the descriptor's own flags stay as they are.
//! - Anything else (a terminal, a file, `/dev/null`) is read and written as tokio's `stdin()` and
//!   `stdout()` do, on blocking threads.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use nix::sys::socket::{MsgFlags, UnixAddr, getsockname, recv, send};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// The client's side to read.
pub(crate) type ClientIn = Box<dyn AsyncRead + Send + Unpin>;
/// The client's side to write.
pub(crate) type ClientOut = Box<dyn AsyncWrite + Send + Unpin>;

/// What a standard stream is.
enum Kind {
    Pipe,
    Socket,
    Other,
}

/// What `fd` is open on; [`Kind::Other`] when that cannot be told.
fn kind(fd: BorrowedFd<'_>) -> Kind {
    let Ok(file) = fd.try_clone_to_owned().map(std::fs::File::from) else {
        return Kind::Other;
    };
    match file.metadata().map(|m| m.file_type()) {
        Ok(t) if t.is_fifo() => Kind::Pipe,
        Ok(t) if t.is_socket() => Kind::Socket,
        _ => Kind::Other,
    }
}

/// Standard input and output, each read or written on the reactor when it is a pipe or a socket.
pub(crate) fn client_streams() -> (ClientIn, ClientOut) {
    use tokio::net::unix::pipe::{Receiver, Sender};
    let input = on_reactor(
        io::stdin().as_fd(),
        false,
        |fd| {
            Receiver::from_owned_fd(fd)
                .ok()
                .map(|r| Box::new(r) as ClientIn)
        },
        |s| Box::new(s),
    );
    let output = on_reactor(
        io::stdout().as_fd(),
        true,
        |fd| {
            Sender::from_owned_fd(fd)
                .ok()
                .map(|w| Box::new(w) as ClientOut)
        },
        |s| Box::new(s),
    );
    (
        input.unwrap_or_else(|| Box::new(tokio::io::stdin())),
        output.unwrap_or_else(|| Box::new(tokio::io::stdout())),
    )
}

/// The standard stream `fd` (its reading side, or its writing side when `write`) on the reactor:
/// `pipe` given the pipe reopened, `socket` given the socket; `None` for any other kind of stream,
/// or when it cannot be had there.
fn on_reactor<T>(
    fd: BorrowedFd<'_>,
    write: bool,
    pipe: impl FnOnce(OwnedFd) -> Option<T>,
    socket_stream: impl FnOnce(SocketStream) -> T,
) -> Option<T> {
    match kind(fd) {
        Kind::Pipe => reopened(fd, write).and_then(pipe),
        Kind::Socket => socket(fd).map(socket_stream),
        Kind::Other => None,
    }
}

/// The pipe `fd` opened again, non-blocking, on a description of its own; `None` where `/proc` is
/// not there to open it by.
fn reopened(fd: BorrowedFd<'_>, write: bool) -> Option<OwnedFd> {
    std::fs::OpenOptions::new()
        .read(!write)
        .write(write)
        .custom_flags(nix::libc::O_NONBLOCK)
        .open(format!("/proc/self/fd/{}", fd.as_raw_fd()))
        .ok()
        .map(OwnedFd::from)
}

/// A copy of the Unix socket `fd` on the reactor; `None` for another kind of socket, or when it
/// cannot be registered there.
fn socket(fd: BorrowedFd<'_>) -> Option<SocketStream> {
    let fd = fd.try_clone_to_owned().ok()?;
    getsockname::<UnixAddr>(fd.as_raw_fd()).ok()?;
    // Registered as it is, blocking: every read and write below declines to wait itself
    // (`MSG_DONTWAIT`), and the flags stay those of the description the process shares.
    #[allow(
        deprecated,
        reason = "`AsyncFd::new` is deprecated as unsound for a descriptor its value does not own \
                  (tokio#8587); this one owns its copy until the registration ends"
    )]
    let fd = AsyncFd::new(fd).ok()?;
    Some(SocketStream { fd })
}

/// A socket read and written without waiting in the kernel, its descriptor left blocking.
struct SocketStream {
    fd: AsyncFd<OwnedFd>,
}

impl AsyncRead for SocketStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut ready = ready!(self.fd.poll_read_ready(cx))?;
            let unfilled = buf.initialize_unfilled();
            // A `WouldBlock` clears the readiness: the next round waits for the next.
            match ready.try_io(|fd| {
                recv(fd.as_raw_fd(), unfilled, MsgFlags::MSG_DONTWAIT).map_err(io::Error::from)
            }) {
                Ok(Ok(n)) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) if !retry(&e) => return Poll::Ready(Err(e)),
                Ok(Err(_)) | Err(_) => {}
            }
        }
    }
}

impl AsyncWrite for SocketStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        loop {
            let mut ready = ready!(self.fd.poll_write_ready(cx))?;
            let flags = MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL;
            match ready.try_io(|fd| send(fd.as_raw_fd(), data, flags).map_err(io::Error::from)) {
                Ok(Ok(n)) => return Poll::Ready(Ok(n)),
                Ok(Err(e)) if !retry(&e) => return Poll::Ready(Err(e)),
                Ok(Err(_)) | Err(_) => {}
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    /// Leaves the socket open, as tokio's `stdout()` does: the process's own descriptor stays.
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// True for an error that only means "not now".
fn retry(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    )
}
