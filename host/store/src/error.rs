//! Why a state directory or its database was refused.

use std::path::PathBuf;

/// Why the store could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The state directory is not a private directory of this user's.
    #[error("state directory {path}: {why}")]
    Dir {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// The database belongs to another user.
    #[error("refusing {path}: it is owned by uid {owner}, not {me}")]
    Foreign {
        /// The database file.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// This process's uid.
        me: u32,
    },
    /// The database was written by a newer taskhost.
    #[error("refusing {path}: its schema version is {found}, newer than this taskhost's {known}")]
    NewerSchema {
        /// The database file.
        path: PathBuf,
        /// The version it has.
        found: i64,
        /// The newest this build knows.
        known: i64,
    },
    /// The file is not a usable database.
    #[error("refusing {path}: {why}")]
    Corrupt {
        /// The database file.
        path: PathBuf,
        /// SQLite's reason.
        why: String,
    },
    /// The state directory has no database (nothing was made: `taskhost tasks`).
    #[error("state directory {dir} has no task database: no host has kept tasks there")]
    NoDatabase {
        /// The directory.
        dir: PathBuf,
    },
    /// The database was removed while a host used it (see `lost.rs`): what happened, what to do.
    #[error("{0}")]
    Lost(String),
    /// The state directory cannot be written.
    #[error(
        "state directory {dir} is read-only ({why}): a host writes its task records there; make it \
         writable, or pass --state with another directory (--no-state keeps them in memory only)"
    )]
    ReadOnly {
        /// The directory.
        dir: PathBuf,
        /// Why it cannot be written.
        why: String,
    },
    /// A write or a read failed.
    #[error("the task database failed: {0}")]
    Sqlite(String),
    /// A principal's name is taken, unknown, or not one people can type.
    #[error("{0}")]
    Principal(String),
    /// The writer thread is gone (the store was closed).
    #[error("the task database is closed")]
    Closed,
}

#[cfg(feature = "sqlite")]
impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Sqlite(e.to_string())
    }
}
