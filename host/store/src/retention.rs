//! Retention: a state directory keeps settled tasks' output until it is older than `keep_days` or
//! the kept output passes `keep_bytes`, newest kept first. An expired task keeps its row (so its id
//! is never given again, and a read says it expired) without its files.
//!
//! What expires is decided on a reader's connection; the rows are then marked in batches of
//! `BATCH`, each a write of its own for the writer thread, which takes the others queued
//! meanwhile between two: a live write waits behind one small batch at most.

use std::sync::mpsc::{Sender, sync_channel};

use rusqlite::{Connection, Transaction, params};

use taskhost_process::private_dir::HeldDir;

use crate::kept;
use crate::writer::Op;

/// How long and how much a state directory keeps (`[state] keep_days`, `[state] keep_bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Settled tasks older than this many days expire.
    pub keep_days: u64,
    /// Kept output beyond this many bytes expires, oldest first.
    pub keep_bytes: u64,
}

impl Default for Retention {
    /// 30 days and 1 GiB.
    fn default() -> Self {
        Self {
            keep_days: 30,
            keep_bytes: 1 << 30,
        }
    }
}

/// How many records one of retention's transactions marks expired: the writer takes the other
/// writes queued meanwhile (a start, a read's position) between two, so a long history's
/// retention never holds it for long.
pub(crate) const BATCH: usize = 16;

/// A task retention expires: its id and its kept files' names.
pub(crate) type Due = (String, [Option<String>; 2]);

/// The settled tasks past the limits at `now_ms`, newest first, read on `conn` (a reader's: the
/// writer is not held while every kept file's size is looked at). A row that is not a record (a
/// value of the wrong type, a kept output that is no name of a file in `output/`) is skipped with
/// a warning naming it: nothing is removed for it.
pub(crate) fn due(
    conn: &Connection,
    output: &HeldDir,
    now_ms: u64,
    keep_ms: u64,
    keep_bytes: u64,
) -> rusqlite::Result<Vec<Due>> {
    let oldest_kept = now_ms.saturating_sub(keep_ms);
    let mut kept_bytes = 0u64;
    let mut due = Vec::new();
    for (id, finished, files) in settled(conn)? {
        let size: u64 = files
            .iter()
            .flatten()
            .map(|name| kept::size(output, name))
            .sum();
        if finished >= oldest_kept && kept_bytes + size <= keep_bytes {
            kept_bytes += size;
            continue;
        }
        due.push((id, files));
    }
    Ok(due)
}

/// Expires `due` in batches through the writer `ops`, at `now_ms`: a batch's kept files are removed
/// from `output` before the batch is marked, while the writer marks the batch before. Calls
/// `between` with each batch's ids once it is durable; returns the ids expired. A batch the writer
/// refuses stops it (logged).
pub(crate) fn expire(
    ops: &Sender<Op>,
    output: &HeldDir,
    due: &[Due],
    now_ms: u64,
    mut between: impl FnMut(&[String]),
) -> Vec<String> {
    let mut expired = Vec::new();
    let mut batches = due.chunks(BATCH).peekable();
    if let Some(first) = batches.peek() {
        remove(output, first);
    }
    while let Some(batch) = batches.next() {
        let ids: Vec<String> = batch.iter().map(|(id, _)| id.clone()).collect();
        let (reply, done) = sync_channel(1);
        let op = Op::Expire {
            ids: ids.clone(),
            now_ms,
            reply,
        };
        let sent = ops.send(op).is_ok();
        if let (true, Some(next)) = (sent, batches.peek()) {
            remove(output, next);
        }
        match done.recv().ok() {
            Some(Ok(())) => {}
            Some(Err(why)) => {
                tracing::warn!("retention stopped: a batch was not written: {why}");
                break;
            }
            None => break,
        }
        between(&ids);
        expired.extend(ids);
    }
    expired
}

/// Removes the kept files of `batch` from `output`. Done before the batch is marked: a host that
/// stops in between leaves rows naming files that are gone (read as empty), which the next
/// retention marks, never files no row names.
fn remove(output: &HeldDir, batch: &[Due]) {
    for name in batch.iter().flat_map(|(_, files)| files.iter().flatten()) {
        kept::remove(output, name);
    }
}

/// Marks, in `tx`, the tasks `ids` expired at `now_ms`, without their output (a row expired
/// already is left as it is).
pub(crate) fn mark(tx: &Transaction<'_>, ids: &[String], now_ms: u64) -> rusqlite::Result<()> {
    let mut stmt = tx.prepare_cached(
        "UPDATE tasks SET expired_at_ms = ?2, stdout_path = NULL, stderr_path = NULL
         WHERE id = ?1 AND expired_at_ms IS NULL",
    )?;
    for id in ids {
        stmt.execute(params![id, now_ms as i64])?;
    }
    Ok(())
}

/// A settled task's id, end and kept files' names.
type Settled = (String, u64, [Option<String>; 2]);

/// The settled tasks not yet expired, newest first; bad rows skipped with a warning.
fn settled(conn: &Connection) -> rusqlite::Result<Vec<Settled>> {
    let mut stmt = conn.prepare(
        "SELECT id, finished_at_ms, stdout_path, stderr_path FROM tasks
         WHERE finished_at_ms IS NOT NULL AND expired_at_ms IS NULL
         ORDER BY finished_at_ms DESC, rowid DESC",
    )?;
    let mut rows = stmt.query([])?;
    let mut settled = Vec::new();
    while let Some(r) = rows.next()? {
        let row = (|| -> rusqlite::Result<Settled> {
            let finished = r.get::<_, i64>(1)?;
            Ok((r.get(0)?, finished as u64, [r.get(2)?, r.get(3)?]))
        })();
        let why = match &row {
            Ok((_, _, files)) => files.iter().flatten().find_map(|name| {
                Some(format!(
                    "its kept output {name:?} {}",
                    kept::bad_name(name)?
                ))
            }),
            Err(e) => Some(e.to_string()),
        };
        match (row, why) {
            (Ok(row), None) => settled.push(row),
            (_, why) => {
                let id = r.get::<_, String>(0).unwrap_or_else(|_| "?".to_owned());
                tracing::warn!(
                    "retention skips the record of task {id:?} in tasks.db: {}",
                    why.unwrap_or_default()
                );
            }
        }
    }
    Ok(settled)
}
