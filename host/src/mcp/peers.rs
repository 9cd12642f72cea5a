//! Who is told when the tool set changes: legacy sessions (`initialize`) through their peer, modern
//! ones (2026-07-28) only through the `subscriptions/listen` streams they opened.

use parking_lot::{Mutex, MutexGuard};
use std::collections::HashMap;
use std::sync::Arc;

use rmcp::model::RequestId;
use rmcp::service::{Peer, RoleServer, SubscriptionSink};

#[derive(Default)]
struct Listeners {
    /// A legacy session's peer, once it is initialized.
    legacy: Option<Peer<RoleServer>>,
    /// A modern session's open `subscriptions/listen` streams that accepted tools list changes.
    streams: Vec<(RequestId, SubscriptionSink)>,
}

/// The live sessions' change listeners, by session.
#[derive(Clone, Default)]
pub struct Peers(Arc<Mutex<HashMap<String, Listeners>>>);

impl Peers {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Listeners>> {
        self.0.lock()
    }

    /// Registers an initialized legacy session.
    pub(crate) fn add_legacy(&self, session: &str, peer: Peer<RoleServer>) {
        self.lock().entry(session.to_owned()).or_default().legacy = Some(peer);
    }

    /// Registers an open `subscriptions/listen` stream of `session`.
    pub(crate) fn add_stream(&self, session: &str, sink: SubscriptionSink) {
        let id = sink.id().clone();
        self.lock()
            .entry(session.to_owned())
            .or_default()
            .streams
            .push((id, sink));
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
