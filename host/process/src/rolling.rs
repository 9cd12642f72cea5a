//! The rolling of a spill file past its cap ([`crate::spill_layout`]'s layout).

use std::os::unix::fs::FileExt;

use crate::spill_layout::{MARKER_LEN, Rolling, marker, move_within};
use crate::stream::StreamBuf;

impl StreamBuf {
    /// Appends `data` to a file at its cap: the head stays, the window keeps the latest output. When
    /// the window would overflow, its older half (or all of it, for a write as large as half the
    /// window) moves out, so each byte is copied O(1) times on average. `dropped` bytes of the stream
    /// came between the window and `data` and were never written: the window restarts with `data`.
    pub(crate) fn roll(&mut self, data: &[u8], cap: u64, dropped: u64) -> std::io::Result<()> {
        let mut r = match self.rolling {
            Some(r) => r,
            None => {
                let head = cap / 4;
                let window_at = head + MARKER_LEN;
                if cap <= window_at + 1 {
                    // Too small to roll: nothing but the tail in memory is kept.
                    self.lose_spill();
                    return Ok(());
                }
                if self.spilled < head {
                    // The head is not complete yet: the start of `data` completes it.
                    let part = ((head - self.spilled) as usize).min(data.len());
                    let file = match self.spill.as_mut() {
                        Some(h) => h.file()?,
                        None => return Err(std::io::ErrorKind::NotFound.into()),
                    };
                    file.write_all_at(&data[..part], self.spilled)?;
                    self.spilled += part as u64;
                    return if part == data.len() {
                        Ok(())
                    } else {
                        self.roll(&data[part..], cap, dropped)
                    };
                }
                // What was written past the head is the window's content so far, not yet in place.
                Rolling {
                    window_at: head,
                    window_max: cap - window_at,
                    window_len: self.spilled - head,
                    skipped: 0,
                }
            }
        };
        let file = match self.spill.as_mut() {
            Some(h) => h.file()?,
            None => return Err(std::io::ErrorKind::NotFound.into()),
        };
        let head = cap / 4;
        let target = head + MARKER_LEN;
        let n = data.len() as u64;
        let fits = dropped == 0 && r.window_at == target && r.window_len + n <= r.window_max;
        if fits {
            file.write_all_at(data, r.window_at + r.window_len)?;
            r.window_len += n;
        } else if dropped > 0 || n >= r.window_max / 2 {
            let keep = n.min(r.window_max);
            r.skipped += r.window_len + dropped + (n - keep);
            file.write_all_at(&data[(n - keep) as usize..], target)?;
            r.window_len = keep;
            r.window_at = target;
        } else {
            let keep_old = (r.window_max / 2 - n).min(r.window_len);
            move_within(
                file,
                r.window_at + r.window_len - keep_old,
                target,
                keep_old,
            )?;
            r.skipped += r.window_len - keep_old;
            file.write_all_at(data, target + keep_old)?;
            r.window_len = keep_old + n;
            r.window_at = target;
        }
        if !fits {
            file.write_all_at(&marker(r.skipped), head)?;
            file.set_len(target + r.window_len)?;
        }
        self.spilled = target + r.window_len;
        self.rolling = Some(r);
        Ok(())
    }
}
