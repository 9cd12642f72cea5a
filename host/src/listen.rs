//! The host's Unix socket: created private whatever the umask, refused to peers of other users, never
//! taken from a live host, and removed at exit only if it is still the one this host bound.
//!
//! "Still the one" is decided by the file's identity while a handle of it is held: the host keeps
//! the socket file open (`O_PATH`) from its bind to its removal, so the filesystem cannot give that
//! inode's number to another file meanwhile (a successor's socket, bound at the same path while
//! this host stops, once got the freed number and was removed as this host's own).
//!
//! Mode 0600 is set on the socket before `bind` (Linux takes the file's mode from the socket inode, less
//! the umask); peers are checked by `SO_PEERCRED` before anything is read (this user, root, or an
//! `--allow-uid`); a non-socket file or a live socket at the path is refused, a stale one replaced.
//! A socket systemd bound and passed (socket activation) is served as it is, and its file left.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use nix::sys::socket::{AddressFamily, Backlog, SockFlag, SockType, UnixAddr};
use nix::sys::stat::Mode;

/// Why the socket could not be had. Each names the path.
#[derive(Debug, thiserror::Error)]
pub enum ListenError {
    /// Something that is not a socket is at the path: it is left alone.
    #[error("{0} exists and is not a socket; refusing to replace it")]
    NotASocket(PathBuf),
    /// A live listener answers on the path.
    #[error("another taskhost serves {0}")]
    Taken(PathBuf),
    /// The OS refused a step.
    #[error("cannot listen on {path}: {source}")]
    Io {
        /// The socket path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// Who may connect: this user, root, and the uids allowed on purpose (`--allow-uid`).
#[derive(Clone, Debug, Default)]
pub struct PeerPolicy {
    /// Other uids allowed to connect.
    pub allowed: Vec<u32>,
}

impl PeerPolicy {
    /// True when a peer running as `uid` may connect.
    pub fn admits(&self, uid: u32) -> bool {
        uid == crate::rundir::euid() || uid == 0 || self.allowed.contains(&uid)
    }
}

/// A bound, listening socket and a handle of the file it made.
#[derive(Debug)]
pub struct BoundSocket {
    path: PathBuf,
    /// The socket file, held open so that its inode number stays its own.
    file: OwnedFd,
    listener: Option<std::os::unix::net::UnixListener>,
    /// False for a socket systemd made (socket activation): its file stays when this host stops.
    removed_at_drop: bool,
}

impl BoundSocket {
    /// Where it is bound.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Binds `path` with mode 0600 (set on the socket before `bind`, so no umask opens it). A stale
    /// socket at the path (nobody listening) is replaced; a live one, or any other file, is an error
    /// and is left untouched.
    ///
    /// # Errors
    /// [`ListenError`] naming the path.
    pub fn bind(path: &Path) -> Result<Self, ListenError> {
        let io = |source: std::io::Error| ListenError::Io {
            path: path.to_owned(),
            source,
        };
        match std::fs::symlink_metadata(path) {
            Ok(m) if !m.file_type().is_socket() => {
                return Err(ListenError::NotASocket(path.to_owned()));
            }
            Ok(_) => match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => return Err(ListenError::Taken(path.to_owned())),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    std::fs::remove_file(path).map_err(io)?;
                }
                Err(e) => return Err(io(e)),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let fd = nix::sys::socket::socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            None,
        )
        .map_err(|e| io(e.into()))?;
        // Linux gives a socket file the mode of the socket's inode, less the umask: set it first.
        nix::sys::stat::fchmod(&fd, Mode::from_bits_truncate(0o600)).map_err(|e| io(e.into()))?;
        let addr = UnixAddr::new(path).map_err(|e| io(e.into()))?;
        nix::sys::socket::bind(fd.as_raw_fd(), &addr).map_err(|e| match e {
            nix::errno::Errno::EADDRINUSE => ListenError::Taken(path.to_owned()),
            e => io(e.into()),
        })?;
        // Made before `listen`, so a failure from here on removes the file it bound.
        let mut bound = Self {
            path: path.to_owned(),
            file: hold_file(path).map_err(io)?,
            listener: None,
            removed_at_drop: true,
        };
        let backlog = Backlog::new(1024).map_err(|e| io(e.into()))?;
        nix::sys::socket::listen(&fd, backlog).map_err(|e| io(e.into()))?;
        bound.listener = Some(std::os::unix::net::UnixListener::from(fd));
        Ok(bound)
    }

    /// Serves on `listener`, a listening socket bound at `path` by a predecessor of this host (handed
    /// over by its keeper), if `path` is still a socket.
    ///
    /// # Errors
    /// [`ListenError`] when the path is gone or is not a socket.
    pub fn inherit(
        path: &Path,
        listener: std::os::unix::net::UnixListener,
    ) -> Result<Self, ListenError> {
        Self::adopt(path, listener, true)
    }

    /// Serves on `listener`, bound at `path` by systemd for this process (socket activation); the
    /// file is systemd's, and stays when this host stops.
    ///
    /// # Errors
    /// [`ListenError`] when the path is gone or is not a socket.
    pub fn activated(
        path: &Path,
        listener: std::os::unix::net::UnixListener,
    ) -> Result<Self, ListenError> {
        Self::adopt(path, listener, false)
    }

    fn adopt(
        path: &Path,
        listener: std::os::unix::net::UnixListener,
        removed_at_drop: bool,
    ) -> Result<Self, ListenError> {
        let io = |source: std::io::Error| ListenError::Io {
            path: path.to_owned(),
            source,
        };
        let file = hold_file(path).map_err(io)?;
        let meta = std::fs::File::from(file.try_clone().map_err(io)?)
            .metadata()
            .map_err(io)?;
        if !meta.file_type().is_socket() {
            return Err(ListenError::NotASocket(path.to_owned()));
        }
        listener.set_nonblocking(true).map_err(io)?;
        Ok(Self {
            path: path.to_owned(),
            file,
            listener: Some(listener),
            removed_at_drop,
        })
    }

    /// A second handle of the listening socket while it is not taken (for a handover).
    pub fn duplicate(&self) -> Option<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        self.listener.as_ref()?.as_fd().try_clone_to_owned().ok()
    }

    /// The listener, for the runtime that serves it (once).
    ///
    /// # Errors
    /// When it was taken already or tokio refuses it.
    pub fn take_listener(&mut self) -> std::io::Result<tokio::net::UnixListener> {
        let l = self
            .listener
            .take()
            .ok_or_else(|| std::io::Error::other("the listener was taken already"))?;
        tokio::net::UnixListener::from_std(l)
    }
}

/// A handle of the file at `path` itself (`O_PATH`, no link followed), which keeps its inode, and so
/// its number, from being reused while it is held.
fn hold_file(path: &Path) -> std::io::Result<OwnedFd> {
    use nix::fcntl::OFlag;
    let flags = OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    Ok(nix::fcntl::open(path, flags, Mode::empty())?)
}

impl Drop for BoundSocket {
    /// Removes the socket file only while it is still the one this host bound (the inode it holds):
    /// another host that replaced it keeps its own.
    fn drop(&mut self) {
        if !self.removed_at_drop {
            return;
        }
        let held = nix::sys::stat::fstat(&self.file).map(|s| (s.st_dev, s.st_ino));
        let ours = std::fs::symlink_metadata(&self.path).is_ok_and(|m| {
            held.is_ok_and(|(dev, ino)| (m.dev(), m.ino()) == (dev, ino))
                && m.file_type().is_socket()
        });
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
