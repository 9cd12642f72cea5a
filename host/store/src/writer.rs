//! The one thread that writes the database: every write queued while it committed the previous
//! batch goes into the next transaction (group commit); then each caller is answered, and each
//! settlement's `then` is handed, in order, to the notifier thread. Records a full disk refused are
//! applied again once it has room ([`Retry`]).

use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender, TryRecvError};
use std::time::Duration;

use rusqlite::{Connection, TransactionBehavior, params};

/// The most writes one transaction takes.
const BATCH: usize = 512;

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
    /// A new owner: its name.
    MintOwner {
        secret_sha256: Option<Vec<u8>>,
        at_ms: u64,
        reply: SyncSender<Result<String, String>>,
    },
    /// How a task's external work is followed.
    External {
        id: String,
        record: crate::external::ExternalRecord,
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
    /// Retention: settled tasks past `keep_ms` or beyond `keep_bytes` of kept output, oldest
    /// first, lose their output files and are marked expired.
    Retain {
        /// The state's `output/`, where the kept files are.
        output: std::sync::Arc<taskhost_process::private_dir::HeldDir>,
        now_ms: u64,
        keep_ms: u64,
        keep_bytes: u64,
        reply: SyncSender<Vec<String>>,
    },
    /// This host ends: its row says so.
    EndHost {
        host: i64,
        at_ms: u64,
        reply: SyncSender<()>,
    },
}

/// Runs the writer on `conn` until its host ends ([`Op::EndHost`]) or every sender is gone. Writes
/// queued behind the end are refused (their senders see the store closed).
pub(crate) fn run(mut conn: Connection, ops: Receiver<Op>, notifier: Sender<Then>) {
    let mut retry = Retry::default();
    loop {
        let first = if retry.waiting() {
            match ops.recv_timeout(RETRY_EVERY) {
                Ok(op) => Some(op),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            }
        } else {
            match ops.recv() {
                Ok(op) => Some(op),
                Err(_) => break,
            }
        };
        let mut batch = retry.take();
        batch.extend(first);
        while batch.len() < BATCH && !matches!(batch.last(), Some(Op::EndHost { .. })) {
            match ops.try_recv() {
                Ok(op) => batch.push(op),
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        let ends = matches!(batch.last(), Some(Op::EndHost { .. }));
        let numbers = commit(&mut conn, &batch);
        retry.after(&batch, numbers.as_ref().map(|_| ()));
        answer(batch, numbers.map_err(|e| e.to_string()), &notifier);
        if ends {
            return;
        }
    }
}

/// What a committed batch answers: the numbers of its starts and the names of its new owners, in
/// order, and the ids retention expired.
#[derive(Default)]
struct Answers {
    numbers: Vec<u64>,
    owners: Vec<String>,
    expired: Vec<String>,
}

/// What one write answers.
enum Applied {
    Nothing,
    Number(u64),
    Owner(String),
}

/// Applies `batch` in one transaction.
fn commit(conn: &mut Connection, batch: &[Op]) -> rusqlite::Result<Answers> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let mut answers = Answers::default();
    for op in batch {
        if let Op::Retain {
            output,
            now_ms,
            keep_ms,
            keep_bytes,
            ..
        } = op
        {
            let expired = crate::retention::expire(&tx, output, *now_ms, *keep_ms, *keep_bytes)?;
            answers.expired.extend(expired);
        } else {
            match apply(&tx, op)? {
                Applied::Number(n) => answers.numbers.push(n),
                Applied::Owner(name) => answers.owners.push(name),
                Applied::Nothing => {}
            }
        }
    }
    tx.commit()?;
    Ok(answers)
}

/// Applies one write.
fn apply(tx: &rusqlite::Transaction<'_>, op: &Op) -> rusqlite::Result<Applied> {
    match op {
        Op::Begin {
            host,
            kind,
            label,
            owner,
            started_at_ms,
            ..
        } => {
            let n: i64 = tx.query_row(
                "INSERT INTO counters(kind, next) VALUES (?1, 1)
                 ON CONFLICT(kind) DO UPDATE SET next = next + 1 RETURNING next",
                params![kind],
                |r| r.get(0),
            )?;
            tx.execute(
                "INSERT INTO tasks(id, kind, number, host, owner, label, status, started_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'starting', ?7)",
                params![
                    task_id(kind, n as u64),
                    kind,
                    n,
                    host,
                    owner,
                    label,
                    *started_at_ms as i64
                ],
            )?;
            Ok(Applied::Number(n as u64))
        }
        Op::MintOwner {
            secret_sha256,
            at_ms,
            ..
        } => crate::owners::insert(tx, "session", secret_sha256.as_deref(), *at_ms)
            .map(Applied::Owner),
        Op::Foreground { host, record, .. } => {
            crate::foregrounds::insert(tx, *host, record).map(Applied::Number)
        }
        other => update(tx, other).map(|()| Applied::Nothing),
    }
}

/// Applies a write that answers nothing.
fn update(tx: &rusqlite::Transaction<'_>, op: &Op) -> rusqlite::Result<()> {
    let run = |sql: &str, values: &[&dyn rusqlite::ToSql]| tx.execute(sql, values).map(|_| ());
    match op {
        Op::Started { id } => run(
            "UPDATE tasks SET status = 'running' WHERE id = ?1 AND status = 'starting'",
            params![id],
        ),
        Op::Told { id } => run("UPDATE tasks SET told = 1 WHERE id = ?1", params![id]),
        Op::External { id, record } => crate::external::set(tx, id, record),
        Op::ExternalRead { id, offset, .. } => crate::external::read_to(tx, id, *offset),
        Op::Sync { .. } => Ok(()),
        Op::Read { id, out, err, .. } => run(
            "UPDATE tasks SET read_out = ?2, read_err = ?3 WHERE id = ?1",
            params![id, *out as i64, *err as i64],
        ),
        Op::EndOwner { name, at_ms, .. } => crate::owners::end(tx, name, *at_ms),
        Op::Abandon { kind, number } => {
            run(
                "DELETE FROM tasks WHERE id = ?1",
                params![task_id(kind, *number)],
            )?;
            run(
                "UPDATE counters SET next = next - 1 WHERE kind = ?1 AND next = ?2",
                params![kind, *number as i64],
            )
        }
        Op::ForegroundEnded { id } => crate::foregrounds::remove(tx, *id),
        Op::Stopping { id } => run(
            "UPDATE tasks SET status = 'stopping' WHERE id = ?1 AND status IN ('starting', 'running')",
            params![id],
        ),
        Op::Settled {
            id,
            status,
            detail,
            finished_at_ms,
            told,
            ..
        } => run(
            "UPDATE tasks SET status = ?2, detail = ?3, finished_at_ms = ?4, told = max(told, ?5)
             WHERE id = ?1",
            params![id, status, detail, *finished_at_ms as i64, *told],
        ),
        Op::Output { id, stdout, stderr } => run(
            "UPDATE tasks SET stdout_path = ?2, stderr_path = ?3 WHERE id = ?1",
            params![id, stdout, stderr],
        ),
        Op::EndHost { host, at_ms, .. } => run(
            "UPDATE hosts SET ended_at_ms = ?2 WHERE id = ?1",
            params![host, *at_ms as i64],
        ),
        Op::Begin { .. } | Op::Foreground { .. } | Op::MintOwner { .. } | Op::Retain { .. } => {
            Ok(())
        }
    }
}

/// Answers every caller of a committed (or failed) batch, in order.
fn answer(batch: Vec<Op>, answers: Result<Answers, String>, notifier: &Sender<Then>) {
    let expired = answers
        .as_ref()
        .map(|a| a.expired.clone())
        .unwrap_or_default();
    let mut numbers = answers.as_ref().map(|a| a.numbers.iter());
    let mut owners = answers.as_ref().map(|a| a.owners.iter());
    for op in batch {
        match op {
            Op::Begin { reply, .. } | Op::Foreground { reply, .. } => {
                let n = match &mut numbers {
                    Ok(it) => it.next().copied().ok_or_else(|| "no number".to_owned()),
                    Err(e) => Err(e.clone()),
                };
                let _ = reply.send(n);
            }
            // A settlement is told even when its write failed: the record is then wrong, which the
            // log says, but its owner is not left waiting for a notice.
            Op::Settled { then, .. } => {
                let _ = notifier.send(then);
            }
            Op::MintOwner { reply, .. } => {
                let name = match &mut owners {
                    Ok(it) => it.next().cloned().ok_or_else(|| "no owner".to_owned()),
                    Err(e) => Err(e.clone()),
                };
                let _ = reply.send(name);
            }
            Op::EndHost { reply, .. }
            | Op::EndOwner { reply, .. }
            | Op::Read { reply, .. }
            | Op::ExternalRead { reply, .. }
            | Op::Sync { reply } => {
                let _ = reply.send(());
            }
            Op::Retain { reply, .. } => {
                let _ = reply.send(expired.clone());
            }
            Op::Started { .. }
            | Op::Abandon { .. }
            | Op::Told { .. }
            | Op::External { .. }
            | Op::Stopping { .. }
            | Op::ForegroundEnded { .. }
            | Op::Output { .. } => {}
        }
    }
}

/// Runs settled tasks' `then`s in the order their writes committed.
pub(crate) fn notify(thens: Receiver<Then>) {
    while let Ok(then) = thens.recv() {
        then();
    }
}

/// The id a row with `number` of `kind` has.
pub(crate) fn task_id(kind: &str, number: u64) -> String {
    format!("{kind}-{number}")
}

/// How often kept writes are tried again while no other write comes.
pub(crate) const RETRY_EVERY: Duration = Duration::from_secs(1);

/// The most writes kept: past it the oldest are given up, which the log says.
const KEEP_MAX: usize = 10_000;

/// The writes a full disk (`SQLITE_FULL`) refused that answer nobody (a settlement, a start that
/// began, a kill, output paths, external work), applied again ahead of the next batch; a write that
/// answers a caller is answered with the failure. Whether the database is failing now.
#[derive(Default)]
pub(crate) struct Retry {
    ops: Vec<Op>,
    failing: bool,
}

impl Retry {
    /// True while writes wait to be tried again.
    pub(crate) fn waiting(&self) -> bool {
        !self.ops.is_empty()
    }

    /// The kept writes, to go first in the next batch.
    pub(crate) fn take(&mut self) -> Vec<Op> {
        std::mem::take(&mut self.ops)
    }

    /// After a batch was committed (`Ok`) or failed: a full disk's refused writes are kept (each
    /// at most once, the kept ones being part of `batch`); the log says when failing starts and
    /// ends.
    pub(crate) fn after(&mut self, batch: &[Op], result: Result<(), &rusqlite::Error>) {
        match result {
            Ok(()) => {
                if self.failing {
                    tracing::warn!("the task database is written again");
                }
                self.failing = false;
            }
            Err(e) => {
                let full = e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull);
                if !self.failing {
                    tracing::error!(
                        error = %e,
                        "a write of the task database failed{}",
                        if full { "; its records are written again once the disk has room" } else { "" }
                    );
                }
                self.failing = true;
                if full {
                    self.ops = batch.iter().filter_map(again).collect();
                    let over = self.ops.len().saturating_sub(KEEP_MAX);
                    if over > 0 {
                        tracing::error!(over, "task database writes given up: too many wait");
                        self.ops.drain(..over);
                    }
                }
            }
        }
    }
}

/// A copy of a write that answers nobody, to apply again.
fn again(op: &Op) -> Option<Op> {
    Some(match op {
        Op::Started { id } => Op::Started { id: id.clone() },
        Op::Told { id } => Op::Told { id: id.clone() },
        Op::Stopping { id } => Op::Stopping { id: id.clone() },
        Op::ForegroundEnded { id } => Op::ForegroundEnded { id: *id },
        Op::External { id, record } => Op::External {
            id: id.clone(),
            record: record.clone(),
        },
        Op::Output { id, stdout, stderr } => Op::Output {
            id: id.clone(),
            stdout: stdout.clone(),
            stderr: stderr.clone(),
        },
        Op::Settled {
            id,
            status,
            detail,
            finished_at_ms,
            told,
            ..
        } => Op::Settled {
            id: id.clone(),
            status: status.clone(),
            detail: detail.clone(),
            finished_at_ms: *finished_at_ms,
            told: *told,
            // Its owner was told when the write first failed.
            then: Box::new(|| {}),
        },
        _ => return None,
    })
}
