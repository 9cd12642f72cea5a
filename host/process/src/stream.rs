//! One output stream of a process: an in-memory tail, a private spill file beyond it, and one
//! consuming cursor.
//!
//! The spill file never grows past its cap. Past it the file keeps the stream's head (the first
//! quarter of the cap), a marker line saying how many bytes were skipped, and a rolling window of the
//! most recent output in the rest: the end of a long build, where its error is, stays readable. A cap
//! too small to hold a marker drops the spill file instead.
//!
//! Once the file rolls, a task's writer never waits for the disk on each write: the latest output
//! gathers in memory (at most [`PENDING_MAX`] bytes) and goes to the file in one batch every
//! [`FLUSH_EVERY`], when the pipe goes quiet for that long, and when the stream ends. Output that
//! fell out of the batch before it was written is counted in the marker as skipped, like everything
//! else between the head and the window: a writer faster than the disk costs the window's older
//! part, never the writer's speed. (Measured before: a 1 GiB writer spent most of the reading
//! thread's time in `pwrite` and in moving the window within the file.) Kept output (the state
//! directory's) is also written before a read of it is answered, so a host killed after answering
//! leaves every answered byte in the kept file; killed between two batches with no read, it leaves
//! out at most the last 100 ms (and 4 MiB) of a stream past its cap.

use std::collections::VecDeque;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::spill_layout::Rolling;

/// The most output a rolling stream gathers in memory before the oldest of it is skipped.
pub(crate) const PENDING_MAX: usize = 4 << 20;

/// How often a rolling stream's gathered output is written to its file.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// A stream's spill file as a read names it.
pub(crate) struct SpillFile<'a> {
    pub(crate) path: &'a PathBuf,
    /// The file holds the head and the latest output only (the stream outgrew the cap).
    pub(crate) head_and_tail: bool,
}

/// Where a stream's spill file goes and how it is named.
pub(crate) struct SpillPlan {
    /// The file's path, for reads to name (`dir`'s path and `name`).
    pub(crate) path: PathBuf,
    /// The held directory it is created in, relative to its descriptor.
    pub(crate) dir: std::sync::Arc<crate::private_dir::HeldDir>,
    pub(crate) name: String,
    pub(crate) cap: u64,
    /// The host-wide budget every spill file counts against.
    pub(crate) budget: Option<std::sync::Arc<crate::budget::SpillBudget>>,
    /// Kept output (the host's state): written from the first byte, and kept after the task.
    pub(crate) kept: bool,
}

/// A stream's retained output.
pub(crate) struct StreamBuf {
    pub(crate) tail: VecDeque<u8>,
    pub(crate) tail_max: usize,
    /// Bytes ever written.
    pub(crate) total: u64,
    /// Absolute position of the next byte to read.
    pub(crate) cursor: u64,
    pub(crate) plan: Option<SpillPlan>,
    pub(crate) spill: Option<crate::spill_handle::SpillHandle>,
    /// Bytes in the spill file (head, marker and window once it rolls).
    pub(crate) spilled: u64,
    /// Set once the file keeps only the head and the latest output.
    pub(crate) rolling: Option<Rolling>,
    /// The spill file was dropped (a write failed, or the cap is too small to roll).
    pub(crate) spill_lost: bool,
    /// The cap in force once it is fixed: when the file started rolling, or when the host-wide
    /// budget stopped its growth (then smaller than the plan's).
    pub(crate) cap_now: Option<u64>,
    /// Past the cap: the latest output not yet in the file.
    pending: VecDeque<u8>,
    /// Output that fell out of `pending` before it was written: skipped.
    pending_dropped: u64,
    /// When `pending` was last written.
    flushed_at: Instant,
    /// Kept output the disk refused since it last took a write ([`crate::kept_gap`]).
    pub(crate) gap: Option<crate::spill_layout::Gap>,
    /// Taken over from a gone host: reads behind the tail continue in the kept file
    /// ([`crate::kept_read`]).
    pub(crate) resumed: bool,
    /// Bytes the kept file missed over all gaps.
    pub(crate) not_kept: u64,
}

/// What a read of one stream gives.
pub(crate) struct StreamRead {
    pub(crate) bytes: Vec<u8>,
    /// The cursor had fallen behind the tail: output between was dropped from memory.
    pub(crate) lossy: bool,
    /// Where the cursor stands after the read.
    pub(crate) next: u64,
    /// Bytes written and still unread after it (a read from a kept file stops short of them).
    pub(crate) more: u64,
}

impl StreamBuf {
    pub(crate) fn new(tail_max: usize, plan: Option<SpillPlan>) -> Self {
        Self {
            tail: VecDeque::new(),
            tail_max: tail_max.max(1),
            total: 0,
            cursor: 0,
            plan,
            spill: None,
            spilled: 0,
            rolling: None,
            spill_lost: false,
            cap_now: None,
            pending: VecDeque::new(),
            pending_dropped: 0,
            flushed_at: Instant::now(),
            gap: None,
            resumed: false,
            not_kept: 0,
        }
    }

    /// Where the stream's file goes, if it has a plan.
    pub(crate) fn planned_path(&self) -> Option<PathBuf> {
        self.plan.as_ref().map(|p| p.path.clone())
    }

    /// The spill file while it exists, and whether it holds only the head and the latest output.
    pub(crate) fn spill_file(&self) -> Option<SpillFile<'_>> {
        if self.spill_lost {
            None
        } else {
            let path = self
                .spill
                .as_ref()
                .and(self.plan.as_ref().map(|p| &p.path))?;
            Some(SpillFile {
                path,
                head_and_tail: self.rolling.is_some(),
            })
        }
    }

    /// Where this stream's spill file goes if it ever overflows.
    pub(crate) fn planned_spill(&self) -> Option<&PathBuf> {
        self.plan.as_ref().map(|p| &p.path)
    }

    /// True once output went beyond the tail (a spill was started or attempted).
    #[cfg(test)]
    pub(crate) fn overflowed(&self) -> bool {
        self.spill.is_some() || self.spill_lost
    }

    pub(crate) fn push(&mut self, data: &[u8]) {
        let before = self.total;
        self.total += data.len() as u64;
        let kept = self.plan.as_ref().is_some_and(|p| p.kept);
        if !self.spill_lost && (kept || self.spill.is_some() || self.total > self.tail_max as u64) {
            self.spill_write(data, before == self.tail.len() as u64);
            self.close_kept();
        }
        self.keep_in_tail(data);
    }

    /// Closes a kept file until the next batch written to it ([`crate::spill_handle`]).
    pub(crate) fn close_kept(&mut self) {
        if let Some(h) = self.spill.as_mut() {
            h.close_kept();
        }
    }

    /// Keeps the end of `data` in the tail. Only what the tail keeps is copied into it, so it never
    /// grows past its size for a large write, and a tail grown beyond twice its size is given back.
    pub(crate) fn keep_in_tail(&mut self, data: &[u8]) {
        self.tail
            .extend(&data[data.len().saturating_sub(self.tail_max)..]);
        let excess = self.tail.len().saturating_sub(self.tail_max);
        self.tail.drain(..excess);
        if self.tail.capacity() > 2 * self.tail_max {
            self.tail.shrink_to(self.tail_max);
        }
    }

    fn spill_write(&mut self, data: &[u8], tail_is_whole: bool) {
        if self.plan.is_none() {
            self.spill_lost = true;
            return;
        }
        if self.spill.is_none() {
            // The first overflow: the whole stream so far (still all in the tail) goes first.
            if !tail_is_whole || !self.start_spill() {
                self.spill_lost = true;
                return;
            }
        }
        let Some(plan) = &self.plan else {
            return;
        };
        let kept = plan.kept;
        let before = self.spilled;
        let mut cap = self.cap_now.unwrap_or(plan.cap);
        if self.cap_now.is_none()
            && let Some(budget) = &plan.budget
        {
            let growth = (data.len() as u64).min(cap.saturating_sub(self.spilled));
            if growth > 0 && !budget.make_room(growth) {
                // The budget is spent: keep the head and roll the latest output in what the file
                // holds now.
                cap = self.spilled.max(crate::budget::MIN_ROLL_CAP).min(cap);
                self.cap_now = Some(cap);
            }
        }
        if let Some(r) = self.rolling {
            self.pend(data, r.window_max);
            if self.flushed_at.elapsed() >= FLUSH_EVERY {
                self.flush();
            }
            return;
        }
        let written = if self.spilled + data.len() as u64 > cap {
            self.cap_now = Some(cap);
            self.roll(data, cap, 0)
        } else if kept {
            self.append_kept(data);
            Ok(())
        } else {
            match self
                .spill
                .as_mut()
                .map(crate::spill_handle::SpillHandle::file)
            {
                Some(Ok(f)) => f
                    .write_all_at(data, self.spilled)
                    .map(|()| self.spilled += data.len() as u64),
                Some(Err(e)) => Err(e),
                None => Err(std::io::ErrorKind::NotFound.into()),
            }
        };
        self.settle_write(before, written, data.len() as u64);
    }

    /// Creates the spill file with the tail (the whole stream so far); false when there is none. A
    /// kept file the disk refuses the tail opens a gap; a spill file is dropped.
    fn start_spill(&mut self) -> bool {
        let Some(plan) = &self.plan else {
            return false;
        };
        let f = match plan.dir.create_new(&plan.name, 0o600) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(path = %plan.path.display(), error = %e, "cannot create a spill file");
                return false;
            }
        };
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let (n, failed) = crate::spill_layout::write_counted(&f, &tail, 0);
        self.spilled = n as u64;
        if let Some(budget) = &plan.budget {
            budget.grew(self.spilled);
        }
        let kept = plan.kept;
        let handle = if kept {
            crate::spill_handle::SpillHandle::kept(f, plan.dir.clone(), &plan.name)
        } else {
            Ok(crate::spill_handle::SpillHandle::spill(f))
        };
        match handle {
            Ok(h) => self.spill = Some(h),
            Err(e) => {
                tracing::warn!(error = %e, "cannot hold a spill file");
                self.lose_spill();
                return false;
            }
        }
        match failed {
            None => true,
            Some(e) if kept => {
                self.gap_opened(&e, (tail.len() - n) as u64);
                true
            }
            Some(_) => {
                self.lose_spill();
                false
            }
        }
    }

    /// After a write of `bytes` of the stream that took the file from `before` bytes: a failed one
    /// drops a spill file, and opens a gap in a kept one (its bytes are skipped by the next batch);
    /// the host-wide budget learns the change.
    fn settle_write(&mut self, before: u64, written: std::io::Result<()>, bytes: u64) {
        let kept = self.plan.as_ref().is_some_and(|p| p.kept);
        match written {
            Err(e) if kept && self.spill.is_some() => {
                self.pending_dropped += bytes;
                self.gap_opened(&e, bytes);
            }
            Err(e) => {
                let path = self.plan.as_ref().map(|p| p.path.display().to_string());
                tracing::warn!(path, error = %e, "a spill write failed; the spill file is dropped");
                self.lose_spill();
            }
            Ok(()) if self.rolling.is_some() => self.gap_closed(),
            Ok(()) => {}
        }
        if let Some(budget) = self.plan.as_ref().and_then(|p| p.budget.as_ref()) {
            let after = if self.spill_lost { 0 } else { self.spilled };
            match after.cmp(&before) {
                std::cmp::Ordering::Greater => budget.grew(after - before),
                std::cmp::Ordering::Less => budget.shrank(before - after),
                std::cmp::Ordering::Equal => {}
            }
        }
    }

    /// Gathers output of a rolling stream; what no window of `window_max` bytes could hold is skipped.
    fn pend(&mut self, data: &[u8], window_max: u64) {
        let max = usize::try_from(window_max)
            .unwrap_or(usize::MAX)
            .min(PENDING_MAX);
        let fresh = &data[data.len().saturating_sub(max)..];
        let excess = (self.pending.len() + fresh.len()).saturating_sub(max);
        self.pending_dropped += (data.len() - fresh.len()) as u64;
        self.pending_dropped += excess as u64;
        self.pending.drain(..excess.min(self.pending.len()));
        self.pending.extend(fresh);
    }

    /// Kept output is written before a read of it is answered: a host killed after answering loses
    /// nothing it answered from the kept file (spills, which die with the host, may lag).
    pub(crate) fn sync_kept(&mut self) {
        if self.has_pending() && self.plan.as_ref().is_some_and(|p| p.kept) {
            self.flush();
        }
    }

    /// True while output gathered past the cap waits to be written.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty() || self.pending_dropped > 0
    }

    /// Writes the output gathered past the cap to the file now.
    pub(crate) fn flush(&mut self) {
        self.flushed_at = Instant::now();
        if !self.has_pending() {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        let dropped = std::mem::take(&mut self.pending_dropped);
        if self.spill_lost {
            return;
        }
        let (before, cap) = (self.spilled, self.cap_now.unwrap_or(self.spilled));
        let bytes = pending.len() as u64 + dropped;
        let written = self.roll(pending.make_contiguous(), cap, dropped);
        self.settle_write(before, written, bytes);
        self.close_kept();
    }

    pub(crate) fn lose_spill(&mut self) {
        self.spill = None;
        self.spill_lost = true;
        self.pending = VecDeque::new();
        self.pending_dropped = 0;
        if let Some(plan) = &self.plan {
            let _ = std::fs::remove_file(&plan.path);
        }
    }

    /// Consumes the output since the previous read.
    pub(crate) fn read(&mut self) -> StreamRead {
        self.sync_kept();
        let read = self.peek();
        self.cursor = read.next;
        read
    }

    /// What [`StreamBuf::read`] would return now, left unread.
    pub(crate) fn peek(&self) -> StreamRead {
        if let Some(read) = self.read_kept(self.cursor) {
            return read;
        }
        let (bytes, _) = self.since(self.cursor);
        StreamRead {
            bytes,
            lossy: self.cursor < self.tail_start(),
            next: self.total,
            more: 0,
        }
    }

    /// Where the next read starts (in bytes ever written).
    pub(crate) fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The bytes still in memory from position `from` (in bytes ever written) on, and the position
    /// after them; from the oldest kept byte when `from` fell out of memory.
    pub(crate) fn since(&self, from: u64) -> (Vec<u8>, u64) {
        let tail_start = self.tail_start();
        let skip = from.max(tail_start) - tail_start;
        let skip = usize::try_from(skip)
            .unwrap_or(usize::MAX)
            .min(self.tail.len());
        (self.tail.range(skip..).copied().collect(), self.total)
    }

    /// The position (in bytes ever written) of the oldest byte still in memory.
    fn tail_start(&self) -> u64 {
        self.total - self.tail.len() as u64
    }

    /// Bytes ever written to the stream.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// The last `max` bytes retained, without consuming them.
    pub(crate) fn peek_tail(&self, max: usize) -> Vec<u8> {
        let skip = self.tail.len().saturating_sub(max);
        self.tail.range(skip..).copied().collect()
    }

    /// Writes what is gathered and closes the spill file (the path stays for reads of the full
    /// output).
    pub(crate) fn finish(&mut self) {
        self.flush();
        if self.gap.is_some() && self.rolling.is_none() {
            // The file ends in a gap: its marker says so, if the disk takes it now.
            self.append_kept(&[]);
        }
        self.close_kept();
    }
}

#[cfg(test)]
#[path = "stream_tests.rs"]
mod tests;
