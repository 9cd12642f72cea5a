//! Private directories: ours, closed to other users, never reached through a symlink. What the spill
//! files and the host's runtime directory are created in.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

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
    if meta.uid() != euid() {
        return refuse(format!("it is owned by uid {}, not {}", meta.uid(), euid()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return refuse(format!(
            "its mode is {:o}, open to other users",
            meta.permissions().mode() & 0o7777
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

/// Creates a fresh directory `<base>/<prefix>XXXXXX` (random suffix, created exclusively, mode 0700)
/// and checks it after creation.
///
/// # Errors
/// When it cannot be created, or what was created is not a private directory of ours.
pub fn make_fresh(base: &Path, prefix: &str) -> Result<PathBuf, PrivateDirError> {
    let template = base.join(format!("{prefix}XXXXXX"));
    let path = nix::unistd::mkdtemp(&template).map_err(|e| PrivateDirError::Io {
        path: template.clone(),
        source: e.into(),
    })?;
    check_private(&path)?;
    Ok(path)
}
