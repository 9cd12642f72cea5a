//! Kept output on a disk that refuses writes (full, over quota, failing): the kept file is never
//! dropped for it and the task's pipe is drained as ever, its output in memory as always. The file
//! misses what the disk refused, a *gap*; each later write tries again, and the first that succeeds
//! writes a marker line saying how many bytes are missing there and why, once per gap, then the
//! output goes on. The host's log says so once per stream when a gap opens; reads say so while it
//! is open. Past its cap a stream's file rolls (`crate::stream`): a gap there is counted in the
//! rolling marker as skipped, and the next batch written closes it.

use std::io;

use crate::spill_layout::{Gap, gap_marker, reason, write_counted};
use crate::stream::StreamBuf;

impl StreamBuf {
    /// Appends `data` to the kept file at its end, after the marker of an open gap; what the disk
    /// refuses opens the gap, or widens it.
    pub(crate) fn append_kept(&mut self, data: &[u8]) {
        let file = match self
            .spill
            .as_mut()
            .map(crate::spill_handle::SpillHandle::file)
        {
            None => return,
            Some(Ok(file)) => file,
            Some(Err(e)) => {
                self.gap_opened(&e, data.len() as u64);
                return;
            }
        };
        if let Some(gap) = &self.gap {
            let line = gap_marker(gap);
            let (n, failed) = write_counted(file, &line, self.spilled);
            if let Some(e) = failed {
                // A marker cut short would read as output: the file ends where it did.
                if n > 0 {
                    let _ = file.set_len(self.spilled);
                }
                self.gap_opened(&e, data.len() as u64);
                return;
            }
            self.spilled += line.len() as u64;
            self.gap_closed();
        }
        let Some(Ok(file)) = self
            .spill
            .as_mut()
            .map(crate::spill_handle::SpillHandle::file)
        else {
            return;
        };
        let (n, failed) = write_counted(file, data, self.spilled);
        self.spilled += n as u64;
        if let Some(e) = failed {
            self.gap_opened(&e, (data.len() - n) as u64);
        }
    }

    /// `bytes` more of the stream did not reach the kept file, because of `e`.
    pub(crate) fn gap_opened(&mut self, e: &io::Error, bytes: u64) {
        self.not_kept += bytes;
        if let Some(gap) = self.gap.as_mut() {
            gap.bytes += bytes;
            return;
        }
        let gap = Gap {
            bytes,
            reason: reason(e),
        };
        let path = self.plan.as_ref().map(|p| p.path.display().to_string());
        tracing::warn!(
            path,
            error = %e,
            "{}: kept output is not written until the disk takes writes again",
            gap.reason
        );
        self.gap = Some(gap);
    }

    /// The disk took a write again.
    pub(crate) fn gap_closed(&mut self) {
        if let Some(gap) = self.gap.take() {
            let path = self.plan.as_ref().map(|p| p.path.display().to_string());
            tracing::info!(path, missing = gap.bytes, "kept output is written again");
        }
    }

    /// While a gap is open: a line for reads saying that output is not being kept, and why.
    pub(crate) fn gap_note(&self) -> Option<String> {
        self.gap.as_ref().map(|g| {
            format!(
                "[taskhost: output is not being kept: {}; {} bytes not kept so far]",
                g.reason, g.bytes
            )
        })
    }

    /// Bytes of the stream its kept file missed, over all its gaps.
    pub(crate) fn not_kept(&self) -> u64 {
        self.not_kept
    }
}
