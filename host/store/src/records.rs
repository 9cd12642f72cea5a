//! Task records as people and tools read them: `taskhost tasks`, and the output a task kept. A row
//! that is not a record (a value of the wrong type, a kept output that is no name of a file in
//! `output/`) is skipped with a warning naming it; the others are read.

use rusqlite::{Connection, Row};

use taskhost_process::private_dir::HeldDir;

pub(crate) use crate::data::TaskRecord;

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

/// The record of row `r`, or `None` (said in a warning naming the row) when it is not one.
fn checked(r: &Row<'_>) -> Option<TaskRecord> {
    let why = match record(r) {
        Ok(rec) => {
            let bad = [("stdout", &rec.stdout_path), ("stderr", &rec.stderr_path)]
                .into_iter()
                .find_map(|(which, name)| {
                    let name = name.as_deref()?;
                    let why = crate::kept::bad_name(name)?;
                    Some(format!("its kept {which} {name:?} {why}"))
                });
            match bad {
                None => return Some(rec),
                Some(why) => why,
            }
        }
        Err(e) => e.to_string(),
    };
    let id = match r.get_ref(0) {
        Ok(rusqlite::types::ValueRef::Text(t)) => String::from_utf8_lossy(t).into_owned(),
        Ok(v) => format!("{v:?}"),
        Err(e) => e.to_string(),
    };
    tracing::warn!("skipping the record of task {id:?} in tasks.db: {why}");
    None
}

/// The records `sql` selects with `params`, in its order, bad rows skipped.
fn select<P: rusqlite::Params>(
    conn: &Connection,
    sql: &str,
    params: P,
) -> rusqlite::Result<Vec<TaskRecord>> {
    let mut stmt = conn.prepare(sql)?;
    let mut rows = stmt.query(params)?;
    let mut records = Vec::new();
    while let Some(row) = rows.next()? {
        records.extend(checked(row));
    }
    Ok(records)
}

/// Every record, oldest first.
pub(crate) fn all(conn: &Connection) -> rusqlite::Result<Vec<TaskRecord>> {
    select(
        conn,
        &format!("SELECT {COLUMNS} FROM tasks ORDER BY started_at_ms, rowid"),
        [],
    )
}

/// Owner `owner`'s records, oldest first.
pub(crate) fn owned_by(conn: &Connection, owner: &str) -> rusqlite::Result<Vec<TaskRecord>> {
    select(
        conn,
        &format!("SELECT {COLUMNS} FROM tasks WHERE owner = ?1 ORDER BY started_at_ms, rowid"),
        [owner],
    )
}

/// The newest `limit` records of owner `owner` (every owner's when `None`), newest first: read
/// through an index, never all of a long history.
pub(crate) fn newest(
    conn: &Connection,
    owner: Option<&str>,
    limit: u64,
) -> rusqlite::Result<Vec<TaskRecord>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let order = "ORDER BY started_at_ms DESC, rowid DESC";
    match owner {
        Some(owner) => select(
            conn,
            &format!("SELECT {COLUMNS} FROM tasks WHERE owner = ?1 {order} LIMIT ?2"),
            rusqlite::params![owner, limit],
        ),
        None => select(
            conn,
            &format!("SELECT {COLUMNS} FROM tasks {order} LIMIT ?1"),
            [limit],
        ),
    }
}

/// The record of task `id` (`None` for a row that is not one, said in a warning).
pub(crate) fn one(conn: &Connection, id: &str) -> rusqlite::Result<Option<TaskRecord>> {
    one_with(&mut one_statement(conn)?, id)
}

/// The statement [`one_with`] reads a record with, prepared once for many reads.
pub(crate) fn one_statement(conn: &Connection) -> rusqlite::Result<rusqlite::Statement<'_>> {
    conn.prepare(&format!("SELECT {COLUMNS} FROM tasks WHERE id = ?1"))
}

/// As [`one`], through `stmt` ([`one_statement`]).
pub(crate) fn one_with(
    stmt: &mut rusqlite::Statement<'_>,
    id: &str,
) -> rusqlite::Result<Option<TaskRecord>> {
    let mut rows = stmt.query([id])?;
    let mut found = None;
    while let Some(row) = rows.next()? {
        found = checked(row).or(found);
    }
    Ok(found)
}

/// The last `max_bytes` of each of `record`'s kept streams in `output` from `from` (a position in
/// each, stdout's then stderr's), as a read shows them (drawn as `drawn` says); when a stream holds more, the read ends
/// saying which kept file has all of it.
///
/// # Errors
/// A kept file that exists but cannot be read, or is not a regular file (a symlink is not followed).
pub(crate) fn kept_tail(
    output: &HeldDir,
    record: &TaskRecord,
    max_bytes: u64,
    from: [u64; 2],
    drawn: taskhost_process::Drawn,
) -> std::io::Result<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut cut = Vec::new();
    let mut tail = |name: &Option<String>, from: u64| -> std::io::Result<Vec<u8>> {
        let Some(name) = name else {
            return Ok(Vec::new());
        };
        let Some(mut file) = crate::kept::open(output, name)? else {
            return Ok(Vec::new());
        };
        let len = file.metadata()?.len();
        let from = from.min(len);
        if len - from > max_bytes {
            file.seek(SeekFrom::Start(len - max_bytes))?;
            cut.push(taskhost_process::SpillRef {
                path: output.path().join(name),
                head_and_tail: false,
            });
        } else {
            file.seek(SeekFrom::Start(from))?;
        }
        let mut bytes = Vec::new();
        file.take(max_bytes).read_to_end(&mut bytes)?;
        Ok(bytes)
    };
    let (out, err) = (
        tail(&record.stdout_path, from[0])?,
        tail(&record.stderr_path, from[1])?,
    );
    Ok(taskhost_process::render_read_drawn(
        &out,
        &err,
        !cut.is_empty(),
        &cut,
        drawn,
    ))
}
