//! Frames and the descriptors that travel with them over the keeper's socket: the one hand-written
//! part of the keeper's wire. A frame is a little-endian `u32` length and that many bytes (a
//! [`super::wire`] message); descriptors (a request's streams, a terminal's master in the answer)
//! travel as `SCM_RIGHTS` with the frame's first byte, and the receiver takes them in order from
//! the descriptors it has received (the kernel never merges two descriptor-carrying sends into one
//! read, so they arrive in the order of the frames).

use std::collections::VecDeque;
use std::io::{IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};

use super::wire::{MAX_FRAME, WireError};

/// Sends one whole frame with `fds` attached to its first byte.
pub(crate) fn send(
    socket: BorrowedFd<'_>,
    frame: &[u8],
    fds: &[BorrowedFd<'_>],
) -> std::io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(8))];
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
            if got.flags.contains(rustix::net::ReturnFlags::CTRUNC) {
                return Err(super::handover::room::dropped());
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
