//! A stream taken over from a host that is gone: rebuilt from its kept file, which holds every
//! byte the stream had (or its head and latest output, past its cap), and from what the keeper
//! drained while no host ran.

use std::fs::File;
use std::io::{Seek, SeekFrom};
use std::os::unix::fs::FileExt;

use crate::spill_layout::{MARKER_LEN, Rolling, read_marker};
use crate::stream::{SpillPlan, StreamBuf};

impl StreamBuf {
    /// A stream whose kept file so far is `file` (planned as `plan`), whose owner's reads stood at
    /// `cursor`: its total and its tail are what the file holds, and writes go on at its end.
    pub(crate) fn resume(tail_max: usize, plan: SpillPlan, mut file: File, cursor: u64) -> Self {
        let cap = plan.cap;
        let len = file.metadata().map_or(0, |m| m.len());
        let mut s = Self::new(tail_max, Some(plan));
        s.resumed = true;
        let (total, window_at) = match read_marker(&file, cap) {
            None => (len, 0),
            Some(skipped) => {
                let head = cap / 4;
                let window_at = head + MARKER_LEN;
                let window_len = len.saturating_sub(window_at);
                s.rolling = Some(Rolling {
                    window_at,
                    window_max: cap.saturating_sub(window_at),
                    window_len,
                    skipped,
                });
                s.cap_now = Some(cap);
                (head + skipped + window_len, window_at)
            }
        };
        let keep = (len.saturating_sub(window_at)).min(s.tail_max as u64);
        let mut tail = vec![0u8; keep as usize];
        if file.read_exact_at(&mut tail, len - keep).is_err() {
            tail.clear();
        }
        s.tail = tail.into();
        s.total = total.max(s.tail.len() as u64);
        s.cursor = cursor.min(s.total);
        s.spilled = len;
        let _ = file.seek(SeekFrom::End(0));
        if let Some(budget) = s.plan.as_ref().and_then(|p| p.budget.as_ref()) {
            budget.grew(len);
        }
        let held = s
            .plan
            .as_ref()
            .map(|p| crate::spill_handle::SpillHandle::kept(file, p.dir.clone(), &p.name));
        match held {
            Some(Ok(h)) => s.spill = Some(h),
            // A file that cannot be told apart from another is written no more.
            _ => s.spill_lost = true,
        }
        s.close_kept();
        s
    }

    /// Makes a kept stream's file now (it is otherwise made with the first byte), so that it can be
    /// held for a handover from the start; returns a second handle of it.
    pub(crate) fn open_kept(&mut self) -> Option<File> {
        let plan = self.plan.as_ref().filter(|p| p.kept)?;
        if self.spill.is_none() {
            let file = plan.dir.create_new(&plan.name, 0o600).ok()?;
            let held = crate::spill_handle::SpillHandle::kept(file, plan.dir.clone(), &plan.name);
            self.spill = Some(held.ok()?);
        }
        let second = self.spill.as_mut()?.file().and_then(File::try_clone).ok();
        self.close_kept();
        second
    }
}
