//! The state directory as a host or a command for people holds it: walked from the root, private,
//! and not left with host locks but no database.

use std::path::Path;

use taskhost_process::private_dir::{HeldDir, PrivateDirError};

use crate::error::StoreError;

/// Refuses the state directory `dir` (held, see [`trusted_dir`]) when it has host locks but no
/// database: its database was removed while those hosts ran (a `serve` says so before it takes
/// anything over).
///
/// # Errors
/// [`StoreError::Lost`] saying what happened and what to do.
pub fn refuse_lost(dir: &HeldDir) -> Result<(), StoreError> {
    crate::lost::refuse_orphan_locks(dir)
}

/// The state directory `dir`, made (0700) if missing, and held as the walk from the root finds it:
/// every directory above it root's or this user's and not writable by others unless sticky, the
/// directory itself ours and closed to others.
///
/// # Errors
/// [`StoreError::Dir`] naming `dir` and the step that failed.
pub fn trusted_dir(dir: &Path) -> Result<HeldDir, StoreError> {
    HeldDir::ensure_trusted(dir).map_err(|e| StoreError::Dir {
        path: dir.to_owned(),
        why: match e {
            PrivateDirError::NotPrivate { why, .. } => why,
            e @ PrivateDirError::Io { .. } => e.to_string(),
        },
    })
}

/// Checks that `above`, a directory that exists above the state directory `dir`, and every
/// directory above it are root's or this user's and not writable by others unless sticky, before
/// anything is made on the way to `dir`.
///
/// # Errors
/// [`StoreError::Dir`] naming `dir` and the step that failed.
pub fn trusted_dir_above(above: &Path, dir: &Path) -> Result<(), StoreError> {
    use taskhost_process::trusted_path::{TrustError, open_trusted_dir};
    open_trusted_dir(above)
        .map(drop)
        .map_err(|e| StoreError::Dir {
            path: dir.to_owned(),
            why: match e {
                TrustError::Untrusted { why, .. } => why,
                e @ TrustError::Io { .. } => e.to_string(),
            },
        })
}
