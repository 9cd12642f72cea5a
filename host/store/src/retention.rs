//! Retention: a state directory keeps settled tasks' output until it is older than `keep_days` or
//! the kept output passes `keep_bytes`, newest kept first. An expired task keeps its row (so its id
//! is never given again, and a read says it expired) without its files.

use rusqlite::{Transaction, params};

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

/// Expires, in `tx`, what is past the limits at `now_ms`; returns the ids expired.
pub(crate) fn expire(
    tx: &Transaction<'_>,
    now_ms: u64,
    keep_ms: u64,
    keep_bytes: u64,
) -> rusqlite::Result<Vec<String>> {
    let rows: Vec<(String, i64, Option<String>, Option<String>)> = tx
        .prepare(
            "SELECT id, finished_at_ms, stdout_path, stderr_path FROM tasks
             WHERE finished_at_ms IS NOT NULL AND expired_at_ms IS NULL
             ORDER BY finished_at_ms DESC, rowid DESC",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<rusqlite::Result<_>>()?;
    let oldest_kept = now_ms.saturating_sub(keep_ms);
    let mut kept_bytes = 0u64;
    let mut expired = Vec::new();
    for (id, finished, stdout, stderr) in rows {
        let files = [stdout, stderr];
        let size: u64 = files
            .iter()
            .flatten()
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| m.len())
            .sum();
        if (finished as u64) >= oldest_kept && kept_bytes + size <= keep_bytes {
            kept_bytes += size;
            continue;
        }
        for path in files.iter().flatten() {
            let _ = std::fs::remove_file(path);
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
