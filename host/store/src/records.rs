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
    /// `starting`, `running`, `stopping`, `completed`, `killed`, `failed` or `lost`.
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
    /// True once its owner was told of its end (a notice or a read).
    pub told: bool,
    /// Bytes of its stdout and stderr its owner's reads consumed.
    pub read: [u64; 2],
}

const COLUMNS: &str = "id, kind, owner, label, status, detail, started_at_ms, finished_at_ms, host, \
                       stdout_path, stderr_path, expired_at_ms, told, read_out, read_err";

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
        told: r.get::<_, i64>(12)? != 0,
        read: [r.get::<_, i64>(13)? as u64, r.get::<_, i64>(14)? as u64],
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

/// Owner `owner`'s records, oldest first.
pub(crate) fn owned_by(conn: &Connection, owner: &str) -> rusqlite::Result<Vec<TaskRecord>> {
    conn.prepare(&format!(
        "SELECT {COLUMNS} FROM tasks WHERE owner = ?1 ORDER BY started_at_ms, rowid"
    ))?
    .query_map([owner], record)?
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

/// The last `max_bytes` of each of `record`'s kept streams, as a read shows them; when a stream holds
/// more, the read ends saying which kept file has all of it.
///
/// # Errors
/// A kept file that exists but cannot be read.
pub fn kept_tail(record: &TaskRecord, max_bytes: u64) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut cut = Vec::new();
    let mut tail = |path: &Option<String>| -> std::io::Result<Vec<u8>> {
        let Some(p) = path else {
            return Ok(Vec::new());
        };
        let mut file = match std::fs::File::open(p) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let len = file.metadata()?.len();
        if len > max_bytes {
            file.seek(SeekFrom::Start(len - max_bytes))?;
            cut.push(taskhost_process::SpillRef {
                path: p.into(),
                head_and_tail: false,
            });
        }
        let mut bytes = Vec::new();
        file.take(max_bytes).read_to_end(&mut bytes)?;
        Ok(bytes)
    };
    let (out, err) = (tail(&record.stdout_path)?, tail(&record.stderr_path)?);
    Ok(taskhost_process::render_read(
        &out,
        &err,
        !cut.is_empty(),
        &cut,
    ))
}

/// The output `record` kept, as a read shows it: stdout, then `[stderr]` and stderr, each as a
/// terminal would draw it. Missing files read as empty (a task that wrote nothing).
///
/// # Errors
/// A kept file that exists but cannot be read.
pub fn kept_output(record: &TaskRecord) -> std::io::Result<String> {
    kept_tail(record, u64::MAX)
}
