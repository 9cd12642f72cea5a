//! Queued tasks (issue 44) that outlive their host: what each will run, in queue order, so the next
//! host of the state directory queues them again in that order. A row lives from the task's start
//! until its work begins or it settles; at a clean stop a host parks its queued tasks (their
//! records stay `queued`, their rows stay) rather than settling them.

use rusqlite::{Connection, params};

use crate::data::Requeued;
use crate::records;

/// The detail of a queued task whose host stopped and which has no row to run it from.
pub(crate) const LOST_QUEUED: &str = "the host stopped while it was queued; it did not run";

/// Records task `id` queued with `spec`: its row, its record's status.
pub(crate) fn insert(tx: &rusqlite::Transaction<'_>, id: &str, spec: &str) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT OR REPLACE INTO queue(task_id, spec) VALUES (?1, ?2)",
        params![id, spec],
    )?;
    tx.execute(
        "UPDATE tasks SET status = 'queued' WHERE id = ?1 AND status = 'starting'",
        params![id],
    )?;
    Ok(())
}

/// Forgets task `id`'s row: its work began, or it settled.
pub(crate) fn remove(tx: &rusqlite::Transaction<'_>, id: &str) -> rusqlite::Result<()> {
    tx.execute(
        "DELETE FROM queue WHERE task_id = ?1 AND parked = 0",
        params![id],
    )
    .map(|_| ())
}

/// Parks task `id`: its host stops, and its record stays `queued` for the next host.
pub(crate) fn park(tx: &rusqlite::Transaction<'_>, id: &str) -> rusqlite::Result<()> {
    tx.execute(
        "UPDATE queue SET parked = 1 WHERE task_id = ?1",
        params![id],
    )
    .map(|_| ())
}

/// Ends gone host `host`'s queued tasks that have no row to run from (`lost`, returned) and
/// forgets its foreground commands.
pub(crate) fn end_host(
    tx: &rusqlite::Transaction<'_>,
    host: i64,
    now_ms: u64,
) -> rusqlite::Result<Vec<String>> {
    crate::handover::foregrounds::forget_host(tx, host)?;
    lose_unqueued(tx, host, now_ms)
}

/// Marks `lost` the queued tasks of gone host `host` that have no row to run from.
fn lose_unqueued(
    tx: &rusqlite::Transaction<'_>,
    host: i64,
    now_ms: u64,
) -> rusqlite::Result<Vec<String>> {
    let ids: Vec<String> = tx
        .prepare(
            "SELECT id FROM tasks WHERE host = ?1 AND status = 'queued'
             AND id NOT IN (SELECT task_id FROM queue)",
        )?
        .query_map(params![host], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    tx.execute(
        "UPDATE tasks SET status = 'lost', finished_at_ms = ?2, detail = ?3
         WHERE host = ?1 AND status = 'queued' AND id NOT IN (SELECT task_id FROM queue)",
        params![host, now_ms as i64, LOST_QUEUED],
    )?;
    Ok(ids)
}

/// Takes over, for host `me`, every queued task of a host that has ended, in queue order: its
/// record becomes `me`'s and its row unparked. Rows of tasks no longer queued are dropped.
pub(crate) fn requeue(conn: &mut Connection, me: i64) -> rusqlite::Result<Vec<Requeued>> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute(
        "DELETE FROM queue WHERE task_id NOT IN (SELECT id FROM tasks WHERE status = 'queued')",
        [],
    )?;
    let rows: Vec<(String, String)> = tx
        .prepare(
            "SELECT q.task_id, q.spec FROM queue q JOIN tasks t ON t.id = q.task_id
             WHERE t.host IN (SELECT id FROM hosts WHERE ended_at_ms IS NOT NULL)
             ORDER BY q.seq",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .filter_map(|row| {
            row.map_err(|e| tracing::warn!("skipping a queued task's row in tasks.db: {e}"))
                .ok()
        })
        .collect();
    let mut taken = Vec::new();
    for (id, spec) in rows {
        tx.execute("UPDATE tasks SET host = ?2 WHERE id = ?1", params![id, me])?;
        tx.execute(
            "UPDATE queue SET parked = 0 WHERE task_id = ?1",
            params![id],
        )?;
        if let Some(record) = records::one(&tx, &id)? {
            taken.push(Requeued { record, spec });
        }
    }
    tx.commit()?;
    Ok(taken)
}
