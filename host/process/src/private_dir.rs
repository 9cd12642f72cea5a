//! Private directories: ours, closed to other users, never reached through a symlink. What the spill
//! files and the host's runtime directory are created in.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::stat::Mode;

/// Why a private directory could not be had. Each names the directory.
#[derive(Debug, thiserror::Error)]
pub enum PrivateDirError {
    /// The directory could not be created or inspected.
    #[error("cannot create the private directory {path}: {source}")]
    Io {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The directory exists but another user could write to it or replace it.
    #[error("refusing directory {path}: {why}")]
    NotPrivate {
        /// The directory.
        path: PathBuf,
        /// What makes it unsafe.
        why: String,
    },
}

/// The effective uid of this process.
pub fn euid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Checks, without following a symlink, that `path` is a directory owned by this user that nobody
/// else can write to, read or enter (no group or other permission bits).
///
/// # Errors
/// [`PrivateDirError::NotPrivate`] saying why; [`PrivateDirError::Io`] when it cannot be inspected.
pub fn check_private(path: &Path) -> Result<(), PrivateDirError> {
    let meta = std::fs::symlink_metadata(path).map_err(|source| PrivateDirError::Io {
        path: path.to_owned(),
        source,
    })?;
    let refuse = |why: String| {
        Err(PrivateDirError::NotPrivate {
            path: path.to_owned(),
            why,
        })
    };
    if meta.file_type().is_symlink() {
        return refuse("it is a symbolic link".to_owned());
    }
    if !meta.is_dir() {
        return refuse("it is not a directory".to_owned());
    }
    ours_and_closed(meta.uid(), meta.permissions().mode()).or_else(refuse)
}

/// Why a directory of owner `uid` and `mode` is not private: another owner, or any group or other
/// permission bit.
fn ours_and_closed(uid: u32, mode: u32) -> Result<(), String> {
    if uid != euid() {
        return Err(format!("it is owned by uid {uid}, not {}", euid()));
    }
    if mode & 0o077 != 0 {
        return Err(format!(
            "its mode is {:o}, open to other users",
            mode & 0o7777
        ));
    }
    Ok(())
}

/// Makes `path` a private directory: created with mode 0700 if it does not exist, and in any case
/// checked to be ours and closed to others (an existing directory is accepted only if it is).
///
/// # Errors
/// As [`check_private`], or the creation's error.
pub fn ensure_private(path: &Path) -> Result<(), PrivateDirError> {
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => {
            return Err(PrivateDirError::Io {
                path: path.to_owned(),
                source,
            });
        }
    }
    check_private(path)
}

/// A private directory held open: what the host creates in it is created relative to its
/// descriptor, so a directory put in its place at its path afterwards never receives anything.
#[derive(Debug)]
pub struct HeldDir {
    path: PathBuf,
    fd: OwnedFd,
}

impl HeldDir {
    /// Opens `path` without following a symlink and checks, on the descriptor, that it is a
    /// directory of ours closed to others.
    ///
    /// # Errors
    /// As [`check_private`].
    pub fn open(path: &Path) -> Result<Self, PrivateDirError> {
        let fd = nix::fcntl::open(
            path,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::ELOOP | Errno::ENOTDIR => PrivateDirError::NotPrivate {
                path: path.to_owned(),
                why: "it is a symbolic link or not a directory".to_owned(),
            },
            e => PrivateDirError::Io {
                path: path.to_owned(),
                source: e.into(),
            },
        })?;
        let held = Self {
            path: path.to_owned(),
            fd,
        };
        held.check()?;
        Ok(held)
    }

    /// Makes `path` private ([`ensure_private`]) and holds it.
    ///
    /// # Errors
    /// As [`ensure_private`].
    pub fn ensure(path: &Path) -> Result<Self, PrivateDirError> {
        ensure_private(path)?;
        Self::open(path)
    }

    /// Makes `path` private ([`ensure_private`]) and holds it as the walk from the root finds it
    /// ([`open_trusted_dir`]): every directory above it root's or ours and not writable by others
    /// unless sticky, so no other user can rename it or one above it and put another in its place.
    ///
    /// [`open_trusted_dir`]: crate::trusted_path::open_trusted_dir
    ///
    /// # Errors
    /// As [`ensure_private`]; [`PrivateDirError::NotPrivate`] naming the step of the walk that failed.
    pub fn ensure_trusted(path: &Path) -> Result<Self, PrivateDirError> {
        use crate::trusted_path::open_trusted_dir;
        // The walk first: nothing is made in a directory another user could swap.
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            open_trusted_dir(parent).map_err(|e| untrusted(path, e))?;
        }
        ensure_private(path)?;
        let fd = open_trusted_dir(path).map_err(|e| untrusted(path, e))?;
        let held = Self {
            path: path.to_owned(),
            fd,
        };
        held.check()?;
        Ok(held)
    }

    /// A path that names the held directory itself, whatever is at [`HeldDir::path`] now:
    /// `/proc/self/fd/N`. A library that opens files by path (SQLite) reaches the directory that
    /// was checked through it.
    pub fn through(&self) -> PathBuf {
        Path::new("/proc/self/fd").join(self.fd.as_raw_fd().to_string())
    }

    fn check(&self) -> Result<(), PrivateDirError> {
        let st = nix::sys::stat::fstat(&self.fd).map_err(|e| PrivateDirError::Io {
            path: self.path.clone(),
            source: e.into(),
        })?;
        ours_and_closed(st.st_uid, st.st_mode).map_err(|why| PrivateDirError::NotPrivate {
            path: self.path.clone(),
            why,
        })
    }

    /// The path the directory was opened at (for naming its files to people and to `dlopen`).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Creates the file `name` in the held directory exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`:
    /// whatever already has the name, a planted symlink included, makes it fail), open for reading
    /// and writing with `mode`.
    ///
    /// # Errors
    /// The OS's; `AlreadyExists` when the name is taken.
    pub fn create_new(&self, name: &str, mode: u32) -> std::io::Result<std::fs::File> {
        nix::fcntl::openat(
            &self.fd,
            name,
            OFlag::O_RDWR | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::from_bits_truncate(mode),
        )
        .map(std::fs::File::from)
        .map_err(Into::into)
    }

    /// Opens the existing file `name` in the held directory for reading and writing, never through
    /// a symlink (`O_NOFOLLOW`) and never creating it.
    ///
    /// # Errors
    /// The OS's; `NotFound` when nothing has the name.
    pub fn open_existing(&self, name: &str) -> std::io::Result<std::fs::File> {
        nix::fcntl::openat(
            &self.fd,
            name,
            OFlag::O_RDWR | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map(std::fs::File::from)
        .map_err(Into::into)
    }

    /// Creates the directory `name` (mode 0700) in the held directory and holds it.
    ///
    /// # Errors
    /// The OS's, or [`PrivateDirError::NotPrivate`] should what was opened not be what was made.
    pub fn make_dir(&self, name: &str) -> Result<Self, PrivateDirError> {
        self.subdir(name, false)
    }

    /// Holds the directory `name` in the held directory, made (mode 0700) if missing, never
    /// reached through a symlink, and checked private.
    ///
    /// # Errors
    /// As [`HeldDir::make_dir`], but for a directory that exists.
    pub fn ensure_dir(&self, name: &str) -> Result<Self, PrivateDirError> {
        self.subdir(name, true)
    }

    fn subdir(&self, name: &str, existing: bool) -> Result<Self, PrivateDirError> {
        let path = self.path.join(name);
        let io = |e: Errno| PrivateDirError::Io {
            path: path.clone(),
            source: e.into(),
        };
        match nix::sys::stat::mkdirat(&self.fd, name, Mode::from_bits_truncate(0o700)) {
            Err(Errno::EEXIST) if existing => {}
            made => made.map_err(io)?,
        }
        let fd = nix::fcntl::openat(
            &self.fd,
            name,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            Errno::ELOOP | Errno::ENOTDIR => PrivateDirError::NotPrivate {
                path: path.clone(),
                why: "it is a symbolic link or not a directory".to_owned(),
            },
            e => io(e),
        })?;
        let held = Self { path, fd };
        held.check()?;
        Ok(held)
    }
}

impl AsFd for HeldDir {
    /// The held directory, for `*at` calls relative to it.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Creates a fresh directory `<base>/<prefix>XXXXXX` (random suffix, created exclusively relative to
/// the base's descriptor, mode 0700) and holds it. The base must be one no other user can rename
/// entries in: every directory from the root down is checked ([`open_trusted_dir`]), so a `TMPDIR`
/// inside another user's directory is refused.
///
/// [`open_trusted_dir`]: crate::trusted_path::open_trusted_dir
///
/// # Errors
/// When the base is not trusted, or the directory cannot be created or is not what was made.
pub fn make_fresh(base: &Path, prefix: &str) -> Result<HeldDir, PrivateDirError> {
    let base_fd = crate::trusted_path::open_trusted_dir(base).map_err(|e| untrusted(base, e))?;
    let base_dir = HeldDir {
        path: base.to_owned(),
        fd: base_fd,
    };
    for _ in 0..100 {
        let name = format!("{prefix}{}", random_suffix());
        match base_dir.make_dir(&name) {
            Err(PrivateDirError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists => {}
            other => return other,
        }
    }
    Err(PrivateDirError::Io {
        path: base.to_owned(),
        source: std::io::ErrorKind::AlreadyExists.into(),
    })
}

/// A failed walk ([`open_trusted_dir`](crate::trusted_path::open_trusted_dir)) as the error of the
/// private directory `path`.
fn untrusted(path: &Path, e: crate::trusted_path::TrustError) -> PrivateDirError {
    use crate::trusted_path::TrustError;
    match e {
        TrustError::Untrusted { why, .. } => PrivateDirError::NotPrivate {
            path: path.to_owned(),
            why,
        },
        TrustError::Io { source, .. } => PrivateDirError::Io {
            path: path.to_owned(),
            source,
        },
    }
}

/// Six unpredictable characters (from the kernel's random source) for a fresh name.
fn random_suffix() -> String {
    use std::io::Read;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut bytes = [0u8; 6];
    let filled = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if filled.is_err() {
        // No /dev/urandom: the clock and the pid, still never an existing directory (created
        // exclusively).
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()) as u64
            ^ u64::from(std::process::id()).rotate_left(32);
        bytes.copy_from_slice(&t.to_le_bytes()[..6]);
    }
    bytes
        .iter()
        .map(|b| ALPHABET[usize::from(*b) % ALPHABET.len()] as char)
        .collect()
}
