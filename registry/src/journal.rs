//! What a registry writes down so that it outlives the host: a [`Journal`] the host gives the
//! registry ([`Registry::with_journal`](crate::Registry::with_journal)). Without one the registry
//! keeps everything in memory, as before.
//!
//! The registry's promises with a journal: a task's record is durable before its start is answered
//! (and its number comes from the journal, so ids never repeat where the journal lives), and its
//! settlement is durable before any completion listener hears of it (so a notice never tells of an
//! end the record does not hold).

use crate::status::TaskSnapshot;

/// A task about to start, as the journal records it.
#[derive(Clone, Debug)]
pub struct JournalStart<'a> {
    /// The producer kind, the id's prefix.
    pub kind: &'a str,
    /// The task's label (its command or summary).
    pub label: &'a str,
    /// The owning session, if owned.
    pub owner_session: Option<&'a str>,
    /// When the start was asked, ms since the Unix epoch.
    pub started_at_ms: u64,
}

/// The durable side of a registry.
pub trait Journal: Send + Sync + 'static {
    /// Records a task about to start and returns its number (the `N` of `kind-N`), durably, before
    /// it returns: called on the caller's thread before the producer's starter runs.
    ///
    /// # Errors
    /// Why it could not be recorded; the start is refused with it.
    fn begin(&self, start: &JournalStart<'_>) -> Result<u64, String>;

    /// The starter of task `id` returned: its work began. Need not be durable before it returns.
    /// Not called for a task taken over ([`crate::TaskStart::take_over`]): its work began under
    /// the host that started it.
    fn started(&self, id: &str);

    /// The starter of task `id` returned and the task waits, `queued`, for its work to begin
    /// ([`crate::TaskStart::queued`]); [`Journal::started`] follows when it does. Need not be
    /// durable before it returns. A journal that keeps no queue records it as started.
    fn queued(&self, id: &str) {
        self.started(id);
    }

    /// The start of task `kind-number` failed after [`Journal::begin`]: its record goes. Its number
    /// was never answered to anyone, so the journal may give it again when no later one was given.
    fn abandon(&self, kind: &str, number: u64);

    /// A kill of the task was delivered; it has not settled yet.
    fn stopping(&self, id: &str);

    /// Records a settlement; `then` runs once it is durable (on a thread of the journal's choosing,
    /// never under a registry lock).
    fn settled(&self, snapshot: &TaskSnapshot, then: Box<dyn FnOnce() + Send>);
}
