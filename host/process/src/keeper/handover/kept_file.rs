//! A held stream's kept file as the keeper holds it: a descriptor the host sent (protocol 1 and 2),
//! or, since protocol 3, only its name in the kept directory the host told once, opened for a drain
//! or a handover and closed again. So a held task costs the keeper its two read ends, not four
//! descriptors.
//!
//! A file kept by name is opened relative to the held directory, never through a symlink
//! (`O_NOFOLLOW`), and must be the file that had the name when the task was held (its device and
//! inode): anything else in its place is no kept file, and its output stays in memory as past a
//! file's cap.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

/// The host's kept-output directory, as the host sent it.
pub(crate) type KeptDir = Arc<OwnedFd>;

/// Where a held stream's output is kept.
pub(crate) enum KeptFile {
    /// Nowhere: drained output stays in memory.
    None,
    /// A descriptor the host sent.
    Open(File),
    /// A name in the kept directory, and which file had it when the task was held.
    Named {
        dir: KeptDir,
        name: String,
        dev: u64,
        ino: u64,
    },
}

impl KeptFile {
    /// The file `name` in `dir`, checked now and remembered by its identity; `None` when it cannot
    /// be opened (nothing then is written to that name).
    pub(crate) fn named(dir: &KeptDir, name: &str) -> Self {
        match open(dir, name).and_then(|f| f.metadata()) {
            Ok(meta) if meta.is_file() => Self::Named {
                dir: dir.clone(),
                name: name.to_owned(),
                dev: meta.dev(),
                ino: meta.ino(),
            },
            _ => Self::None,
        }
    }

    /// Calls `f` with the file: the descriptor held, or the name opened for this call alone (and
    /// closed when it returns). `None` when there is no file, or what has the name is not it.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&File) -> R) -> Option<R> {
        match self {
            Self::None => None,
            Self::Open(file) => Some(f(file)),
            Self::Named { .. } => self.reopened().map(|file| f(&file)),
        }
    }

    /// Whether there is a file: the descriptor held, or the file that had the name when the task
    /// was held (its identity looked up by the name, not opened).
    pub(crate) fn is_there(&self) -> bool {
        match self {
            Self::None => false,
            Self::Open(_) => true,
            Self::Named {
                dir,
                name,
                dev,
                ino,
            } => {
                plain(name).is_ok()
                    && nix::sys::stat::fstatat(
                        dir.as_ref(),
                        name.as_str(),
                        nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
                    )
                    .is_ok_and(|st| {
                        (st.st_mode & libc::S_IFMT) == libc::S_IFREG
                            && (st.st_dev, st.st_ino) == (*dev, *ino)
                    })
            }
        }
    }

    /// The file as a descriptor of its own, for a handover: the one held, or the name opened.
    pub(crate) fn handed(&self) -> Option<OwnedFd> {
        match self {
            Self::None => None,
            Self::Open(file) => file.try_clone().ok().map(OwnedFd::from),
            Self::Named { .. } => self.reopened().map(OwnedFd::from),
        }
    }

    fn reopened(&self) -> Option<File> {
        let Self::Named {
            dir,
            name,
            dev,
            ino,
        } = self
        else {
            return None;
        };
        let file = open(dir, name).ok()?;
        let meta = file.metadata().ok()?;
        ((meta.dev(), meta.ino()) == (*dev, *ino)).then_some(file)
    }
}

/// Opens `name` in `dir` for reading and writing: a plain name only (no `/`, no `..`), never
/// through a symlink, never created.
fn open(dir: &KeptDir, name: &str) -> std::io::Result<File> {
    plain(name)?;
    openat(
        dir.as_ref(),
        name,
        OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map(File::from)
    .map_err(Into::into)
}

/// `name` when it is a plain name: not empty, no `/`, not `.` or `..`.
fn plain(name: &str) -> std::io::Result<&str> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(std::io::ErrorKind::InvalidInput.into());
    }
    Ok(name)
}
