//! One output stream of a process: an in-memory tail, a private spill file beyond it, a cap beyond
//! which the spill is dropped, and one consuming cursor.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

/// Where a stream's spill file goes and how it is named.
pub(crate) struct SpillPlan {
    pub(crate) path: PathBuf,
    pub(crate) cap: u64,
}

/// A stream's retained output.
pub(crate) struct StreamBuf {
    tail: VecDeque<u8>,
    tail_max: usize,
    /// Bytes ever written.
    total: u64,
    /// Absolute position of the next byte to read.
    cursor: u64,
    plan: Option<SpillPlan>,
    spill: Option<File>,
    spilled: u64,
    /// The spill file was dropped (cap reached or write failed).
    spill_lost: bool,
}

/// What a read of one stream gives.
pub(crate) struct StreamRead {
    pub(crate) bytes: Vec<u8>,
    /// The cursor had fallen behind the tail: output between was dropped from memory.
    pub(crate) lossy: bool,
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
            spill_lost: false,
        }
    }

    /// The spill file, while it holds the whole stream.
    pub(crate) fn spill_path(&self) -> Option<&PathBuf> {
        if self.spill_lost {
            None
        } else {
            self.spill.as_ref().and(self.plan.as_ref().map(|p| &p.path))
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
        if !self.spill_lost && (self.spill.is_some() || self.total > self.tail_max as u64) {
            self.spill_write(data, before == self.tail.len() as u64);
        }
        self.tail.extend(data);
        let excess = self.tail.len().saturating_sub(self.tail_max);
        self.tail.drain(..excess);
    }

    fn spill_write(&mut self, data: &[u8], tail_is_whole: bool) {
        let Some(plan) = &self.plan else {
            self.spill_lost = true;
            return;
        };
        if self.spill.is_none() {
            // The first overflow: the whole stream so far (still all in the tail) goes first.
            if !tail_is_whole {
                self.spill_lost = true;
                return;
            }
            match create_private(&plan.path) {
                Ok(mut f) => {
                    let (a, b) = self.tail.as_slices();
                    if f.write_all(a).and_then(|()| f.write_all(b)).is_err() {
                        self.lose_spill();
                        return;
                    }
                    self.spilled = self.tail.len() as u64;
                    self.spill = Some(f);
                }
                Err(e) => {
                    tracing::warn!(path = %plan.path.display(), error = %e, "cannot create a spill file");
                    self.spill_lost = true;
                    return;
                }
            }
        }
        let cap = plan.cap;
        if self.spilled + data.len() as u64 > cap {
            self.lose_spill();
            return;
        }
        let written = match self.spill.as_mut() {
            Some(f) => f.write_all(data),
            None => Err(std::io::ErrorKind::NotFound.into()),
        };
        match written {
            Ok(()) => self.spilled += data.len() as u64,
            Err(e) => {
                tracing::warn!(path = %plan.path.display(), error = %e, "a spill write failed; the spill file is dropped");
                self.lose_spill();
            }
        }
    }

    fn lose_spill(&mut self) {
        self.spill = None;
        self.spill_lost = true;
        if let Some(plan) = &self.plan {
            let _ = std::fs::remove_file(&plan.path);
        }
    }

    /// Consumes the output since the previous read.
    pub(crate) fn read(&mut self) -> StreamRead {
        let tail_start = self.total - self.tail.len() as u64;
        let (from, lossy) = if self.cursor < tail_start {
            (0, true)
        } else {
            ((self.cursor - tail_start) as usize, false)
        };
        let bytes: Vec<u8> = self.tail.range(from..).copied().collect();
        self.cursor = self.total;
        StreamRead { bytes, lossy }
    }

    /// The last `max` bytes retained, without consuming them.
    /// Bytes ever written to the stream.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    pub(crate) fn peek_tail(&self, max: usize) -> Vec<u8> {
        let skip = self.tail.len().saturating_sub(max);
        self.tail.range(skip..).copied().collect()
    }

    /// Closes the spill file (the path stays for reads of the full output).
    pub(crate) fn finish(&mut self) {
        if let Some(f) = self.spill.as_mut() {
            let _ = f.flush();
        }
    }
}

/// Creates a spill file exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600): whatever already has
/// its name, a planted symlink included, makes the creation fail instead of being followed or reused.
fn create_private(path: &std::path::Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(dir: &std::path::Path, cap: u64) -> Option<SpillPlan> {
        Some(SpillPlan {
            path: dir.join("s.log"),
            cap,
        })
    }

    /// A scratch directory, removed when dropped.
    struct Dir(PathBuf);
    impl std::ops::Deref for Dir {
        type Target = std::path::Path;
        fn deref(&self) -> &std::path::Path {
            &self.0
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn dir(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("taskhost-stream-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    #[test]
    fn a_symlink_planted_at_the_spill_path_is_never_followed() {
        let d = dir("planted");
        let victim = d.join("victim");
        std::fs::write(&victim, b"untouched").unwrap();
        std::os::unix::fs::symlink(&victim, d.join("s.log")).unwrap();
        let mut s = StreamBuf::new(2, plan(&d, 1 << 20));
        s.push(b"attacker-chosen destination");
        assert_eq!(std::fs::read(&victim).unwrap(), b"untouched");
        assert!(
            s.spill_path().is_none(),
            "the spill is lost, not redirected"
        );
        assert!(s.overflowed());
    }

    #[test]
    fn reads_consume_and_a_cursor_behind_the_tail_is_lossy() {
        let d = dir("lossy");
        let mut s = StreamBuf::new(4, plan(&d, 1 << 20));
        s.push(b"ab");
        assert_eq!(s.read().bytes, b"ab");
        s.push(b"cdefgh");
        let r = s.read();
        assert_eq!((r.bytes.as_slice(), r.lossy), (&b"efgh"[..], true));
        assert_eq!(std::fs::read(d.join("s.log")).unwrap(), b"abcdefgh");
        assert!(s.read().bytes.is_empty());
    }

    #[test]
    fn the_spill_file_is_private_and_dropped_past_the_cap() {
        use std::os::unix::fs::PermissionsExt;
        let d = dir("cap");
        let mut s = StreamBuf::new(2, plan(&d, 5));
        s.push(b"abc");
        let mode = std::fs::metadata(d.join("s.log"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(s.spill_path().is_some());
        s.push(b"def");
        assert!(s.spill_path().is_none());
        assert!(!d.join("s.log").exists());
        assert!(s.overflowed());
    }
}
