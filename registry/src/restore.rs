//! Settled tasks brought back from a journal for an owner that returns to a new host: readable,
//! listed and disposed with the owner's own, and announced once when their end was never told.

use tokio::sync::watch;

use crate::agent::Agent;
use crate::error::RegistryError;
use crate::ids::TaskId;
use crate::registry::{Registry, Settled};
use crate::state::{Bucket, Ops, Record, owner_key};
use crate::status::TaskStatus;

/// A settled task as a journal kept it.
#[derive(Clone, Debug)]
pub struct RestoredTask {
    /// Its id (`bash-3`): `<kind>-<n>`.
    pub id: String,
    /// Its kind, the id's prefix.
    pub kind: String,
    /// Its command or summary.
    pub label: String,
    /// How it ended; a live status is refused.
    pub status: TaskStatus,
    /// Its detail (exit code, signal, why it was lost).
    pub detail: Option<String>,
    /// When it started, ms since the Unix epoch.
    pub started_at_ms: u64,
    /// When it settled (or was found lost), ms since the Unix epoch.
    pub finished_at_ms: u64,
    /// True for stream kinds: the first read returns `output`, later reads nothing new.
    pub stream: bool,
    /// The output a read returns.
    pub output: String,
    /// True when its owner was told of its end already: no notice is sent again.
    pub told: bool,
}

impl Registry {
    /// Brings back a settled task of `owner`'s: listed, read and killed (answered "already
    /// finished") as any settled task of its, dropped when `owner` is disposed. When it was never
    /// told, completion listeners hear of it now, once (no journal write: the journal holds it).
    ///
    /// # Errors
    /// [`RegistryError::Restore`] for a malformed id, a live status, or an id this registry
    /// already holds.
    pub fn restore(&self, owner: &Agent, task: RestoredTask) -> Result<(), RegistryError> {
        let id = TaskId::new(task.id.as_str());
        if id.parts().is_none_or(|(kind, _)| kind != task.kind) {
            return Err(RegistryError::Restore(format!(
                "restored task id {} is not <{}>-<n>",
                task.id, task.kind
            )));
        }
        if !task.status.is_terminal() {
            return Err(RegistryError::Restore(format!(
                "restored task {} is {}; only settled tasks are restored",
                task.id, task.status
            )));
        }
        let settled = {
            let mut st = self.inner.state.lock();
            let st = &mut *st;
            if st.records.contains_key(&id) {
                return Err(RegistryError::Restore(format!(
                    "task {} is already held",
                    task.id
                )));
            }
            if let Some((kind, n)) = id.parts() {
                let counter = st.counters.entry(kind.to_owned()).or_insert(0);
                *counter = n.max(*counter);
            }
            let seq = st.next_seq;
            st.next_seq += 1;
            st.index_for(Some(owner)).insert(seq, id.clone());
            st.buckets
                .entry(owner_key(Some(owner)))
                .or_insert_with(Bucket::new)
                .tasks
                .push(id.clone());
            let (stream, text) = (task.stream, task.output);
            let record = Record {
                id: id.clone(),
                seq,
                kind: task.kind,
                label: task.label,
                output_limit_bytes: None,
                owner: Some(owner.clone()),
                stream,
                status: task.status,
                detail: task.detail,
                output: (!stream).then(|| text.clone()),
                started_at_ms: task.started_at_ms,
                finished_at_ms: Some(task.finished_at_ms.max(task.started_at_ms)),
                reported: task.told,
                pending_waiters: Default::default(),
                settled: watch::channel(None).0,
                ops: std::sync::Arc::new(parking_lot::Mutex::new(Ops {
                    hooks: None,
                    remainder: if stream { text } else { String::new() },
                    watcher: None,
                })),
            };
            let snapshot = record.snapshot();
            record.settled.send_replace(Some(snapshot.clone()));
            st.records.insert(id, record);
            Settled {
                snapshot,
                owner: Some(owner.clone()),
            }
        };
        if settled.snapshot.reported {
            self.inner.changed(Some(owner));
        } else {
            self.inner.tell(settled);
        }
        Ok(())
    }
}
