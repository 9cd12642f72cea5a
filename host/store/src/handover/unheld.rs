//! Running tasks whose keeper died while it held them for a successor: their records say so, so
//! that a crash of the host then records them lost naming the keeper's death.

use std::sync::mpsc::sync_channel;

use crate::writer::Op;

impl crate::Store {
    /// Marks running tasks `ids` as no longer held for a successor (their keeper died): should the
    /// host stop before they end, their records say why they were lost (`hosts::LOST_UNHELD`).
    /// Returns once the marks are durable, in one write batch of the store's writer (a write the
    /// full disk refuses is applied again once it has room, as every write that answers nobody).
    pub fn unheld<'a>(&self, ids: impl IntoIterator<Item = &'a str>) {
        for id in ids {
            self.send(Op::Unheld { id: id.to_owned() });
        }
        let (reply, done) = sync_channel(1);
        self.send(Op::Sync { reply });
        let _ = done.recv();
    }
}
