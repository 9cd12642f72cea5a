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
use crate::producer::{CancelFn, ReaderFn, WriterFn};
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
    /// Waiters on live tasks, all records together: changed only with a record's own count, by
    /// [`State::add_waiter`], [`State::remove_waiter`] and [`State::release_waiters`].
    pub(crate) pending_waiters: Waiters,
    /// Each owner's waits on output under way ([`crate::Registry::wait_for_output`]).
    pub(crate) output_waits: HashMap<OwnerKey, usize>,
}

/// A count of waiters. Only [`State`]'s waiter methods change one, so a record's count and the
/// registry's total always move together.
#[derive(Debug, Default)]
pub(crate) struct Waiters(usize);

impl Waiters {
    /// How many.
    pub(crate) fn count(&self) -> usize {
        self.0
    }
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
            pending_waiters: Waiters::default(),
            output_waits: HashMap::new(),
        }
    }

    /// Counts a waiter on live task `id`; false (nothing counted) when it is gone or settled.
    pub(crate) fn add_waiter(&mut self, id: &str) -> bool {
        match self.records.get_mut(id) {
            Some(rec) if rec.status.is_live() => {
                rec.pending_waiters.0 += 1;
                self.pending_waiters.0 += 1;
                true
            }
            _ => false,
        }
    }

    /// Un-counts one waiter of live task `id`; false when it is gone or settled (settlement released
    /// its waiters already).
    pub(crate) fn remove_waiter(&mut self, id: &str) -> bool {
        match self.records.get_mut(id) {
            Some(rec) if rec.status.is_live() && rec.pending_waiters.0 > 0 => {
                rec.pending_waiters.0 -= 1;
                self.pending_waiters.0 -= 1;
                true
            }
            _ => false,
        }
    }

    /// Releases every waiter of task `id`, which is settling; true when it had any.
    pub(crate) fn release_waiters(&mut self, id: &str) -> bool {
        let Some(rec) = self.records.get_mut(id) else {
            return false;
        };
        let n = std::mem::take(&mut rec.pending_waiters.0);
        self.pending_waiters.0 -= n;
        n > 0
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
///
/// Its counts change only through its methods, each of which keeps `reserved <= live`.
pub(crate) struct Bucket {
    /// Running and stopping tasks, plus starts between preflight and commit.
    live: u64,
    /// Starts between preflight and commit.
    reserved: u64,
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

    /// Running and stopping tasks, plus reserved starts.
    pub(crate) fn live(&self) -> u64 {
        self.live
    }

    /// Starts between preflight and commit.
    pub(crate) fn reserved(&self) -> u64 {
        self.reserved
    }

    /// Reserves a slot for a start, unless `limit` slots are taken.
    pub(crate) fn try_reserve(&mut self, limit: u64) -> bool {
        if self.live >= limit {
            return false;
        }
        self.live += 1;
        self.reserved += 1;
        true
    }

    /// A reserved start failed: its slot is free again.
    pub(crate) fn release_reservation(&mut self) {
        self.live = self.live.saturating_sub(1);
        self.reserved = self.reserved.saturating_sub(1);
    }

    /// A reserved start registered its task: the slot now counts a live task.
    pub(crate) fn commit_reservation(&mut self) {
        self.reserved = self.reserved.saturating_sub(1);
    }

    /// A live task settled: its slot is free.
    pub(crate) fn settle_one(&mut self) {
        self.live = self.live.saturating_sub(1);
    }
}

/// The producer's live hooks; present exactly while the task is live.
pub(crate) struct LiveHooks {
    pub(crate) cancel: CancelFn,
    pub(crate) reader: Option<ReaderFn>,
    pub(crate) peeker: Option<ReaderFn>,
    pub(crate) writer: Option<WriterFn>,
    pub(crate) watch: Option<crate::producer::WatchFactory>,
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
    pub(crate) pending_waiters: Waiters,
    /// Holds the terminal snapshot once settled.
    pub(crate) settled: watch::Sender<Option<TaskSnapshot>>,
    pub(crate) ops: SharedOps,
}

impl Record {
    /// Marks a settled task reported (its end was shown to its owner); true when it is settled.
    pub(crate) fn acknowledge(&mut self) -> bool {
        let settled = self.status.is_terminal();
        if settled {
            self.reported = true;
        }
        settled
    }

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
