//! Who is told when the tool set changes: legacy sessions (`initialize`) through their peer, modern
//! ones (2026-07-28) only through the `subscriptions/listen` streams they opened.

use parking_lot::{Mutex, MutexGuard};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::RequestId;
use rmcp::service::{Peer, RoleServer, SubscriptionSink};

#[derive(Default)]
struct Listeners {
    /// A legacy session's peer, once it is initialized.
    legacy: Option<Peer<RoleServer>>,
    /// A modern session's open `subscriptions/listen` streams that accepted tools list changes.
    streams: Vec<(RequestId, SubscriptionSink)>,
}

/// The live sessions' change listeners, by session, and how many tool set changes there were.
#[derive(Clone, Default)]
pub struct Peers(Arc<Mutex<HashMap<String, Listeners>>>, Arc<AtomicU64>);

impl Peers {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Listeners>> {
        self.0.lock()
    }

    /// How many times the tool set changed so far: a session notes it when it starts, so that one
    /// registering after a change it could not be told of is told at once.
    pub(crate) fn changes(&self) -> u64 {
        self.1.load(Ordering::SeqCst)
    }

    /// Registers an initialized legacy session. A change since `seen` (the count when the session
    /// started) happened while it was not yet registered: it is told now, once.
    pub(crate) fn add_legacy(&self, session: &str, peer: Peer<RoleServer>, seen: u64) {
        self.lock().entry(session.to_owned()).or_default().legacy = Some(peer.clone());
        if self.changes() != seen {
            tokio::spawn(async move {
                let _ = peer.notify_tool_list_changed().await;
            });
        }
    }

    /// Registers an open `subscriptions/listen` stream of `session`; as [`Peers::add_legacy`], a
    /// change since `seen` is sent on it at once.
    pub(crate) fn add_stream(&self, session: &str, sink: SubscriptionSink, seen: u64) {
        let id = sink.id().clone();
        self.lock()
            .entry(session.to_owned())
            .or_default()
            .streams
            .push((id, sink.clone()));
        if self.changes() != seen {
            tokio::spawn(async move {
                let _ = sink.notify_tool_list_changed().await;
            });
        }
    }

    /// Forgets a stream that ended.
    pub(crate) fn remove_stream(&self, session: &str, id: &RequestId) {
        if let Some(l) = self.lock().get_mut(session) {
            l.streams.retain(|(i, _)| i != id);
        }
    }

    /// Forgets a session that ended.
    pub(crate) fn remove(&self, session: &str) {
        self.lock().remove(session);
    }

    /// Sends `notifications/tools/list_changed` to every legacy session and on every stream that
    /// asked for it; sessions of neither kind are not told.
    pub fn tools_changed(&self, runtime: &tokio::runtime::Handle) {
        let (peers, sinks): (Vec<_>, Vec<_>) = {
            let g = self.lock();
            // Counted under the lock: a session registering now either is in the map below or sees
            // the new count.
            self.1.fetch_add(1, Ordering::SeqCst);
            (
                g.values().filter_map(|l| l.legacy.clone()).collect(),
                g.values()
                    .flat_map(|l| l.streams.iter().map(|(_, s)| s.clone()))
                    .collect(),
            )
        };
        for peer in peers {
            runtime.spawn(async move {
                let _ = peer.notify_tool_list_changed().await;
            });
        }
        for sink in sinks {
            runtime.spawn(async move {
                let _ = sink.notify_tool_list_changed().await;
            });
        }
    }
}
