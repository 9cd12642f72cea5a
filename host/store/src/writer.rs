//! The one thread that writes the database: every write queued while it committed the previous
//! batch goes into the next transaction (group commit); then each caller is answered, and each
//! settlement's `then` is handed, in order, to the notifier thread. Records a full disk refused are
//! applied again once it has room ([`Retry`]).

use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use rusqlite::{Connection, TransactionBehavior, params};

use crate::retry::{RETRY_EVERY, Retry};

/// The most writes one transaction takes.
const BATCH: usize = 512;

pub(crate) use crate::ops::{Op, Then};

/// What the writer keeps beside the database: the watch on its file, and the ids' marks.
pub(crate) struct Beside {
    pub(crate) watch: crate::lost::Watch,
    pub(crate) marks: crate::marks::Marks,
}

/// Starts the writer on `conn` and its notifier: the writes' sender and the two threads.
///
/// # Errors
/// A thread that cannot be started.
pub(crate) fn start(
    conn: Connection,
    beside: Beside,
) -> Result<(Sender<Op>, Vec<std::thread::JoinHandle<()>>), crate::StoreError> {
    // Every statement the writer runs stays prepared (there are about 25).
    conn.set_prepared_statement_cache_capacity(64);
    let (ops, queue) = std::sync::mpsc::channel();
    let (to_notifier, notices) = std::sync::mpsc::channel();
    let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(f)
            .map_err(|e| crate::StoreError::Sqlite(format!("cannot start the {name} thread: {e}")))
    };
    let threads = vec![
        spawn(
            "taskhost-store",
            Box::new(move || run(conn, queue, to_notifier, beside)),
        )?,
        spawn("taskhost-store-notify", Box::new(move || notify(notices)))?,
    ];
    Ok((ops, threads))
}

/// Runs the writer on `conn` until its host ends ([`Op::EndHost`]) or every sender is gone. Writes
/// queued behind the end are refused (their senders see the store closed). Once the database is
/// lost (see `lost.rs`; looked at before each batch and every [`RETRY_EVERY`] while none comes),
/// every write is refused saying why.
pub(crate) fn run(
    mut conn: Connection,
    ops: Receiver<Op>,
    notifier: Sender<Then>,
    mut beside: Beside,
) {
    let mut retry = Retry::default();
    loop {
        let first = match ops.recv_timeout(RETRY_EVERY) {
            Ok(op) => Some(op),
            Err(RecvTimeoutError::Timeout) if retry.waiting() => None,
            Err(RecvTimeoutError::Timeout) => {
                beside.watch.check();
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
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
        if let Some(why) = beside.watch.check() {
            answer(batch, Err(why), &notifier);
        } else {
            let numbers = commit(&mut conn, &batch);
            retry.after(&batch, numbers.as_ref().map(|_| ()));
            if let Ok(answers) = &numbers {
                beside.marks.note(issued(&batch, &answers.numbers));
            }
            answer(batch, numbers.map_err(|e| e.to_string()), &notifier);
        }
        if ends {
            return;
        }
    }
}

/// The task ids a committed batch issued: each start's kind and number.
fn issued<'a>(batch: &'a [Op], numbers: &'a [u64]) -> impl Iterator<Item = (&'a str, u64)> {
    batch
        .iter()
        .filter(|op| matches!(op, Op::Begin { .. } | Op::Foreground { .. }))
        .zip(numbers)
        .filter_map(|(op, n)| match op {
            Op::Begin { kind, .. } => Some((kind.as_str(), *n)),
            _ => None,
        })
}

/// What a committed batch answers: the numbers of its starts and the names of its new owners, in
/// order.
#[derive(Default)]
struct Answers {
    numbers: Vec<u64>,
    owners: Vec<String>,
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
        match apply(&tx, op)? {
            Applied::Number(n) => answers.numbers.push(n),
            Applied::Owner(name) => answers.owners.push(name),
            Applied::Nothing => {}
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
            let n: i64 = tx
                .prepare_cached(
                    "INSERT INTO counters(kind, next) VALUES (?1, 1)
                     ON CONFLICT(kind) DO UPDATE SET next = next + 1 RETURNING next",
                )?
                .query_row(params![kind], |r| r.get(0))?;
            tx.prepare_cached(
                "INSERT INTO tasks(id, kind, number, host, owner, label, status, started_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'starting', ?7)",
            )?
            .execute(params![
                task_id(kind, n as u64),
                kind,
                n,
                host,
                owner,
                label,
                *started_at_ms as i64
            ])?;
            Ok(Applied::Number(n as u64))
        }
        Op::MintOwner {
            secret_sha256,
            at_ms,
            ..
        } => crate::owners::insert(tx, "session", secret_sha256.as_deref(), *at_ms)
            .map(Applied::Owner),
        Op::Foreground { host, record, .. } => {
            crate::handover::foregrounds::insert(tx, *host, record).map(Applied::Number)
        }
        other => update(tx, other).map(|()| Applied::Nothing),
    }
}

/// Applies a write that answers nothing.
fn update(tx: &rusqlite::Transaction<'_>, op: &Op) -> rusqlite::Result<()> {
    let run = |sql: &str, values: &[&dyn rusqlite::ToSql]| {
        tx.prepare_cached(sql)?.execute(values).map(|_| ())
    };
    match op {
        Op::Started { id } => run(
            "UPDATE tasks SET status = 'running' WHERE id = ?1 AND status IN ('starting', 'queued')",
            params![id],
        ),
        Op::Queue { id, spec } => crate::queue::insert(tx, id, spec),
        Op::Unqueue { id } => crate::queue::remove(tx, id),
        Op::Park { id } => crate::queue::park(tx, id),
        Op::Queued { id } => run(
            "UPDATE tasks SET status = 'queued' WHERE id = ?1 AND status = 'starting'",
            params![id],
        ),
        Op::Told { id } => run("UPDATE tasks SET told = 1 WHERE id = ?1", params![id]),
        Op::Unheld { id } => run(
            "UPDATE tasks SET detail = ?2 WHERE id = ?1 AND status = 'running'",
            params![id, crate::hosts::UNHELD],
        ),
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
        Op::ForegroundEnded { id } => crate::handover::foregrounds::remove(tx, *id),
        Op::Stopping { id } => run(
            "UPDATE tasks SET status = 'stopping' WHERE id = ?1 AND status IN ('starting', 'running', 'queued')",
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
             WHERE id = ?1 AND id NOT IN (SELECT task_id FROM queue WHERE parked = 1)",
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
        Op::Expire { ids, now_ms, .. } => crate::retention::mark(tx, ids, *now_ms),
        Op::Begin { .. } | Op::Foreground { .. } | Op::MintOwner { .. } => Ok(()),
    }
}

/// Answers every caller of a committed (or failed) batch, in order.
fn answer(batch: Vec<Op>, answers: Result<Answers, String>, notifier: &Sender<Then>) {
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
            Op::Expire { reply, .. } => {
                let _ = reply.send(answers.as_ref().map(|_| ()).map_err(Clone::clone));
            }
            Op::Started { .. }
            | Op::Abandon { .. }
            | Op::Told { .. }
            | Op::Unheld { .. }
            | Op::External { .. }
            | Op::Stopping { .. }
            | Op::ForegroundEnded { .. }
            | Op::Queue { .. }
            | Op::Unqueue { .. }
            | Op::Park { .. }
            | Op::Queued { .. }
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
