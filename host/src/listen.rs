//! The host's Unix socket: created private whatever the umask, refused to peers of other users, never
//! taken from a live host, and removed at exit only if it is still the one this host bound.
//!
//! Mode 0600 is set on the socket before `bind` (Linux takes the file's mode from the socket inode, less
//! the umask); peers are checked by `SO_PEERCRED` before anything is read (this user, root, or an
//! `--allow-uid`); a non-socket file or a live socket at the path is refused, a stale one replaced.

use std::os::fd::AsRawFd;
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

/// A bound, listening socket and the identity of the file it made.
#[derive(Debug)]
pub struct BoundSocket {
    path: PathBuf,
    id: (u64, u64),
    listener: Option<std::os::unix::net::UnixListener>,
}

impl BoundSocket {
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
        let meta = std::fs::symlink_metadata(path).map_err(io)?;
        // Made before `listen`, so a failure from here on removes the file it bound.
        let mut bound = Self {
            path: path.to_owned(),
            id: (meta.dev(), meta.ino()),
            listener: None,
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
        let meta = std::fs::symlink_metadata(path).map_err(|source| ListenError::Io {
            path: path.to_owned(),
            source,
        })?;
        if !meta.file_type().is_socket() {
            return Err(ListenError::NotASocket(path.to_owned()));
        }
        listener
            .set_nonblocking(true)
            .map_err(|source| ListenError::Io {
                path: path.to_owned(),
                source,
            })?;
        Ok(Self {
            path: path.to_owned(),
            id: (meta.dev(), meta.ino()),
            listener: Some(listener),
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

impl Drop for BoundSocket {
    /// Removes the socket file only while it is still the one this host bound: another host that
    /// replaced it keeps its own.
    fn drop(&mut self) {
        let ours = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| (m.dev(), m.ino()) == self.id && m.file_type().is_socket());
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}
