//! Task records as people and tools read them: `taskhost tasks`, and the output a task kept.

use rusqlite::{Connection, Row};

/// One task's record.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TaskRecord {
    /// The task id (`bash-3`).
    pub id: String,
    /// Its kind.
    pub kind: String,
    /// The session that owned it, if any.
    pub owner: Option<String>,
    /// Its command or summary.
    pub label: String,
    /// `running`, `stopping`, `completed`, `killed`, `failed` or `lost`.
    pub status: String,
    /// Its detail: an exit code, a signal, why it failed or was lost.
    pub detail: Option<String>,
    /// When it started, ms since the Unix epoch.
    pub started_at_ms: u64,
    /// When it settled (or was found lost), ms since the Unix epoch.
    pub finished_at_ms: Option<u64>,
    /// The host that ran it (its row in the database).
    pub host: i64,
    /// Its kept stdout, if any.
    pub stdout_path: Option<String>,
    /// Its kept stderr, if any.
    pub stderr_path: Option<String>,
    /// When retention removed its output, ms since the Unix epoch.
    pub expired_at_ms: Option<u64>,
}

const COLUMNS: &str = "id, kind, owner, label, status, detail, started_at_ms, finished_at_ms, host, \
                       stdout_path, stderr_path, expired_at_ms";

fn record(r: &Row<'_>) -> rusqlite::Result<TaskRecord> {
    Ok(TaskRecord {
        id: r.get(0)?,
        kind: r.get(1)?,
        owner: r.get(2)?,
        label: r.get(3)?,
        status: r.get(4)?,
        detail: r.get(5)?,
        started_at_ms: r.get::<_, i64>(6)? as u64,
        finished_at_ms: r.get::<_, Option<i64>>(7)?.map(|t| t as u64),
        host: r.get(8)?,
        stdout_path: r.get(9)?,
        stderr_path: r.get(10)?,
        expired_at_ms: r.get::<_, Option<i64>>(11)?.map(|t| t as u64),
    })
}

/// Every record, oldest first.
pub(crate) fn all(conn: &Connection) -> rusqlite::Result<Vec<TaskRecord>> {
    conn.prepare(&format!(
        "SELECT {COLUMNS} FROM tasks ORDER BY started_at_ms, rowid"
    ))?
    .query_map([], record)?
    .collect()
}

/// The record of task `id`.
pub(crate) fn one(conn: &Connection, id: &str) -> rusqlite::Result<Option<TaskRecord>> {
    use rusqlite::OptionalExtension;
    conn.query_row(
        &format!("SELECT {COLUMNS} FROM tasks WHERE id = ?1"),
        [id],
        record,
    )
    .optional()
}

/// The output `record` kept, as a read shows it: stdout, then `[stderr]` and stderr, each as a
/// terminal would draw it. Missing files read as empty (a task that wrote nothing).
///
/// # Errors
/// A kept file that exists but cannot be read.
pub fn kept_output(record: &TaskRecord) -> std::io::Result<String> {
    let read = |path: &Option<String>| -> std::io::Result<Vec<u8>> {
        match path {
            None => Ok(Vec::new()),
            Some(p) => match std::fs::read(p) {
                Ok(bytes) => Ok(bytes),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
                Err(e) => Err(e),
            },
        }
    };
    let (out, err) = (read(&record.stdout_path)?, read(&record.stderr_path)?);
    Ok(taskhost_process::render_read(&out, &err, false, &[]))
}
