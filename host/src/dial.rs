//! The client's side of a host's socket (`taskhost connect`, `call`, `plugins`): connects and checks
//! who serves it before a byte is sent, since anyone who can create a file where the client looks
//! can serve a socket there.

use std::path::{Path, PathBuf};

use tokio::net::UnixStream;

/// Why a host's socket was not used.
#[derive(Debug, thiserror::Error)]
pub enum DialError {
    /// The socket could not be reached.
    #[error("cannot connect to {path}: {source}")]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The server's credentials could not be read.
    #[error("cannot tell who serves {path}: {source}")]
    Credentials {
        /// The socket path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The server runs as a user this client does not trust.
    #[error(
        "refusing {path}: its server runs as {server}, not as you ({me}) or root; pass --allow-server-uid {uid} if you trust it"
    )]
    Untrusted {
        /// The socket path.
        path: PathBuf,
        /// The server's user, named.
        server: String,
        /// This client's user, named.
        me: String,
        /// The server's uid.
        uid: u32,
    },
}

/// A user as people read it: `name (uid N)`, or `uid N` when it has no name.
pub fn user_name(uid: u32) -> String {
    match nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid)) {
        Ok(Some(user)) => format!("{} (uid {uid})", user.name),
        _ => format!("uid {uid}"),
    }
}

/// Connects to the host on `path` and admits it only when its server runs as this user, as root, or
/// as one of `allowed_server_uids` (read with `SO_PEERCRED`, which the kernel fills in at
/// `listen`, so the server cannot claim another identity).
///
/// # Errors
/// [`DialError`] naming the path (and both users when the server is refused).
pub async fn dial(path: &Path, allowed_server_uids: &[u32]) -> Result<UnixStream, DialError> {
    let stream = UnixStream::connect(path)
        .await
        .map_err(|source| DialError::Connect {
            path: path.to_owned(),
            source,
        })?;
    let uid = stream
        .peer_cred()
        .map_err(|source| DialError::Credentials {
            path: path.to_owned(),
            source,
        })?
        .uid();
    let me = crate::rundir::euid();
    if uid == me || uid == 0 || allowed_server_uids.contains(&uid) {
        return Ok(stream);
    }
    Err(DialError::Untrusted {
        path: path.to_owned(),
        server: user_name(uid),
        me: user_name(me),
        uid,
    })
}
