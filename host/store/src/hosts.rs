//! Hosts of a state directory: each holds an exclusive `flock` on `hosts/<id>.lock` for its life,
//! so a host that starts tells the hosts that are gone (their lock is free) from the live ones, and
//! recovers what the gone ones left running.

use std::fs::File;

use nix::fcntl::{Flock, FlockArg};
use rusqlite::{Connection, params};

use taskhost_process::private_dir::HeldDir;

/// The detail of a task that was running when its host stopped.
pub(crate) const LOST: &str = "the host stopped while it ran; its exit is unknown";

/// The detail a running task is marked with when the keeper that held it for a successor died.
pub(crate) const UNHELD: &str =
    "its keeper died while it ran: it is no longer held for a successor of its host";

/// The detail of such a task that was running when its host stopped.
pub(crate) const LOST_UNHELD: &str = "the handover ended it: its keeper died while it ran, so no successor could take it over, and the task ended with its host; its exit is unknown";

/// The detail of a task recorded but not yet seen started when its host stopped.
pub(crate) const LOST_STARTING: &str =
    "the host stopped while the task was starting; it may not have run";

/// The detail of a task whose kill was under way when its host stopped.
pub(crate) const KILLED: &str = "killed; the host stopped before its end was seen";

/// Registers a host: its row, and its lock held (returned; dropping it releases the lock). The row
/// is committed only once the lock is held, so no other host ever sees this one without its lock
/// (and takes it for gone).
pub(crate) fn register(
    conn: &mut Connection,
    dir: &HeldDir,
    now_ms: u64,
) -> Result<(i64, Flock<File>), String> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(|e| e.to_string())?;
    tx.execute(
        "INSERT INTO hosts(pid, started_at_ms) VALUES (?1, ?2)",
        params![std::process::id(), now_ms as i64],
    )
    .map_err(|e| e.to_string())?;
    let id = tx.last_insert_rowid();
    let file = dir
        .create_new(&format!("{id}.lock"), 0o600)
        .map_err(|e| format!("cannot make the host's lock: {e}"))?;
    let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock)
        .map_err(|(_, e)| format!("cannot lock the host's lock: {e}"))?;
    tx.commit().map_err(|e| e.to_string())?;
    Ok((id, lock))
}

/// What recovery found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Recovered {
    /// Tasks that were running when their host stopped: now `lost`.
    pub lost: Vec<String>,
    /// Tasks with a kill under way: now `killed`.
    pub killed: Vec<String>,
    /// External tasks of hosts that are gone, now this host's to follow (none when the store was
    /// opened only to read).
    pub adopted: Vec<crate::data::Adopted>,
    /// Queued tasks of hosts that are gone, in queue order, now this host's to queue again (none
    /// when the store was opened only to read).
    pub requeued: Vec<crate::data::Requeued>,
}

/// Settles the tasks of every host recorded as live whose lock is free (it is gone), other than
/// `me`, and marks those hosts ended.
pub(crate) fn recover(
    conn: &mut Connection,
    dir: &HeldDir,
    me: Option<i64>,
    now_ms: u64,
) -> rusqlite::Result<Recovered> {
    let live: Vec<i64> = conn
        .prepare("SELECT id FROM hosts WHERE ended_at_ms IS NULL")?
        .query_map([], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    let mut recovered = Recovered::default();
    for host in live.into_iter().filter(|h| Some(*h) != me) {
        let Some(_held) = gone(dir, host) else {
            continue;
        };
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        settle_gone(&tx, host, now_ms, &mut recovered)?;
        recovered
            .lost
            .extend(crate::queue::end_host(&tx, host, now_ms)?);
        tx.execute(
            "UPDATE hosts SET ended_at_ms = ?2 WHERE id = ?1",
            params![host, now_ms as i64],
        )?;
        tx.commit()?;
        let _ = nix::unistd::unlinkat(
            dir,
            format!("{host}.lock").as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
    }
    if let Some(me) = me {
        recovered.adopted = crate::external::adopt(conn, me)?;
        recovered.requeued = crate::queue::requeue(conn, me)?;
    }
    Ok(recovered)
}

/// Settles the tasks gone host `host` left starting, running or stopping (external work aside):
/// lost or killed, as of `now_ms`, their ids added to `recovered`.
fn settle_gone(
    tx: &rusqlite::Transaction<'_>,
    host: i64,
    now_ms: u64,
    recovered: &mut Recovered,
) -> rusqlite::Result<()> {
    for (from, to, detail) in [
        ("starting", "lost", LOST_STARTING),
        ("running", "lost", LOST),
        ("stopping", "killed", KILLED),
    ] {
        let list = if to == "lost" {
            &mut recovered.lost
        } else {
            &mut recovered.killed
        };
        let ids: Vec<String> = tx
            .prepare(
                "SELECT id FROM tasks WHERE host = ?1 AND status = ?2
                 AND id NOT IN (SELECT task_id FROM external)",
            )?
            .query_map(params![host, from], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        tx.execute(
            "UPDATE tasks SET status = ?3, finished_at_ms = ?5,
             detail = CASE WHEN ?2 = 'running' AND detail = ?6 THEN ?7 ELSE ?4 END
             WHERE host = ?1 AND status = ?2 AND id NOT IN (SELECT task_id FROM external)",
            params![host, from, to, detail, now_ms as i64, UNHELD, LOST_UNHELD],
        )?;
        list.extend(ids);
    }
    Ok(())
}

/// The lock of host `id`, taken, when that host is gone (its lock is free, or it has none).
fn gone(dir: &HeldDir, id: i64) -> Option<Option<Flock<File>>> {
    use nix::fcntl::OFlag;
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let name = format!("{id}.lock");
    let Ok(fd) = nix::fcntl::openat(dir, name.as_str(), flags, nix::sys::stat::Mode::empty())
    else {
        return Some(None);
    };
    let file = File::from(fd);
    Flock::lock(file, FlockArg::LockExclusiveNonblock)
        .ok()
        .map(Some)
}
