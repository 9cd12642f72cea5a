//! Running tasks a gone host's keeper handed to this host, made this host's in the database.

use rusqlite::{Connection, params};

/// Running tasks a gone host's keeper handed to this host (see `Store::open_taking_over`).
pub struct Takeover {
    /// The gone host's row.
    pub host: i64,
    /// The task ids handed over.
    pub tasks: Vec<String>,
    /// The foreground commands handed over, by their records' ids ([`crate::ForegroundRecord::id`]).
    pub foregrounds: Vec<u64>,
    /// The gone host's lock, held until the tasks are this host's.
    pub lock: std::os::fd::OwnedFd,
}

/// Makes the running tasks `ids` of host `old` (gone, its keeper handing them over) host `me`'s,
/// in one transaction; returns their records. A task that settled meanwhile is not taken.
pub(crate) fn take_over_tasks(
    conn: &mut Connection,
    me: i64,
    old: i64,
    ids: &[String],
) -> rusqlite::Result<Vec<crate::TaskRecord>> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut taken = Vec::new();
    {
        // Prepared once for every id: thousands of tasks are handed over at once.
        let mut moving = tx.prepare(
            "UPDATE tasks SET host = ?2,
                 status = CASE status WHEN 'starting' THEN 'running' ELSE status END
             WHERE id = ?1 AND host = ?3 AND status IN ('starting', 'running', 'stopping')",
        )?;
        let mut reading = crate::records::one_statement(&tx)?;
        for id in ids {
            // A held task was spawned: one still `starting` (its start killed before the record
            // said so) runs.
            let moved = moving.execute(params![id, me, old])?;
            if moved == 1
                && let Some(record) = crate::records::one_with(&mut reading, id)?
            {
                taken.push(record);
            }
        }
    }
    tx.commit()?;
    Ok(taken)
}
