//! The host's durable state (`serve --state DIR`): task records in an embedded SQLite database
//! (`tasks.db`, WAL) and the tasks' kept output files (`output/`), in a directory of mode 0700 checked
//! like the runtime directory.
//!
//! Entry points: [`Store::open`] (checks the directory and the database, registers this host, and
//! recovers what hosts that are gone left running), the registry's [`Journal`](taskhost_registry::Journal)
//! ([`Store::journal`]), and the read side for people ([`Store::tasks`], [`TaskRecord`]).
//!
//! **Durability.** Writes go to one writer thread (`writer.rs`), never to the async runtime's
//! workers. It takes every write queued while it committed the previous batch and commits them in one
//! transaction (group commit), then answers the callers: a start is answered once its record is
//! committed, a settlement's notices are sent once its record is. With `synchronous=NORMAL` (the
//! default, `[state] sync = "normal"`) a commit survives a crash of the host (SIGKILL, OOM): the WAL
//! is written before the answer. A power loss or a kernel crash can lose the last commits before the
//! next checkpoint; `sync = "full"` fsyncs the WAL at every commit and loses nothing answered.
//!
//! **Hosts.** Each host holds an exclusive `flock` on `hosts/<id>.lock` for its life. A host that
//! starts takes the lock of every other host recorded as live: a lock it gets belongs to a host that
//! is gone, whatever its pid is now. That host's running tasks become `lost` (exit unknown, their
//! kept output readable), those with a kill under way `killed`.
//!
//! **Owners.** Each session's owner is a row of `owners`, named `session-N` (unique within the
//! directory, so two hosts never give one name twice). An owner that may come back holds a secret
//! ([`OwnerSecret`], 256 random bits); the database keeps its SHA-256 only. Each task records
//! whether its owner was told of its end, so an owner that comes back to a later host is told once
//! of what it missed (a task found lost, one that settled while it was away).
//!
//! **Principals** are owners named by a bearer token (`taskhost token create NAME`), for clients
//! over HTTP: the token is shown once; the database keeps its SHA-256 ([`Store::create_principal`],
//! [`Store::principal_of`]).
//!
//! **External work** (a cluster's job) is not lost with its host: how it is followed (its work
//! id, poll and cancel commands, output file) and where its owner's reads stood are recorded, and
//! the next host of the directory takes it over ([`Recovered::adopted`]) and follows it on from
//! there.
//!
//! **Refused, not trusted:** a database of another user, a schema newer than this build knows, or a
//! file that is not a database is an error naming the file; nothing is overwritten. A state
//! directory another user could swap (see [`trusted_dir`]) is refused; the directory is held open
//! and everything in it is reached through the held descriptor. A row is not trusted either: a kept
//! output is a file name in `output/` (`kept.rs`), and a row that names anything else, or holds a
//! value of the wrong type, is skipped with a warning naming it.
//!
//! **Without SQLite.** The `sqlite` feature (on by default) is the store. Built without it (as the
//! engine is for `taskhost-testkit`, whose hosts keep no state), the crate keeps only its plain data
//! and a [`Store`] that cannot be made: code that holds an `Option<Arc<Store>>` compiles and its
//! store is always `None`.

mod data;
mod error;

pub use data::{
    Adopted, ExternalRecord, ForegroundRecord, OwnerSecret, Principal, Requeued, TaskRecord,
};
pub use error::StoreError;

#[cfg(not(feature = "sqlite"))]
mod absent;
#[cfg(not(feature = "sqlite"))]
pub use absent::Store;

/// Items of the store itself, built with the `sqlite` feature only.
macro_rules! with_sqlite {
    ($($item:item)*) => { $(#[cfg(feature = "sqlite")] $item)* };
}

with_sqlite! {
    mod database;
    mod external;
    mod handover;
    mod hosts;
    mod journal;
    mod kept;
    mod lost;
    mod marks;
    mod ops;
    mod owners;
    mod principals;
    mod queue;
    mod queued;
    mod readers;
    mod records;
    mod retention;
    mod retry;
    mod schema;
    mod store;
    mod trusted;
    mod writer;

    pub use handover::Takeover;
    pub use principals::{
        PrincipalGrants, PrincipalLookup, ProofKey, TOKEN_PREFIX, Token, valid_name,
    };
    pub use retention::Retention;
    pub use store::{Recovered, Store, Sync};
    pub use trusted::{refuse_lost, trusted_dir, trusted_dir_above};
}

#[cfg(all(test, feature = "sqlite"))]
mod tests;
