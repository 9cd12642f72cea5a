//! Where one owner's notices go: kept for the next tool result of any of its connections, and sent
//! as logging messages to each of its connections that asked for them.
//!
//! A socket or stdio owner has one connection; a principal (HTTP) may have many at once (legacy
//! sessions with one token, and stateless requests), all views of the one owner: a notice rides on
//! the next tool result of whichever calls first (once), and goes as a logging message to every
//! legacy session of the principal that is open.
#![allow(
    deprecated,
    reason = "MCP logging notifications carry the notices (SEP-2577 deprecates them in rmcp)"
)]

use parking_lot::Mutex;
use std::sync::{Arc, OnceLock, Weak};

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::{Peer, RoleServer};
use serde_json::json;

use crate::Taskhost;
use crate::sessions::Notice;

/// One connection of an owner that may be sent logging messages: its peer, once known, and the
/// level it asked for (`None`: none).
#[derive(Default)]
pub(crate) struct Listener {
    pub(crate) peer: OnceLock<Peer<RoleServer>>,
    pub(crate) level: Mutex<Option<LoggingLevel>>,
}

/// One owner's notices.
pub(crate) struct Hub {
    /// The owner (its session in [`crate::sessions::Sessions`]).
    pub(crate) id: String,
    /// Notices not yet shown on a tool result.
    pending: Mutex<Vec<Notice>>,
    /// The owner's connections that may be sent logging messages; a dropped one is skipped.
    listeners: Mutex<Vec<Weak<Listener>>>,
}

/// True when a message at `level` goes to a connection that asked for `wanted` and above.
pub(super) fn wants(wanted: Option<LoggingLevel>, level: LoggingLevel) -> bool {
    // The levels in order of severity, as RFC 5424 (and MCP) list them.
    let rank = |l: LoggingLevel| l as u8;
    wanted.is_some_and(|w| rank(w) <= rank(level))
}

impl Hub {
    /// A hub for owner `id` (open in the host's sessions), installed as where its notices go:
    /// notices kept for it before are delivered to it now.
    pub(crate) fn install(host: &Taskhost, id: &str) -> Arc<Self> {
        let hub = Arc::new(Self {
            id: id.to_owned(),
            pending: Mutex::default(),
            listeners: Mutex::default(),
        });
        let weak = Arc::downgrade(&hub);
        let runtime = tokio::runtime::Handle::current();
        host.sessions().set_sink(
            id,
            Arc::new(move |notice: &Notice| {
                if let Some(hub) = weak.upgrade() {
                    hub.deliver(notice, &runtime);
                }
            }),
        );
        hub
    }

    /// Adds a connection that may be sent logging messages, for as long as it lives.
    pub(crate) fn attach(&self, listener: &Arc<Listener>) {
        let mut listeners = self.listeners.lock();
        listeners.retain(|l| l.strong_count() > 0);
        listeners.push(Arc::downgrade(listener));
    }

    /// Takes the notices not yet shown on a tool result.
    pub(crate) fn take_pending(&self) -> Vec<Notice> {
        std::mem::take(&mut *self.pending.lock())
    }

    fn deliver(&self, notice: &Notice, runtime: &tokio::runtime::Handle) {
        self.pending.lock().push(notice.clone());
        let peers: Vec<Peer<RoleServer>> = self
            .listeners
            .lock()
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|l| wants(*l.level.lock(), LoggingLevel::Info))
            .filter_map(|l| l.peer.get().cloned())
            .collect();
        for peer in peers {
            let param =
                LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(notice.text))
                    .with_logger("tasks");
            runtime.spawn(async move {
                let _ = peer.notify_logging_message(param).await;
            });
        }
    }
}
