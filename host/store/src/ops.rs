//! The writes the store's writer thread takes.

use std::sync::mpsc::SyncSender;

/// What runs once a settlement is durable.
pub(crate) type Then = Box<dyn FnOnce() + Send>;

/// A write.
pub(crate) enum Op {
    /// A task about to start: its number, durably.
    Begin {
        host: i64,
        kind: String,
        label: String,
        owner: Option<String>,
        started_at_ms: u64,
        reply: SyncSender<Result<u64, String>>,
    },
    /// A start whose work began.
    Started { id: String },
    /// A start that failed: its record goes, and its number is given again when no later one was
    /// given (nobody was ever answered with it).
    Abandon { kind: String, number: u64 },
    /// Its owner was told of the task's end (a notice, or a read).
    Told { id: String },
    /// A running task whose keeper died while it held it for a successor.
    Unheld { id: String },
    /// A new owner: its name.
    MintOwner {
        secret_sha256: Option<Vec<u8>>,
        at_ms: u64,
        reply: SyncSender<Result<String, String>>,
    },
    /// How a task's external work is followed.
    External {
        id: String,
        record: crate::data::ExternalRecord,
    },
    /// Where the reads of a task's external work stand.
    ExternalRead {
        id: String,
        offset: u64,
        reply: SyncSender<()>,
    },
    /// Nothing: answered once every write queued before it is durable.
    Sync { reply: SyncSender<()> },
    /// Where the reads of a task's stdout and stderr stand; answered once durable.
    Read {
        id: String,
        out: u64,
        err: u64,
        reply: SyncSender<()>,
    },
    /// An owner ended: its secret names nobody from now on.
    EndOwner {
        name: String,
        at_ms: u64,
        reply: SyncSender<()>,
    },
    /// A kill was delivered.
    Stopping { id: String },
    /// A foreground command is about to run in host `host`: its id, durably.
    Foreground {
        host: i64,
        record: crate::ForegroundRecord,
        reply: SyncSender<Result<u64, String>>,
    },
    /// A foreground command ended or became a task.
    ForegroundEnded { id: u64 },
    /// A task waits, queued, with what it will run.
    Queue { id: String, spec: String },
    /// A queued task's row goes: its work began, or it settled.
    Unqueue { id: String },
    /// A queued task stays queued for the next host (this one stops).
    Park { id: String },
    /// A task's status is `queued`.
    Queued { id: String },
    /// A task settled.
    Settled {
        id: String,
        status: String,
        detail: Option<String>,
        finished_at_ms: u64,
        /// Its owner already knows of its end (it waited, read or killed it).
        told: bool,
        then: Then,
    },
    /// A task's kept output files.
    Output {
        id: String,
        stdout: Option<String>,
        stderr: Option<String>,
    },
    /// Retention: tasks whose kept files were removed are marked expired, without their output;
    /// answered once durable.
    Expire {
        ids: Vec<String>,
        now_ms: u64,
        reply: SyncSender<Result<(), String>>,
    },
    /// This host ends: its row says so.
    EndHost {
        host: i64,
        at_ms: u64,
        reply: SyncSender<()>,
    },
}
