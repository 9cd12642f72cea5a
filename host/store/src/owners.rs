//! Owners that outlive their connection: each session's owner is a row of `owners`, named
//! `session-N` (unique within the state directory); one that may come back holds a secret of 256
//! random bits, of which the database keeps only the SHA-256.

use rusqlite::{Connection, OptionalExtension, params};

use crate::data::OwnerSecret;

/// The name of session owner row `n`.
fn owner_name(n: i64) -> String {
    format!("session-{n}")
}

/// Adds an owner; its name.
pub(crate) fn insert(
    tx: &rusqlite::Transaction<'_>,
    kind: &str,
    secret_sha256: Option<&[u8]>,
    now_ms: u64,
) -> rusqlite::Result<String> {
    tx.execute(
        "INSERT INTO owners(kind, secret_sha256, created_at_ms) VALUES (?1, ?2, ?3)",
        params![kind, secret_sha256, now_ms as i64],
    )?;
    Ok(owner_name(tx.last_insert_rowid()))
}

/// The owner a secret names, unless it has ended.
pub(crate) fn by_secret(
    conn: &Connection,
    secret: &OwnerSecret,
) -> rusqlite::Result<Option<String>> {
    conn.query_row(
        "SELECT id FROM owners WHERE kind = 'session' AND secret_sha256 = ?1
         AND ended_at_ms IS NULL",
        params![secret.sha256()],
        |r| r.get::<_, i64>(0),
    )
    .optional()
    .map(|n| n.map(owner_name))
}

/// Marks owner `name` ended: its secret names nobody from now on.
pub(crate) fn end(tx: &rusqlite::Transaction<'_>, name: &str, now_ms: u64) -> rusqlite::Result<()> {
    let Some(n) = name
        .strip_prefix("session-")
        .and_then(|n| n.parse::<i64>().ok())
    else {
        return Ok(());
    };
    tx.execute(
        "UPDATE owners SET ended_at_ms = ?2 WHERE id = ?1 AND ended_at_ms IS NULL",
        params![n, now_ms as i64],
    )?;
    Ok(())
}
