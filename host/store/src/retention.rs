//! Retention: a state directory keeps settled tasks' output until it is older than `keep_days` or
//! the kept output passes `keep_bytes`, newest kept first. An expired task keeps its row (so its id
//! is never given again, and a read says it expired) without its files.

use rusqlite::{Transaction, params};

use taskhost_process::private_dir::HeldDir;

use crate::kept;

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

/// Expires, in `tx`, what is past the limits at `now_ms`, removing the kept files from `output`;
/// returns the ids expired. A row that is not a record (a value of the wrong type, a kept output
/// that is no name of a file in `output/`) is skipped with a warning naming it: nothing is removed
/// for it.
pub(crate) fn expire(
    tx: &Transaction<'_>,
    output: &HeldDir,
    now_ms: u64,
    keep_ms: u64,
    keep_bytes: u64,
) -> rusqlite::Result<Vec<String>> {
    let rows = settled(tx)?;
    let oldest_kept = now_ms.saturating_sub(keep_ms);
    let mut kept_bytes = 0u64;
    let mut expired = Vec::new();
    for (id, finished, files) in rows {
        let size: u64 = files
            .iter()
            .flatten()
            .map(|name| kept::size(output, name))
            .sum();
        if finished >= oldest_kept && kept_bytes + size <= keep_bytes {
            kept_bytes += size;
            continue;
        }
        for name in files.iter().flatten() {
            kept::remove(output, name);
        }
        tx.execute(
            "UPDATE tasks SET expired_at_ms = ?2, stdout_path = NULL, stderr_path = NULL
             WHERE id = ?1",
            params![id, now_ms as i64],
        )?;
        expired.push(id);
    }
    Ok(expired)
}

/// A settled task's id, end and kept files' names.
type Settled = (String, u64, [Option<String>; 2]);

/// The settled tasks not yet expired, newest first; bad rows skipped with a warning.
fn settled(tx: &Transaction<'_>) -> rusqlite::Result<Vec<Settled>> {
    let mut stmt = tx.prepare(
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
