//! The database's schema and its versions. `PRAGMA user_version` holds the version; each version
//! after the first is a migration from the one before, applied in order in one transaction.

use rusqlite::Connection;

use taskhost_process::private_dir::HeldDir;

/// The newest schema this build knows.
pub(crate) const VERSION: i64 = 10;

/// Version 1: hosts, per-kind id counters, tasks.
const V1: &str = "
CREATE TABLE hosts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    pid INTEGER NOT NULL,
    started_at_ms INTEGER NOT NULL,
    ended_at_ms INTEGER
);
CREATE TABLE counters (
    kind TEXT PRIMARY KEY,
    next INTEGER NOT NULL
);
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    number INTEGER NOT NULL,
    host INTEGER NOT NULL REFERENCES hosts(id),
    owner TEXT,
    label TEXT NOT NULL,
    status TEXT NOT NULL,
    detail TEXT,
    started_at_ms INTEGER NOT NULL,
    finished_at_ms INTEGER,
    stdout_path TEXT,
    stderr_path TEXT
);
CREATE INDEX tasks_by_host ON tasks(host, status);
";

/// Version 2: retention; an expired task keeps its row (its id is never given again) without its
/// output.
const V2: &str = "ALTER TABLE tasks ADD COLUMN expired_at_ms INTEGER;";

/// Version 3: owners that outlive their connection (a session's secret or a principal's token,
/// stored hashed), whether a task's end was told to its owner, `starting` for a task recorded before its work began, and how external
/// work is followed (so the next host re-attaches it).
const V3: &str = "
CREATE TABLE owners (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    name TEXT,
    secret_sha256 BLOB UNIQUE,
    created_at_ms INTEGER NOT NULL,
    ended_at_ms INTEGER
);
CREATE UNIQUE INDEX live_principals ON owners(name) WHERE kind = 'principal' AND ended_at_ms IS NULL;
ALTER TABLE tasks ADD COLUMN told INTEGER NOT NULL DEFAULT 0;
UPDATE tasks SET told = 1 WHERE status NOT IN ('running', 'stopping');
CREATE INDEX tasks_by_owner ON tasks(owner);
CREATE TABLE external (
    task_id TEXT PRIMARY KEY REFERENCES tasks(id),
    work_id TEXT NOT NULL,
    poll TEXT NOT NULL,
    cancel TEXT NOT NULL,
    output TEXT NOT NULL,
    poll_every_ms INTEGER NOT NULL,
    read_offset INTEGER NOT NULL DEFAULT 0
);
";

/// Version 4: where each task's owner's reads stand in its stdout and stderr, so a successor that
/// takes a running task over goes on from there.
const V4: &str = "
ALTER TABLE tasks ADD COLUMN read_out INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tasks ADD COLUMN read_err INTEGER NOT NULL DEFAULT 0;
";

/// Version 5: a principal whose token shows people's views every owner's tasks
/// (`taskhost token create NAME --all-owners`).
const V5: &str = "
ALTER TABLE owners ADD COLUMN sees_all INTEGER NOT NULL DEFAULT 0;
";

/// Version 6: foreground commands in flight in a host that hands over, so a successor that takes
/// one over after a crash makes it a task of its caller's.
const V6: &str = "
CREATE TABLE foregrounds (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    host INTEGER NOT NULL REFERENCES hosts(id),
    session TEXT,
    kind TEXT NOT NULL,
    label TEXT NOT NULL,
    request TEXT
);
";

/// Version 7: a task's kept output is the name of a file in `output/`, never a path; the paths
/// earlier versions stored are named by [`crate::kept::name_stored_paths`] (no SQL of its own).
const V7: &str = "";

/// Version 8: the policy a principal is bound to (`taskhost token create NAME --policy POLICY`);
/// none: the config's `[policy.default]`, if it has one.
const V8: &str = "
ALTER TABLE owners ADD COLUMN policy TEXT;
";

/// Version 9: queued tasks (issue 44), what each will run in queue order (`seq`), so the next
/// host queues them again; `parked` by a host that stopped cleanly (its record stays `queued`).
const V9: &str = "
CREATE TABLE queue (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    task_id TEXT NOT NULL UNIQUE REFERENCES tasks(id),
    spec TEXT NOT NULL,
    parked INTEGER NOT NULL DEFAULT 0
);
";

/// Version 10: a long history's newest records are read without a sort of all of them (the
/// view's first page: an owner's newest, or everyone's for an overseer).
const V10: &str = "
CREATE INDEX tasks_by_owner_start ON tasks(owner, started_at_ms);
CREATE INDEX tasks_by_start ON tasks(started_at_ms);
";

/// The migrations, `MIGRATIONS[n]` taking version `n` to `n + 1`.
const MIGRATIONS: &[&str] = &[V1, V2, V3, V4, V5, V6, V7, V8, V9, V10];

/// Brings the database to [`VERSION`], the state's kept files being in `output`; returns the version
/// it found.
///
/// # Errors
/// SQLite's; a version newer than [`VERSION`] is the caller's to refuse (it is returned unchanged).
pub(crate) fn migrate(conn: &mut Connection, output: &HeldDir) -> rusqlite::Result<i64> {
    let found: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found >= VERSION {
        return Ok(found);
    }
    // Immediate: the write lock is taken before the version is read again, so two hosts opening
    // one new directory at the same moment migrate it once (the second finds it done).
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let found: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    for (from, sql) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
        tx.execute_batch(sql)?;
        if from + 1 == 7 {
            crate::kept::name_stored_paths(&tx, output)?;
        }
        tx.pragma_update(None, "user_version", from as i64 + 1)?;
    }
    tx.commit()?;
    Ok(found)
}
