//! The host-wide budget for kept output (`[tasks] spill_budget`): the bytes all spill files may hold
//! together, on top of each stream's own cap.
//!
//! When a write would take the total past the budget, the spill files of settled processes are
//! trimmed first, oldest settlement first: each keeps its first and last [`TRIM_KEEP`] bytes around
//! a line saying how many bytes were removed and why, so its path stays valid and its end (where a
//! build's error is) stays readable. When no settled file is left to trim, the writing stream stops
//! growing: it keeps its head and rolls its latest output in the size it has (at least
//! [`MIN_ROLL_CAP`]), as it would at its own cap, and its reads say the middle was skipped. The
//! budget can be passed by at most that minimum per running stream.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

/// The default budget: 4 GiB for all spill files of a host together.
pub const DEFAULT_SPILL_BUDGET: u64 = 4 << 30;

/// What a trimmed settled file keeps of its start, and of its end.
pub const TRIM_KEEP: u64 = 64 << 10;

/// The smallest size a stream rolls in once the budget is spent.
pub const MIN_ROLL_CAP: u64 = 256 << 10;

/// The spill files' shared budget.
#[derive(Debug)]
pub struct SpillBudget {
    limit: u64,
    used: AtomicU64,
    /// Spill files of settled processes not yet trimmed, oldest settlement first.
    settled: Mutex<VecDeque<PathBuf>>,
}

impl SpillBudget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            used: AtomicU64::new(0),
            settled: Mutex::new(VecDeque::new()),
        }
    }

    /// Bytes the spill files hold now, as far as the budget knows.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    pub(crate) fn grew(&self, bytes: u64) {
        self.used.fetch_add(bytes, Ordering::Relaxed);
    }

    pub(crate) fn shrank(&self, bytes: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(bytes))
            });
    }

    /// Records the spill files of a process that settled: the first to be trimmed.
    pub(crate) fn settled(&self, files: impl IntoIterator<Item = PathBuf>) {
        self.settled.lock().extend(files);
    }

    /// True when `bytes` more fit, after trimming settled files (oldest first) as far as needed.
    pub(crate) fn make_room(&self, bytes: u64) -> bool {
        loop {
            if self.used().saturating_add(bytes) <= self.limit {
                return true;
            }
            let Some(oldest) = self.settled.lock().pop_front() else {
                return false;
            };
            match trim(&oldest, self.limit) {
                Ok(freed) => self.shrank(freed),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    tracing::warn!(path = %oldest.display(), error = %e, "cannot trim a spill file")
                }
            }
        }
    }
}

/// Cuts a settled spill file to its first and last [`TRIM_KEEP`] bytes around a line saying what
/// was removed; returns how many bytes it freed.
fn trim(path: &std::path::Path, budget: u64) -> std::io::Result<u64> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)?;
    let len = file.metadata()?.len();
    let line = |removed: u64| {
        format!(
            "\n[taskhost: {removed} bytes removed here to keep the host's kept output within its budget of {budget} bytes; the end follows]\n"
        )
        .into_bytes()
    };
    let removed = len.saturating_sub(2 * TRIM_KEEP);
    let marker = line(removed);
    if removed <= marker.len() as u64 {
        return Ok(0);
    }
    let mut tail = vec![0u8; TRIM_KEEP as usize];
    file.read_exact_at(&mut tail, len - TRIM_KEEP)?;
    file.write_all_at(&marker, TRIM_KEEP)?;
    let tail_at = TRIM_KEEP + marker.len() as u64;
    file.write_all_at(&tail, tail_at)?;
    let new_len = tail_at + TRIM_KEEP;
    file.set_len(new_len)?;
    Ok(len - new_len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settled_file_is_trimmed_to_its_head_and_end_with_a_line_saying_what_went() {
        let dir = std::env::temp_dir().join(format!("taskhost-budget-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("old.log");
        let mut bytes = b"HEAD".to_vec();
        bytes.resize(1 << 20, b'.');
        bytes.extend_from_slice(b"THE END");
        std::fs::write(&path, &bytes).unwrap();
        let budget = SpillBudget::new(300 << 10);
        budget.grew(bytes.len() as u64);
        budget.settled([path.clone()]);
        assert!(budget.make_room(10));
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("HEAD"));
        assert!(text.ends_with("THE END"));
        assert!(text.contains(&format!(
            "[taskhost: {} bytes removed here to keep the host's kept output within its budget of {} bytes; the end follows]",
            bytes.len() as u64 - 2 * TRIM_KEEP,
            300 << 10
        )));
        assert_eq!(budget.used(), text.len() as u64);
        assert!(
            !budget.make_room(1 << 20),
            "nothing settled is left to trim"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
