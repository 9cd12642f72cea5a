//! A stream's spill file as the host holds it. A spill file (no state directory) stays open while its
//! process runs, as the only name it needs is its descriptor. A kept file (the state directory's) is
//! open only while it is written: the stream closes it after each write batch (a splice, a pushed
//! read, a flush of the gathered output) and opens it again, by name relative to the held output
//! directory, for the next. So a live task with a state holds two of the host's descriptors (its
//! pipes' read ends), not four, and the live bound is half the open-file limit with a state as
//! without (issue 41). A batch costs three more system calls (`openat`, `statx`, `close`; `strace
//! -c` of a 50 MB writer), and a writer's throughput did not move measurably (debug builds, three
//! runs each: 50 MB spliced in 0.15-0.21 s against 0.19-0.28 s before, 1 GB past the cap in
//! 1.81-1.88 s against 1.86-2.14 s).
//!
//! Opened again, a kept file must be the file the stream created: the name is opened with
//! `O_NOFOLLOW` (never through a symlink) and its device and inode compared with the ones it was
//! created with. Anything else in its place (the file removed, or replaced by this user) is a
//! failed write: a gap in the kept file ([`crate::kept_gap`]), never a write elsewhere.

use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use crate::private_dir::HeldDir;

/// Where a closed kept file is opened again, and which file it must be.
struct Reopen {
    dir: Arc<HeldDir>,
    name: String,
    dev: u64,
    ino: u64,
}

/// The handle of a stream's spill file: open, or (a kept file between batches) closed.
pub(crate) struct SpillHandle {
    open: Option<File>,
    /// Set for a kept file: it is closed between batches.
    reopen: Option<Reopen>,
}

impl SpillHandle {
    /// A spill file, held open until the stream drops it.
    pub(crate) fn spill(file: File) -> Self {
        Self {
            open: Some(file),
            reopen: None,
        }
    }

    /// A kept file `name` in `dir`, now open as `file`; closed by [`SpillHandle::close_kept`].
    /// `None` when `file` cannot be told apart from another (its `fstat` failed).
    pub(crate) fn kept(file: File, dir: Arc<HeldDir>, name: &str) -> io::Result<Self> {
        let meta = file.metadata()?;
        Ok(Self {
            open: Some(file),
            reopen: Some(Reopen {
                dir,
                name: name.to_owned(),
                dev: meta.dev(),
                ino: meta.ino(),
            }),
        })
    }

    /// The file, opened again if it was closed.
    ///
    /// # Errors
    /// The OS's; `NotFound` when what has the name is not the file the stream created.
    pub(crate) fn file(&mut self) -> io::Result<&File> {
        if self.open.is_none() {
            self.open = Some(self.reopened()?);
        }
        self.open
            .as_ref()
            .ok_or_else(|| io::ErrorKind::NotFound.into())
    }

    /// Reads `buf.len()` bytes at `offset`, through the open file or, for a kept file between
    /// batches, a descriptor opened for this read alone (closed again when it returns).
    ///
    /// # Errors
    /// As [`SpillHandle::file`], or the read's.
    pub(crate) fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        use std::os::unix::fs::FileExt;
        match &self.open {
            Some(file) => file.read_exact_at(buf, offset),
            None => self.reopened()?.read_exact_at(buf, offset),
        }
    }

    /// The kept file opened again by its name, checked to be the file the stream created.
    fn reopened(&self) -> io::Result<File> {
        let r = self.reopen.as_ref().ok_or(io::ErrorKind::NotFound)?;
        let file = r.dir.open_existing(&r.name)?;
        let meta = file.metadata()?;
        if (meta.dev(), meta.ino()) != (r.dev, r.ino) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the kept file was replaced",
            ));
        }
        Ok(file)
    }

    /// Closes a kept file until its next batch; a spill file stays open.
    pub(crate) fn close_kept(&mut self) {
        if self.reopen.is_some() {
            self.open = None;
        }
    }

    /// True while the file is open (a kept file within a batch, or a spill file).
    #[cfg(test)]
    pub(crate) fn is_open(&self) -> bool {
        self.open.is_some()
    }
}
