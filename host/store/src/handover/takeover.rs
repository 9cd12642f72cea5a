//! What lets the next host go on with a task: running tasks a gone host's keeper handed over
//! (recorded as this host's before the gone host's lock is let go), where owners' reads stood,
//! how external work is followed, and whether an end was told.

use std::path::Path;

use crate::ExternalRecord;
use crate::ForegroundRecord;
use crate::StoreError;
use crate::Takeover;
use crate::records::TaskRecord;
use crate::store::{Store, Sync};
use crate::writer::Op;
use std::sync::mpsc::sync_channel;

impl Store {
    /// Returns once every write queued so far is durable, the host's row left live (a host that
    /// hands its tasks to its successor in place: an upgrade).
    pub fn sync(&self) {
        let (reply, done) = sync_channel(1);
        self.send(Op::Sync { reply });
        let _ = done.recv();
    }

    /// As [`Store::open`], taking over first the running tasks a gone host's keeper handed to this
    /// one (`takeover`): they become this host's before the gone host's lock is let go, so no
    /// host's recovery takes them for lost; [`Store::taken_over`] has their records.
    ///
    /// # Errors
    /// As [`Store::open`].
    pub fn open_taking_over(
        dir: &Path,
        sync: Sync,
        takeover: Takeover,
    ) -> Result<Self, StoreError> {
        Self::open_as(dir, sync, crate::store::Use::Host, Some(takeover))
    }

    /// The records of the tasks taken over at open (see [`Store::open_taking_over`]).
    pub fn taken_over(&self) -> &[TaskRecord] {
        &self.taken_over
    }

    /// This host's row in the database (`None` for a store opened only to read).
    pub fn host_id(&self) -> Option<i64> {
        self.host
    }

    /// This host's lock, for a keeper that holds it while this host's tasks wait for a successor.
    pub fn lock_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        self._lock.as_ref().map(|l| std::os::fd::AsFd::as_fd(&**l))
    }

    /// Records where the reads of task `id`'s stdout and stderr stand; returns once that is durable
    /// (a successor that takes the task over then repeats nothing its owner was answered).
    pub fn read_to(&self, id: &str, out: u64, err: u64) {
        let (reply, done) = sync_channel(1);
        self.send(Op::Read {
            id: id.to_owned(),
            out,
            err,
            reply,
        });
        let _ = done.recv();
    }

    /// Records how task `id`'s external work is followed, so a later host can take it over.
    pub fn set_external(&self, id: &str, record: ExternalRecord) {
        self.send(Op::External {
            id: id.to_owned(),
            record,
        });
    }

    /// Records that the reads of task `id`'s external work consumed its output up to `offset`;
    /// returns once that is durable (a later host then repeats nothing its owner was answered).
    pub fn external_read(&self, id: &str, offset: u64) {
        let (reply, done) = sync_channel(1);
        self.send(Op::ExternalRead {
            id: id.to_owned(),
            offset,
            reply,
        });
        let _ = done.recv();
    }

    /// Records that task `id`'s owner was told of its end.
    pub fn told(&self, id: &str) {
        self.send(Op::Told { id: id.to_owned() });
    }

    /// Records that the foreground command `record` describes is about to run in this host;
    /// returns its id once that is durable (`None` for a store opened only to read, or a failed
    /// write: the command then runs without being carried past a crash).
    pub fn foreground_began(&self, record: ForegroundRecord) -> Option<u64> {
        let host = self.host_id()?;
        let (reply, done) = sync_channel(1);
        self.send(Op::Foreground {
            host,
            record,
            reply,
        });
        done.recv().ok()?.ok()
    }

    /// Forgets foreground command `id`: it ended, or became a task.
    pub fn foreground_ended(&self, id: u64) {
        self.send(Op::ForegroundEnded { id });
    }

    /// The foreground commands taken over at open, each still running under this host's keeper
    /// (see [`Store::open_taking_over`]).
    pub fn taken_foregrounds(&self) -> &[ForegroundRecord] {
        &self.taken_foregrounds
    }
}
