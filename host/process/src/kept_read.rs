//! Reads of a handed-over stream that continue in its kept file: a successor host starts with
//! only the tail of what the task wrote while no host ran in memory, so a read whose cursor lies
//! before that tail takes the bytes from the kept file, byte exact, instead of skipping to the
//! tail with a note naming a path (which a client on another machine cannot read).
//!
//! This holds while the kept file is the stream byte for byte: it never rolled past its cap and
//! no write of it failed (a gap's marker would shift it). Otherwise the read is the tail with the
//! usual note. One read takes at most [`KEPT_READ_MAX`] bytes from the file; the rest waits for
//! the next read, which the read's note asks for.

use crate::stream::{StreamBuf, StreamRead};

/// The most one read takes of a stream from its kept file.
pub(crate) const KEPT_READ_MAX: u64 = 1 << 20;

impl StreamBuf {
    /// What a read from `from` gives when `from` fell out of memory but the kept file holds every
    /// byte of the stream: the file's bytes from `from` (at most [`KEPT_READ_MAX`]), then the tail
    /// when the file's part reaches it. `None` when the stream was not handed over, `from` is in
    /// memory, or the file is not the stream byte for byte.
    pub(crate) fn read_kept(&self, from: u64) -> Option<StreamRead> {
        let tail_start = self.total - self.tail.len() as u64;
        if !self.resumed
            || from >= tail_start
            || self.rolling.is_some()
            || self.gap.is_some()
            || self.not_kept > 0
            || self.spill_lost
            || self.spilled != self.total
        {
            return None;
        }
        let file = self.spill.as_ref()?;
        let upto = tail_start.min(from.saturating_add(KEPT_READ_MAX));
        let mut bytes = vec![0u8; usize::try_from(upto - from).ok()?];
        file.read_exact_at(&mut bytes, from).ok()?;
        let next = if upto == tail_start {
            bytes.extend(self.tail.iter());
            self.total
        } else {
            upto
        };
        Some(StreamRead {
            bytes,
            lossy: false,
            next,
            more: self.total - next,
        })
    }
}
