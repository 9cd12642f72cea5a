//! External work (a cluster's job) that outlives its host: how to follow it, and where its owner's
//! reads stood, so the next host of the state directory re-attaches it by its work id and goes on
//! from the byte the reader had reached.

use rusqlite::{Connection, params};

use crate::data::{Adopted, ExternalRecord};
use crate::records;

/// Records (or replaces) how task `id`'s work is followed.
pub(crate) fn set(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    e: &ExternalRecord,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT OR REPLACE INTO external(task_id, work_id, poll, cancel, output, poll_every_ms, read_offset)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            id,
            e.work_id,
            e.poll,
            e.cancel,
            e.output,
            e.poll_every_ms as i64,
            e.read_offset as i64
        ],
    )?;
    Ok(())
}

/// Moves where task `id`'s reads stand.
pub(crate) fn read_to(
    tx: &rusqlite::Transaction<'_>,
    id: &str,
    offset: u64,
) -> rusqlite::Result<()> {
    tx.execute(
        "UPDATE external SET read_offset = ?2 WHERE task_id = ?1",
        params![id, offset as i64],
    )?;
    Ok(())
}

/// Takes over, for host `me`, every live external task of a host that has ended. A row whose
/// values are not of their types is skipped with a warning naming it (left as it is, not adopted),
/// so one bad row cannot keep a host from starting.
pub(crate) fn adopt(conn: &mut Connection, me: i64) -> rusqlite::Result<Vec<Adopted>> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut orphans: Vec<(String, i64)> = Vec::new();
    {
        let mut stmt = tx.prepare(
            "SELECT t.id, t.host FROM tasks t JOIN external e ON e.task_id = t.id
             WHERE t.status IN ('starting', 'running', 'stopping')
               AND t.host IN (SELECT id FROM hosts WHERE ended_at_ms IS NOT NULL)",
        )?;
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            match (r.get(0), r.get(1)) {
                (Ok(id), Ok(host)) => orphans.push((id, host)),
                (Err(e), _) | (_, Err(e)) => skip("?", &e),
            }
        }
    }
    let mut adopted = Vec::new();
    for (id, old) in orphans {
        let external = match tx.query_row(
            "SELECT work_id, poll, cancel, output, poll_every_ms, read_offset FROM external
             WHERE task_id = ?1",
            [&id],
            |r| {
                Ok(ExternalRecord {
                    work_id: r.get(0)?,
                    poll: r.get(1)?,
                    cancel: r.get(2)?,
                    output: r.get(3)?,
                    poll_every_ms: r.get::<_, i64>(4)?.max(0) as u64,
                    read_offset: r.get::<_, i64>(5)?.max(0) as u64,
                })
            },
        ) {
            Ok(external) => external,
            Err(e) if is_decoding(&e) => {
                skip(&id, &e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let moved = tx.execute(
            "UPDATE tasks SET host = ?2 WHERE id = ?1 AND host = ?3",
            params![id, me, old],
        )?;
        if moved == 0 {
            continue;
        }
        let Some(record) = records::one(&tx, &id)? else {
            continue;
        };
        adopted.push(Adopted { record, external });
    }
    tx.commit()?;
    Ok(adopted)
}

/// True for an error of a value that is not of its column's type (the row is bad, not the
/// database).
fn is_decoding(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::InvalidColumnType(..)
            | rusqlite::Error::FromSqlConversionFailure(..)
            | rusqlite::Error::IntegralValueOutOfRange(..)
            | rusqlite::Error::Utf8Error(..)
    )
}

fn skip(id: &str, e: &rusqlite::Error) {
    tracing::warn!("skipping the external work record of task {id:?} in tasks.db: {e}");
}
