//! Foreground commands a host that hands over may have to leave running: a successor that takes
//! one over after a crash of its host makes it a background task of its caller's (an upgrade
//! promotes them first, so only a crash leaves one). A row lives from the command's start to its
//! end (or its promotion) in its host.

use rusqlite::{Connection, params};

/// The name a keeper holds a foreground command's process under (see
/// [`ForegroundRecord::number`]).
pub const FOREGROUND_PREFIX: &str = "foreground:";

/// A foreground command in flight, as its host recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForegroundRecord {
    /// The host's number for the process; its keeper holds it as `foreground:<number>`.
    pub number: u64,
    /// The calling session, which owns the task it becomes.
    pub session: Option<String>,
    /// The kind of the task it would become (`bash`).
    pub kind: String,
    /// What the task would show as its label.
    pub label: String,
    /// The JSON-RPC id of the call, as JSON text (a bridge's answer names the task by it).
    pub request: Option<String>,
    /// Its kept stdout, then stderr.
    pub stdout_path: Option<String>,
    /// Its kept stderr.
    pub stderr_path: Option<String>,
}

pub(crate) fn insert(
    tx: &rusqlite::Transaction<'_>,
    host: i64,
    r: &ForegroundRecord,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT OR REPLACE INTO foregrounds(host, number, session, kind, label, request,
             stdout_path, stderr_path) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            host,
            r.number as i64,
            r.session,
            r.kind,
            r.label,
            r.request,
            r.stdout_path,
            r.stderr_path
        ],
    )
    .map(|_| ())
}

pub(crate) fn remove(
    tx: &rusqlite::Transaction<'_>,
    host: i64,
    number: u64,
) -> rusqlite::Result<()> {
    tx.execute(
        "DELETE FROM foregrounds WHERE host = ?1 AND number = ?2",
        params![host, number as i64],
    )
    .map(|_| ())
}

/// Takes the foreground commands among `held` (the names a gone host's keeper handed over) out of
/// host `old`'s rows; every other row of `old` goes too (its command ended with the host).
pub(crate) fn take_over(
    conn: &mut Connection,
    old: i64,
    held: &[String],
) -> rusqlite::Result<Vec<ForegroundRecord>> {
    let numbers: Vec<i64> = held
        .iter()
        .filter_map(|h| h.strip_prefix(FOREGROUND_PREFIX)?.parse().ok())
        .collect();
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut taken = Vec::new();
    {
        let mut select = tx.prepare(
            "SELECT number, session, kind, label, request, stdout_path, stderr_path
             FROM foregrounds WHERE host = ?1 AND number = ?2",
        )?;
        for n in numbers {
            let found = select.query_row(params![old, n], |r| {
                Ok(ForegroundRecord {
                    number: r.get::<_, i64>(0)? as u64,
                    session: r.get(1)?,
                    kind: r.get(2)?,
                    label: r.get(3)?,
                    request: r.get(4)?,
                    stdout_path: r.get(5)?,
                    stderr_path: r.get(6)?,
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
