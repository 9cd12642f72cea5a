//! Who is told when a list changes (tools, prompts, resources) or a resource does: legacy sessions
//! (`initialize`) through their peer, modern ones (2026-07-28) only through the
//! `subscriptions/listen` streams they opened and on what those accepted.

use parking_lot::{Mutex, MutexGuard};
use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rmcp::model::{RequestId, ResourceUpdatedNotificationParam};
use rmcp::service::{Peer, RoleServer, SubscriptionSink};
use taskhost_abi::McpItemKind;

#[derive(Default)]
struct Listeners {
    /// A legacy session's peer, once it is initialized.
    legacy: Option<Peer<RoleServer>>,
    /// The resources a legacy session subscribed to (`resources/subscribe`).
    resources: BTreeSet<String>,
    /// A modern session's open `subscriptions/listen` streams.
    streams: Vec<(RequestId, SubscriptionSink)>,
}

/// What every MCP session of one host shares: the live sessions' change listeners, by session, how
/// many tool set changes there were, and the MCP tasks (`super::tasks`).
#[derive(Clone, Default)]
pub struct Peers(
    Arc<Mutex<HashMap<String, Listeners>>>,
    Arc<AtomicU64>,
    Arc<super::tasks::McpTasks>,
);

/// What one change tells a legacy peer and a stream.
#[derive(Clone)]
enum Change {
    List(McpItemKind),
    Resource(String),
}

impl Peers {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Listeners>> {
        self.0.lock()
    }

    /// The host's MCP tasks.
    pub(crate) fn tasks(&self) -> &Arc<super::tasks::McpTasks> {
        &self.2
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
    /// tool change since `seen` is sent on it at once (when it accepted tool changes).
    pub(crate) fn add_stream(&self, session: &str, sink: SubscriptionSink, seen: u64) {
        let id = sink.id().clone();
        self.lock()
            .entry(session.to_owned())
            .or_default()
            .streams
            .push((id, sink.clone()));
        if self.changes() != seen && sink.accepted().tools_list_changed == Some(true) {
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

    /// Records (or, with `on` false, drops) a legacy session's subscription to `uri`.
    pub(crate) fn subscribe(&self, session: &str, uri: &str, on: bool) {
        let mut g = self.lock();
        let resources = &mut g.entry(session.to_owned()).or_default().resources;
        if on {
            resources.insert(uri.to_owned());
        } else {
            resources.remove(uri);
        }
    }

    /// Forgets a session that ended.
    pub(crate) fn remove(&self, session: &str) {
        self.lock().remove(session);
    }

    /// Sends `notifications/tools/list_changed` to every legacy session and on every stream that
    /// asked for it; sessions of neither kind are not told.
    pub fn tools_changed(&self, runtime: &tokio::runtime::Handle) {
        self.list_changed(McpItemKind::Tool, runtime);
    }

    /// Sends the list change of `kind` to every legacy session and on every stream that accepted
    /// it.
    pub fn list_changed(&self, kind: McpItemKind, runtime: &tokio::runtime::Handle) {
        self.tell(&Change::List(kind), runtime);
    }

    /// Sends `notifications/resources/updated` for `uri` to the legacy sessions subscribed to it and
    /// on the streams that accepted it.
    pub fn resource_updated(&self, uri: &str, runtime: &tokio::runtime::Handle) {
        self.tell(&Change::Resource(uri.to_owned()), runtime);
    }

    fn tell(&self, change: &Change, runtime: &tokio::runtime::Handle) {
        let (peers, sinks): (Vec<_>, Vec<_>) = {
            let g = self.lock();
            if let Change::List(McpItemKind::Tool) = change {
                // Counted under the lock: a session registering now either is in the map below or
                // sees the new count.
                self.1.fetch_add(1, Ordering::SeqCst);
            }
            let told = |l: &&Listeners| match change {
                Change::Resource(uri) => l.resources.contains(uri),
                Change::List(_) => true,
            };
            (
                g.values()
                    .filter(told)
                    .filter_map(|l| l.legacy.clone())
                    .collect(),
                g.values()
                    .flat_map(|l| l.streams.iter().map(|(_, s)| s.clone()))
                    .collect(),
            )
        };
        for peer in peers {
            let change = change.clone();
            runtime.spawn(async move {
                let _ = match change {
                    Change::List(McpItemKind::Tool) => peer.notify_tool_list_changed().await,
                    Change::List(McpItemKind::Prompt) => peer.notify_prompt_list_changed().await,
                    Change::List(_) => peer.notify_resource_list_changed().await,
                    Change::Resource(uri) => {
                        peer.notify_resource_updated(ResourceUpdatedNotificationParam::new(uri))
                            .await
                    }
                };
            });
        }
        for sink in sinks {
            let change = change.clone();
            runtime.spawn(async move {
                let accepted = sink.accepted();
                let _ = match change {
                    Change::List(McpItemKind::Tool)
                        if accepted.tools_list_changed == Some(true) =>
                    {
                        sink.notify_tool_list_changed().await
                    }
                    Change::List(McpItemKind::Prompt)
                        if accepted.prompts_list_changed == Some(true) =>
                    {
                        sink.notify_prompt_list_changed().await
                    }
                    Change::List(McpItemKind::Resource | McpItemKind::ResourceTemplate)
                        if accepted.resources_list_changed == Some(true) =>
                    {
                        sink.notify_resource_list_changed().await
                    }
                    Change::Resource(uri) => sink.notify_resource_updated(uri).await,
                    Change::List(_) => Ok(()),
                };
            });
        }
    }
}
