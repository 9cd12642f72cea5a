//! The database file of a state directory: opened through the held directory, checked, and
//! brought to this build's schema.

use std::path::PathBuf;

use nix::fcntl::AtFlags;
use nix::sys::stat::{Mode, SFlag};
use rusqlite::Connection;

use taskhost_process::private_dir::{HeldDir, euid};

use crate::error::StoreError;
use crate::schema;

/// How hard a commit holds (`[state] sync`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sync {
    /// `synchronous=NORMAL`: a commit survives a crash of the host; a power loss may lose the last
    /// ones before a checkpoint.
    #[default]
    Normal,
    /// `synchronous=FULL`: the WAL is synced at every commit; nothing answered is lost.
    Full,
}

/// The database's file name in the state directory.
pub(crate) const FILE: &str = "tasks.db";

/// Where a connection opens the database of the held state directory `dir`: through the
/// directory's descriptor (`/proc/self/fd/N/tasks.db`), so a directory put at the state's path after
/// the host opened it is never read. (SQLite resolves the link to the held directory's path at each
/// open; only this user or root could rename it, the walk at open having found every directory
/// above it closed to others.)
pub(crate) fn through(dir: &HeldDir) -> PathBuf {
    dir.through().join(FILE)
}

/// Whether the held state directory `dir` has a database file (of any kind: [`open`] checks it).
pub(crate) fn exists(dir: &HeldDir) -> bool {
    nix::sys::stat::fstatat(dir, FILE, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok()
}

/// Opens the database of the held state directory `dir`: a regular file of this user's if it
/// exists (made 0600 if not), WAL, the chosen `synchronous`, this build's schema (kept files in
/// `output`).
pub(crate) fn open(dir: &HeldDir, output: &HeldDir, sync: Sync) -> Result<Connection, StoreError> {
    let path = dir.path().join(FILE);
    // SQLite's "unable to open database file" says nothing of why: a directory that cannot be
    // written is named.
    let corrupt = |e: rusqlite::Error| StoreError::Corrupt {
        path: path.clone(),
        why: match read_only(dir) {
            Some(why) => format!("{e}: the state directory is read-only ({why})"),
            None => e.to_string(),
        },
    };
    match nix::sys::stat::fstatat(dir, FILE, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT != SFlag::S_IFREG => {
            return Err(StoreError::Corrupt {
                path,
                why: "it is not a regular file".into(),
            });
        }
        Ok(st) if st.st_uid != euid() => {
            return Err(StoreError::Foreign {
                path,
                owner: st.st_uid,
                me: euid(),
            });
        }
        _ => {}
    }
    let mut conn = Connection::open(through(dir)).map_err(corrupt)?;
    conn.busy_timeout(std::time::Duration::from_secs(5))
        .map_err(corrupt)?;
    // Read first, changing nothing: a file that is not a database, or a newer one, is left as it is.
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(corrupt)?;
    if found > schema::VERSION {
        return Err(StoreError::NewerSchema {
            path,
            found,
            known: schema::VERSION,
        });
    }
    let _ = nix::sys::stat::fchmodat(
        dir,
        FILE,
        Mode::from_bits_truncate(0o600),
        nix::sys::stat::FchmodatFlags::FollowSymlink,
    );
    wal(&conn).map_err(corrupt)?;
    let level = match sync {
        Sync::Normal => "NORMAL",
        Sync::Full => "FULL",
    };
    conn.pragma_update(None, "synchronous", level)
        .map_err(corrupt)?;
    schema::migrate(&mut conn, output).map_err(corrupt)?;
    Ok(conn)
}

/// Puts the database in WAL mode. The switch of a new file takes an exclusive lock that SQLite
/// does not wait for (no busy handler is called), so a host opening a new directory beside another
/// one retries it for up to the busy timeout.
fn wal(conn: &Connection) -> rusqlite::Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut pause = std::time::Duration::from_millis(1);
    loop {
        match conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0)) {
            Ok(_) => return Ok(()),
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(std::time::Duration::from_millis(50));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Why the held directory `dir` cannot be written, if it cannot: a read-only mount, or no write
/// permission for this user.
pub(crate) fn read_only(dir: &HeldDir) -> Option<String> {
    use nix::sys::statvfs::{FsFlags, fstatvfs};
    if fstatvfs(dir).is_ok_and(|st| st.flags().contains(FsFlags::ST_RDONLY)) {
        return Some("it is on a read-only mount".into());
    }
    let writable = nix::unistd::faccessat(
        dir,
        ".",
        nix::unistd::AccessFlags::W_OK,
        AtFlags::AT_EACCESS,
    );
    writable
        .is_err()
        .then(|| "this user may not write in it (its mode)".into())
}
