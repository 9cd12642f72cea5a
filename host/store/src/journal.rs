//! The registry's journal on the store: every call is a write for the writer thread; a start waits
//! for its commit, nothing else does.

use std::sync::mpsc::{Sender, sync_channel};

use taskhost_registry::{Journal, JournalStart, TaskSnapshot};

use crate::writer::Op;

/// The store as the registry's journal, for this host.
pub(crate) struct StoreJournal {
    pub(crate) host: i64,
    pub(crate) ops: Sender<Op>,
}

impl Journal for StoreJournal {
    fn begin(&self, start: &JournalStart<'_>) -> Result<u64, String> {
        let (reply, answer) = sync_channel(1);
        self.ops
            .send(Op::Begin {
                host: self.host,
                kind: start.kind.to_owned(),
                label: start.label.to_owned(),
                owner: start.owner_session.map(str::to_owned),
                started_at_ms: start.started_at_ms,
                reply,
            })
            .map_err(|_| "the task database is closed".to_owned())?;
        answer
            .recv()
            .map_err(|_| "the task database is closed".to_owned())?
    }

    fn started(&self, id: &str) {
        let _ = self.ops.send(Op::Started { id: id.to_owned() });
    }

    fn queued(&self, id: &str) {
        let _ = self.ops.send(Op::Queued { id: id.to_owned() });
    }

    fn abandon(&self, kind: &str, number: u64) {
        let _ = self.ops.send(Op::Abandon {
            kind: kind.to_owned(),
            number,
        });
    }

    fn stopping(&self, id: &str) {
        let _ = self.ops.send(Op::Stopping { id: id.to_owned() });
    }

    fn settled(&self, snapshot: &TaskSnapshot, then: Box<dyn FnOnce() + Send>) {
        let op = Op::Settled {
            id: snapshot.id.to_string(),
            status: snapshot.status.to_string(),
            detail: snapshot.detail.clone(),
            finished_at_ms: snapshot.finished_at_ms.unwrap_or(snapshot.started_at_ms),
            told: snapshot.reported,
            then,
        };
        if let Err(unsent) = self.ops.send(op) {
            // The store is closed: tell the listeners anyway (nothing more can be made durable).
            if let Op::Settled { then, .. } = unsent.0 {
                then();
            }
        }
    }
}
