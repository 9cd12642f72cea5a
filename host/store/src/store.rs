//! Opening a state directory: the directory checked, the database checked and brought to this
//! build's schema, this host registered, what gone hosts left recovered, and the writer started.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Sender, sync_channel};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use nix::fcntl::Flock;
use parking_lot::Mutex;
use rusqlite::Connection;

use taskhost_process::private_dir::{HeldDir, PrivateDirError};
use taskhost_registry::Journal;

pub use crate::database::Sync;
use crate::error::StoreError;
pub use crate::hosts::Recovered;
use crate::journal::StoreJournal;
use crate::data::OwnerSecret;
use crate::owners;
use crate::records::{self, TaskRecord};
use crate::retention::Retention;
use crate::trusted::trusted_dir;
use crate::writer::{self, Op};
use crate::{database, hosts, kept};

/// What a store is opened for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Use {
    /// A host's: registered and locked, recovering, and writing.
    Host,
    /// A command's that changes records (`taskhost token create`): the database made if missing.
    Change,
    /// A command's that reads (`taskhost tasks`): nothing made.
    Read,
}

/// An open state directory.
pub struct Store {
    dir: Arc<HeldDir>,
    output: Arc<HeldDir>,
    host_dir: Arc<HeldDir>,
    /// The database's readers, reaching it through the held directory (see [`database::through`]).
    readers: crate::readers::Readers,
    pub(crate) host: Option<i64>,
    ops: Mutex<Option<Sender<Op>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    recovered: Recovered,
    lost: Arc<std::sync::OnceLock<String>>,
    pub(crate) _lock: Option<Flock<File>>,
    pub(crate) taken_over: Vec<TaskRecord>,
    pub(crate) taken_foregrounds: Vec<crate::ForegroundRecord>,
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Store {
    /// Opens (or makes) the state directory `dir` for a host: checked private, its database
    /// checked and migrated, this host registered and locked, the tasks of hosts that are gone
    /// recovered, and the writer started.
    ///
    /// # Errors
    /// [`StoreError`] naming the directory or the file; nothing is overwritten.
    pub fn open(dir: &Path, sync: Sync) -> Result<Self, StoreError> {
        Self::open_as(dir, sync, Use::Host, None)
    }

    /// Opens the state directory `dir` to read it (`taskhost tasks`): checked and recovered as a host
    /// would, without registering a host, and without making anything (no directory, no database).
    ///
    /// # Errors
    /// As [`Store::open`]; [`StoreError::NoDatabase`] when there is no database.
    pub fn open_to_read(dir: &Path) -> Result<Self, StoreError> {
        Self::open_as(dir, Sync::Normal, Use::Read, None)
    }

    /// As [`Store::open_to_read`], making the directory and the database if missing, for a command
    /// that changes records (`taskhost token create`).
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_to_change(dir: &Path) -> Result<Self, StoreError> {
        Self::open_as(dir, Sync::Normal, Use::Change, None)
    }

    pub(crate) fn open_as(
        dir: &Path,
        sync: Sync,
        use_: Use,
        takeover: Option<crate::handover::taken::Takeover>,
    ) -> Result<Self, StoreError> {
        let absent = || StoreError::NoDatabase {
            dir: dir.to_owned(),
        };
        if use_ == Use::Read && std::fs::symlink_metadata(dir).is_err() {
            return Err(absent());
        }
        let held = Arc::new(trusted_dir(dir)?);
        crate::lost::refuse_orphan_locks(&held)?;
        if use_ == Use::Read && !database::exists(&held) {
            return Err(absent());
        }
        if let (Use::Host, Some(why)) = (use_, database::read_only(&held)) {
            return Err(StoreError::ReadOnly {
                dir: dir.to_owned(),
                why,
            });
        }
        let refused = |e: PrivateDirError| StoreError::Dir {
            path: dir.to_owned(),
            why: e.to_string(),
        };
        // Made if missing, checked private either way, reached through the held directory.
        let output = Arc::new(held.ensure_dir("output").map_err(refused)?);
        let host_dir = Arc::new(held.ensure_dir("hosts").map_err(refused)?);
        let mut conn = database::open(&held, &output, sync)?;
        let watch = crate::lost::Watch::new(held.clone());
        let mut marks = crate::marks::Marks::read(held.clone());
        let (host, lock) = if use_ == Use::Host {
            marks.lift(&conn)?;
            let (id, lock) =
                hosts::register(&mut conn, &host_dir, now_ms()).map_err(StoreError::Sqlite)?;
            marks.note([(crate::marks::HOSTS, id.unsigned_abs())]);
            (Some(id), Some(lock))
        } else {
            (None, None)
        };
        let (taken_over, taken_foregrounds) = match (takeover, host) {
            (Some(t), Some(me)) => {
                let taken =
                    crate::handover::taken::take_over_tasks(&mut conn, me, t.host, &t.tasks)?;
                let foregrounds =
                    crate::handover::foregrounds::take_over(&mut conn, t.host, &t.foregrounds)?;
                // Only now may the gone host be seen gone.
                drop(t.lock);
                (taken, foregrounds)
            }
            _ => (Vec::new(), Vec::new()),
        };
        let recovered = hosts::recover(&mut conn, &host_dir, host, now_ms())?;
        let lost = watch.lost();
        let (ops, threads) = writer::start(conn, writer::Beside { watch, marks })?;
        Ok(Self {
            readers: crate::readers::Readers::new(database::through(&held), lost.clone()),
            dir: held,
            output,
            host_dir,
            host,
            ops: Mutex::new(Some(ops)),
            threads: Mutex::new(threads),
            recovered,
            lost,
            taken_over,
            taken_foregrounds,
            _lock: lock,
        })
    }

    /// Why this host's database is lost (removed while it ran; see `lost.rs`), once it is.
    pub fn lost(&self) -> Option<&str> {
        self.lost.get().map(String::as_str)
    }

    /// The registry's journal, writing as this host.
    ///
    /// # Errors
    /// [`StoreError::Closed`] for a store opened only to read, or closed.
    pub fn journal(&self) -> Result<Arc<dyn Journal>, StoreError> {
        let (Some(host), Some(ops)) = (self.host, self.ops.lock().clone()) else {
            return Err(StoreError::Closed);
        };
        Ok(Arc::new(StoreJournal { host, ops }))
    }

    /// Where kept output files go.
    pub fn output_dir(&self) -> Arc<HeldDir> {
        self.output.clone()
    }

    /// The state directory's path, for naming it to people.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The state directory as it was opened (reach files in it through [`HeldDir::through`], never
    /// by [`Store::dir`], which another directory may have taken since).
    pub fn held_dir(&self) -> &HeldDir {
        &self.dir
    }

    /// The state's `hosts/`, held: where the hosts' locks and handover sockets are.
    pub fn hosts_dir(&self) -> Arc<HeldDir> {
        self.host_dir.clone()
    }

    /// What this open recovered from hosts that are gone.
    pub fn recovered(&self) -> &Recovered {
        &self.recovered
    }

    /// Records task `id`'s kept output files (stdout, stderr), files the host made in
    /// [`Store::output_dir`], by their names there (a file elsewhere is not recorded).
    pub fn set_output(&self, id: &str, files: [Option<PathBuf>; 2]) {
        let [stdout, stderr] = files.map(|f| {
            let path = f?;
            let name = kept::name_of(&self.output, &path);
            if name.is_none() {
                tracing::warn!(task = id, file = %path.display(), "not recorded as kept output: it is not a file in the state's output/");
            }
            name
        });
        self.send(Op::Output {
            id: id.to_owned(),
            stdout,
            stderr,
        });
    }

    /// Expires what is past `keep` now (settled tasks' output, oldest first); returns the ids
    /// expired, newest first. What is due is read without holding the writer; it is then expired
    /// in batches, each its own write, so the writes of live tasks go on between them; a batch's
    /// files are removed before it is marked, while the writer marks the one before. Waits for
    /// the last batch.
    pub fn retain(&self, keep: Retention) -> Vec<String> {
        self.retain_between(keep, |_| {})
    }

    /// As [`Self::retain`], calling `between` with each batch's ids once it is durable.
    pub(crate) fn retain_between(
        &self,
        keep: Retention,
        between: impl FnMut(&[String]),
    ) -> Vec<String> {
        let Some(ops) = self.ops.lock().clone() else {
            return Vec::new();
        };
        let output = self.output_dir();
        let now_ms = now_ms();
        let keep_ms = keep.keep_days.saturating_mul(24 * 3600 * 1000);
        let due = self.reader().map_err(|e| e.to_string()).and_then(|conn| {
            crate::retention::due(&conn, &output, now_ms, keep_ms, keep.keep_bytes)
                .map_err(|e| e.to_string())
        });
        let due = due.unwrap_or_else(|why| {
            tracing::warn!("retention cannot read the task records: {why}");
            Vec::new()
        });
        crate::retention::expire(&ops, &output, &due, now_ms, between)
    }

    /// A new owner, with the SHA-256 of its secret when it may come back: its name (`session-N`).
    /// Waits for the write.
    ///
    /// # Errors
    /// The store is closed or the write failed.
    pub fn mint_owner(&self, secret: Option<&OwnerSecret>) -> Result<String, StoreError> {
        let ops = self.ops.lock().clone().ok_or(StoreError::Closed)?;
        let (reply, answer) = sync_channel(1);
        let op = Op::MintOwner {
            secret_sha256: secret.map(OwnerSecret::sha256),
            at_ms: now_ms(),
            reply,
        };
        ops.send(op).map_err(|_| StoreError::Closed)?;
        answer
            .recv()
            .map_err(|_| StoreError::Closed)?
            .map_err(StoreError::Sqlite)
    }

    /// The owner `secret` names, unless it has ended.
    ///
    /// # Errors
    /// The database could not be read.
    pub fn owner_of(&self, secret: &OwnerSecret) -> Result<Option<String>, StoreError> {
        Ok(owners::by_secret(&*self.lent()?, secret)?)
    }

    /// Ends owner `name`: its secret names nobody from now on (its records stay). Waits for the
    /// write, so no connection can come back as the owner once this returned.
    pub fn end_owner(&self, name: &str) {
        let (reply, done) = sync_channel(1);
        self.send(Op::EndOwner {
            name: name.to_owned(),
            at_ms: now_ms(),
            reply,
        });
        let _ = done.recv();
    }

    /// Owner `name`'s records, oldest first.
    ///
    /// # Errors
    /// The database could not be read.
    pub fn owner_tasks(&self, name: &str) -> Result<Vec<TaskRecord>, StoreError> {
        Ok(records::owned_by(&*self.lent()?, name)?)
    }

    pub(crate) fn send(&self, op: Op) {
        if let Some(ops) = self.ops.lock().as_ref() {
            let _ = ops.send(op);
        }
    }

    /// The newest `limit` records of owner `owner`'s tasks (every owner's when `None`), newest
    /// first, without reading the others.
    ///
    /// # Errors
    /// The database could not be read.
    pub fn newest_tasks(
        &self,
        owner: Option<&str>,
        limit: u64,
    ) -> Result<Vec<TaskRecord>, StoreError> {
        Ok(records::newest(&*self.lent()?, owner, limit)?)
    }

    /// Every task's record, oldest first.
    ///
    /// # Errors
    /// The database could not be read.
    pub fn tasks(&self) -> Result<Vec<TaskRecord>, StoreError> {
        Ok(records::all(&self.reader()?)?)
    }

    /// The last `max_bytes` of each of `record`'s kept streams from `from` (stdout's, stderr's:
    /// [`TaskRecord::read`] for what its owner has not read), as a read shows them, naming the kept
    /// file of one that holds more. Missing files read as empty (a task that wrote nothing).
    ///
    /// # Errors
    /// A kept file that exists but cannot be read, or not a regular file in `output/` (no symlink).
    pub fn kept_tail(
        &self,
        record: &TaskRecord,
        max_bytes: u64,
        from: [u64; 2],
    ) -> std::io::Result<String> {
        self.kept_tail_drawn(record, max_bytes, from, taskhost_process::Drawn::Plain)
    }

    /// As [`Store::kept_tail`], each stream drawn as `drawn` says (plain, or with its colours).
    ///
    /// # Errors
    /// As [`Store::kept_tail`].
    pub fn kept_tail_drawn(
        &self,
        record: &TaskRecord,
        max_bytes: u64,
        from: [u64; 2],
        drawn: taskhost_process::Drawn,
    ) -> std::io::Result<String> {
        records::kept_tail(&self.output, record, max_bytes, from, drawn)
    }

    /// The output `record` kept, as a read shows it: stdout, then `[stderr]` and stderr.
    ///
    /// # Errors
    /// As [`Store::kept_tail`].
    pub fn kept_output(&self, record: &TaskRecord) -> std::io::Result<String> {
        self.kept_tail(record, u64::MAX, [0, 0])
    }

    /// Task `id`'s record, if there is one.
    ///
    /// # Errors
    /// The database could not be read.
    pub fn task(&self, id: &str) -> Result<Option<TaskRecord>, StoreError> {
        Ok(records::one(&*self.lent()?, id)?)
    }

    /// A connection of its own to the database, never making one (a removed database is not made
    /// again empty).
    pub(crate) fn reader(&self) -> Result<Connection, StoreError> {
        self.readers.open()
    }

    /// A connection lent for one short read (see `readers.rs`).
    pub(crate) fn lent(&self) -> Result<crate::readers::Lent<'_>, StoreError> {
        self.readers.lend()
    }

    /// Ends this host's use of the store: its row marked ended, every queued write committed,
    /// every settled task's notice sent, and its lock file removed (a host that ended says so in
    /// its row; only a crashed host's lock file is left, for the next host to find free).
    /// Idempotent.
    pub fn close(&self) {
        if let (Some(host), Some(ops)) = (self.host, self.ops.lock().take()) {
            let (reply, done) = sync_channel(1);
            let at_ms = now_ms();
            if ops.send(Op::EndHost { host, at_ms, reply }).is_ok() && done.recv().is_ok() {
                let _ = nix::unistd::unlinkat(
                    &*self.host_dir,
                    format!("{host}.lock").as_str(),
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                );
            }
        }
        self.ops.lock().take();
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.dir.path())
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        self.close();
    }
}
