//! The registry's bookkeeping, kept so that no operation scans history: records by id, per-session and
//! unowned indexes in registration order, per-owner admission buckets.

use parking_lot::Mutex;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::watch;
use tokio::task::AbortHandle;

use crate::agent::Agent;
use crate::ids::{AgentId, SessionId, TaskId};
use crate::producer::{CancelFn, ReaderFn};
use crate::status::{TaskSnapshot, TaskStatus};

/// An admission bucket key: the owner's instance, or `None` for the shared unowned bucket.
pub(crate) type OwnerKey = Option<u64>;

pub(crate) fn owner_key(owner: Option<&Agent>) -> OwnerKey {
    owner.map(Agent::instance)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Open,
    Disposing,
    Disposed,
}

pub(crate) struct State {
    pub(crate) phase: Phase,
    pub(crate) records: HashMap<TaskId, Record>,
    pub(crate) next_seq: u64,
    pub(crate) counters: HashMap<String, u64>,
    pub(crate) by_session: HashMap<SessionId, BTreeMap<u64, TaskId>>,
    pub(crate) unowned: BTreeMap<u64, TaskId>,
    pub(crate) buckets: HashMap<OwnerKey, Bucket>,
    pub(crate) agents: HashMap<AgentId, Agent>,
    pub(crate) pending_waiters: usize,
}

impl State {
    pub(crate) fn new() -> Self {
        Self {
            phase: Phase::Open,
            records: HashMap::new(),
            next_seq: 0,
            counters: HashMap::new(),
            by_session: HashMap::new(),
            unowned: BTreeMap::new(),
            buckets: HashMap::new(),
            agents: HashMap::new(),
            pending_waiters: 0,
        }
    }

    pub(crate) fn is_live(&self, id: &TaskId) -> bool {
        self.records.get(id).is_some_and(|r| r.status.is_live())
    }

    pub(crate) fn index_for(&mut self, owner: Option<&Agent>) -> &mut BTreeMap<u64, TaskId> {
        match owner {
            Some(a) => self.by_session.entry(a.session().clone()).or_default(),
            None => &mut self.unowned,
        }
    }

    /// Drops a record and its index entry.
    pub(crate) fn remove_record(&mut self, id: &TaskId) {
        let Some(rec) = self.records.remove(id) else {
            return;
        };
        match &rec.owner {
            Some(a) => {
                if let Some(index) = self.by_session.get_mut(a.session()) {
                    index.remove(&rec.seq);
                    if index.is_empty() {
                        self.by_session.remove(a.session());
                    }
                }
            }
            None => {
                self.unowned.remove(&rec.seq);
            }
        }
    }
}

/// One owner's admission bucket and cleanup list: created by the owner's first start (its one cleanup
/// attach), removed when the owner is disposed.
pub(crate) struct Bucket {
    /// Running and stopping tasks, plus starts between preflight and commit.
    pub(crate) live: u64,
    /// Starts between preflight and commit.
    pub(crate) reserved: u64,
    /// Set when the owner's disposal began: no start may join it.
    pub(crate) closed: bool,
    pub(crate) tasks: Vec<TaskId>,
}

impl Bucket {
    pub(crate) fn new() -> Self {
        Self {
            live: 0,
            reserved: 0,
            closed: false,
            tasks: Vec::new(),
        }
    }
}

/// The producer's live hooks; present exactly while the task is live.
pub(crate) struct LiveHooks {
    pub(crate) cancel: CancelFn,
    pub(crate) reader: Option<ReaderFn>,
}

/// What producer calls for one task need; guarded by the task's own lock, which serializes cancel,
/// reads and settlement of that task and is never taken while the state lock is held.
pub(crate) struct Ops {
    pub(crate) hooks: Option<LiveHooks>,
    /// The last stream delta, drained at settlement, handed to the next read.
    pub(crate) remainder: String,
    pub(crate) watcher: Option<AbortHandle>,
}

pub(crate) type SharedOps = Arc<Mutex<Ops>>;

pub(crate) struct Record {
    pub(crate) id: TaskId,
    pub(crate) seq: u64,
    pub(crate) kind: String,
    pub(crate) label: String,
    pub(crate) output_limit_bytes: Option<u64>,
    pub(crate) owner: Option<Agent>,
    pub(crate) stream: bool,
    pub(crate) status: TaskStatus,
    pub(crate) detail: Option<String>,
    pub(crate) output: Option<String>,
    pub(crate) started_at_ms: u64,
    pub(crate) finished_at_ms: Option<u64>,
    pub(crate) reported: bool,
    pub(crate) pending_waiters: usize,
    /// Holds the terminal snapshot once settled.
    pub(crate) settled: watch::Sender<Option<TaskSnapshot>>,
    pub(crate) ops: SharedOps,
}

impl Record {
    pub(crate) fn snapshot(&self) -> TaskSnapshot {
        TaskSnapshot {
            id: self.id.clone(),
            kind: self.kind.clone(),
            label: self.label.clone(),
            output_limit_bytes: self.output_limit_bytes,
            owner_session: self.owner.as_ref().map(|a| a.session().clone()),
            status: self.status,
            detail: self.detail.clone(),
            started_at_ms: self.started_at_ms,
            finished_at_ms: self.finished_at_ms,
            reported: self.reported,
        }
    }
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
