//! The master side of a task's pseudo-terminal on the host's runtime: read for the task's output,
//! written for its input. It arrives as a plain descriptor, whichever process opened the terminal
//! (the keeper hands it over).

use std::io;
use std::os::fd::OwnedFd;

use tokio::net::unix::pipe;

/// The reading half (the terminal's output; reads fail with EIO once every holder of the terminal's
/// other side is gone, which is the end of the output) and the writing half (what the task reads as
/// typed input) of the master `fd`, made non-blocking. Needs the runtime's context.
///
/// tokio's pipe ends are non-blocking descriptors read and written with `read(2)` and `write(2)` on
/// the reactor, which is all a terminal's master needs (it has no offset, like a pipe); the halves
/// are two descriptors of the one master, as tokio's ends each own theirs.
pub(crate) fn split(fd: OwnedFd) -> io::Result<(pipe::Receiver, pipe::Sender)> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(&fd, FcntlArg::F_GETFL)?);
    fcntl(&fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    let writer = fd.try_clone()?;
    Ok((
        pipe::Receiver::from_owned_fd_unchecked(fd)?,
        pipe::Sender::from_owned_fd_unchecked(writer)?,
    ))
}
