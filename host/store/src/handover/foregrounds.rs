//! Foreground commands a host that hands over may have to leave running: a successor that takes
//! one over after a crash of its host makes it a background task of its caller's (an upgrade
//! promotes them first, so only a crash leaves one). A row is written, durably, before its command
//! starts, and lives until the command ends or becomes a task in its host.

use rusqlite::{Connection, params};

use crate::data::ForegroundRecord;

/// Records `r` as running in host `host`; its id.
pub(crate) fn insert(
    tx: &rusqlite::Transaction<'_>,
    host: i64,
    r: &ForegroundRecord,
) -> rusqlite::Result<u64> {
    tx.query_row(
        "INSERT INTO foregrounds(host, session, kind, label, request)
         VALUES (?1, ?2, ?3, ?4, ?5) RETURNING id",
        params![host, r.session, r.kind, r.label, r.request],
        |row| row.get::<_, i64>(0),
    )
    .map(|id| id as u64)
}

pub(crate) fn remove(tx: &rusqlite::Transaction<'_>, id: u64) -> rusqlite::Result<()> {
    tx.execute("DELETE FROM foregrounds WHERE id = ?1", params![id as i64])
        .map(|_| ())
}

/// Takes the foreground commands `held` (their rows' ids, as a gone host's keeper handed them
/// over) out of host `old`'s rows; every other row of `old` goes too (its command ended with the
/// host).
pub(crate) fn take_over(
    conn: &mut Connection,
    old: i64,
    held: &[u64],
) -> rusqlite::Result<Vec<ForegroundRecord>> {
    let ids = held.iter().filter_map(|&id| i64::try_from(id).ok());
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut taken = Vec::new();
    {
        let mut select = tx.prepare(
            "SELECT id, session, kind, label, request FROM foregrounds WHERE host = ?1 AND id = ?2",
        )?;
        for id in ids {
            let found = select.query_row(params![old, id], |r| {
                Ok(ForegroundRecord {
                    id: r.get::<_, i64>(0)? as u64,
                    session: r.get(1)?,
                    kind: r.get(2)?,
                    label: r.get(3)?,
                    request: r.get(4)?,
                })
            });
            match found {
                Ok(record) => taken.push(record),
                Err(rusqlite::Error::QueryReturnedNoRows) => {}
                Err(e) => return Err(e),
            }
        }
    }
    forget_host(&tx, old)?;
    tx.commit()?;
    Ok(taken)
}

/// Forgets every foreground command of host `host` (gone).
pub(crate) fn forget_host(tx: &rusqlite::Transaction<'_>, host: i64) -> rusqlite::Result<()> {
    tx.execute("DELETE FROM foregrounds WHERE host = ?1", params![host])
        .map(|_| ())
}
