//! Kept output moved from a task's pipe into its kept file by the kernel (`splice`), and only then
//! read back into the in-memory tail: no byte the task wrote is ever held only in the host's memory,
//! so a host killed at any instant (a SIGKILL between a read and its write) loses nothing its kept
//! file should hold, and a successor that takes the task over finds every byte.
//!
//! It serves a stream whose kept file still holds the whole stream (below its cap, within the
//! spill budget). Past the cap the file rolls and output is gathered in memory for batched writes
//! (`crate::stream`); a terminal's master is no pipe: both are read as before.

use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;

use rustix::pipe::SpliceFlags;
use tokio::net::unix::pipe;

use crate::child::Process;
use crate::stream::StreamBuf;

/// What a splice did.
pub(crate) enum Spliced {
    /// This many bytes are in the file and in the tail, and in `buf`.
    Moved(usize),
    /// The pipe is at its end (or failed).
    End,
    /// The stream is no longer spliced (past its cap or its budget, no kept file, not a pipe):
    /// read it instead, from now on.
    Declined,
}

/// Moves what the pipe has (at most `buf.len()` bytes) into the stream's kept file, once the pipe is
/// readable, and adds it to the stream.
pub(crate) async fn splice_kept(
    pipe: &pipe::Receiver,
    process: &Process,
    stdout: bool,
    buf: &mut [u8],
) -> Spliced {
    loop {
        if pipe.readable().await.is_err() {
            return Spliced::End;
        }
        let mut streams = process.streams.lock();
        let stream = streams.side(stdout);
        let Some((at, len)) = stream.splice_room(buf.len() as u64) else {
            return Spliced::Declined;
        };
        let spliced = splice_once(pipe, stream, at, len, buf);
        // The kept file is closed between batches ([`crate::spill_handle`]).
        stream.close_kept();
        match spliced {
            Some(done) => return done,
            None => continue,
        }
    }
}

/// One splice of at most `len` bytes into the stream's kept file at `at`; `None` when the pipe had
/// nothing after all (wait for it again).
fn splice_once(
    pipe: &pipe::Receiver,
    stream: &mut StreamBuf,
    at: u64,
    len: usize,
    buf: &mut [u8],
) -> Option<Spliced> {
    let n = {
        let Some(Ok(file)) = stream
            .spill
            .as_mut()
            .map(crate::spill_handle::SpillHandle::file)
        else {
            return Some(Spliced::Declined);
        };
        let mut offset = at;
        let moved = pipe.try_io(|| {
            rustix::pipe::splice(
                pipe.as_fd(),
                None,
                file.as_fd(),
                Some(&mut offset),
                len,
                SpliceFlags::NONBLOCK,
            )
            .map_err(io::Error::from)
        });
        match moved {
            Ok(0) => return Some(Spliced::End),
            Ok(n) => {
                if file.read_exact_at(&mut buf[..n], at).is_err() {
                    // In the file, but not readable back: the tail misses it, the file has it.
                    buf[..n].fill(b'?');
                }
                n
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return None,
            // Not a pipe (a terminal's master), a file splice cannot write to, or a disk that
            // refused the write (full): the output stays in the pipe, read from now on, and the
            // stream's own write meets the disk's refusal (`crate::kept_gap`). A broken pipe ends
            // that read.
            Err(_) => return Some(Spliced::Declined),
        }
    };
    stream.spliced(&buf[..n]);
    Some(Spliced::Moved(n))
}

impl StreamBuf {
    /// Where (the file's offset) and how much (at most `want`) the next splice may move: only for
    /// a kept file that holds the whole stream and has room below its cap and in the budget.
    fn splice_room(&mut self, want: u64) -> Option<(u64, usize)> {
        let plan = self.plan.as_ref().filter(|p| p.kept)?;
        if self.spill.is_none()
            || self.rolling.is_some()
            || self.spill_lost
            || self.cap_now.is_some()
        {
            return None;
        }
        let room = plan.cap.checked_sub(self.spilled)?.min(want);
        if room == 0 || !plan.budget.as_ref().is_none_or(|b| b.make_room(room)) {
            return None;
        }
        Some((self.spilled, usize::try_from(room).ok()?))
    }

    /// Adds `data`, already written to the kept file at its end, to the stream.
    fn spliced(&mut self, data: &[u8]) {
        let n = data.len() as u64;
        self.total += n;
        self.spilled += n;
        if let Some(budget) = self.plan.as_ref().and_then(|p| p.budget.as_ref()) {
            budget.grew(n);
        }
        self.keep_in_tail(data);
    }
}
