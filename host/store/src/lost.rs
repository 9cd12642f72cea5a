//! A database removed under its hosts (`rm tasks.db*`). SQLite would write on into the removed file
//! and a later open would make an empty one, so:
//!
//! - A host notices: its writer looks at the directory's `tasks.db` (gone, or another file in its
//!   place) before each write batch and, while none comes, every second ([`Watch::check`]). From then
//!   on nothing is written, the log says so once (an error naming the file), and the host's status
//!   says so (`store_lost`). Whatever needs a record is refused saying why (a start, a foreground
//!   call, a new session: a task that runs with no record would be unknown to the next host and its
//!   id could come again); the tasks that run are served from memory until they end, since ending
//!   them would lose their work too. An operator stops the host (a clean stop removes its lock) and
//!   starts one, which makes a new database, its ids going on past the last one issued (`marks.rs`).
//! - A directory left with host locks and no database (its host killed after the removal) is
//!   refused, by `serve` and by `taskhost tasks`, saying what happened and which lock to remove
//!   ([`refuse_orphan_locks`]); nothing is made in it meanwhile.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use nix::fcntl::{AtFlags, Flock, FlockArg, OFlag};
use nix::sys::stat::Mode;

use taskhost_process::private_dir::HeldDir;

use crate::database::FILE;
use crate::error::StoreError;

/// The database file a host opened, watched for its removal.
pub(crate) struct Watch {
    dir: Arc<HeldDir>,
    /// Its device and inode at open.
    file: Option<(u64, u64)>,
    lost: Arc<OnceLock<String>>,
}

/// The device and inode of `tasks.db` in `dir` now, if there is one.
fn identity(dir: &HeldDir) -> Option<(u64, u64)> {
    nix::sys::stat::fstatat(dir, FILE, AtFlags::AT_SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| (st.st_dev, st.st_ino))
}

impl Watch {
    /// Watches the database of `dir` as it is now (just opened).
    pub(crate) fn new(dir: Arc<HeldDir>) -> Self {
        Self {
            file: identity(&dir),
            dir,
            lost: Arc::new(OnceLock::new()),
        }
    }

    /// Why the database is lost, once it is (shared with the store, for its status).
    pub(crate) fn lost(&self) -> Arc<OnceLock<String>> {
        self.lost.clone()
    }

    /// Why the database is lost, looked at now: gone from the directory, or another file in its
    /// place. The first time, the log says so.
    pub(crate) fn check(&self) -> Option<String> {
        if let Some(why) = self.lost.get() {
            return Some(why.clone());
        }
        if self.file.is_some() && identity(&self.dir) == self.file {
            return None;
        }
        let why = format!(
            "the task database {} was removed while this host ran (or another file put in its \
             place): nothing more is recorded, so new tasks, foreground calls and sessions are \
             refused; running tasks are served until they end. Stop this host, then start one: it \
             makes a new database, its task ids going on past the last one issued",
            self.dir.path().join(FILE).display()
        );
        if self.lost.set(why.clone()).is_ok() {
            tracing::error!("{why}");
        }
        Some(why)
    }
}

/// Refuses the state directory `dir` when it has no database but has host locks (`hosts/N.lock`):
/// its database was removed while those hosts ran. A live host's lock (held) and a gone host's
/// (free) are told apart, each saying what to do.
///
/// # Errors
/// [`StoreError::Lost`] saying what happened and what to do.
pub(crate) fn refuse_orphan_locks(dir: &HeldDir) -> Result<(), StoreError> {
    if nix::sys::stat::fstatat(dir, FILE, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok() {
        return Ok(());
    }
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    let Ok(hosts) = nix::fcntl::openat(dir, "hosts", flags, Mode::empty()) else {
        return Ok(());
    };
    let Ok(entries) = std::fs::read_dir(
        Path::new("/proc/self/fd").join(std::os::fd::AsRawFd::as_raw_fd(&hosts).to_string()),
    ) else {
        return Ok(());
    };
    let mut locks: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n.strip_suffix(".lock")
                .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
        })
        .collect();
    locks.sort();
    let Some(first) = locks.first() else {
        return Ok(());
    };
    let held = |name: &String| {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        nix::fcntl::openat(&hosts, name.as_str(), flags, Mode::empty())
            .ok()
            .is_some_and(|fd| {
                Flock::lock(std::fs::File::from(fd), FlockArg::LockExclusiveNonblock).is_err()
            })
    };
    let path = dir.path();
    Err(StoreError::Lost(match locks.iter().find(|l| held(l)) {
        Some(live) => format!(
            "state directory {}: its task database {FILE} is gone while a host still runs on it \
             (it holds hosts/{live}): the database was removed under that host. Stop that host \
             (`fuser {}` names it); a host that stops removes its lock, and the next one starts on \
             a new database",
            path.display(),
            path.join("hosts").join(live).display()
        ),
        None => format!(
            "state directory {}: its task database {FILE} is gone but hosts/{first} of a host that \
             ended without stopping is left: the database was removed while that host ran, and its \
             task records are lost with it. To start over on a new database (task ids go on past \
             the last one issued), remove {}",
            path.display(),
            locks
                .iter()
                .map(|l| path.join("hosts").join(l).display().to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }))
}
