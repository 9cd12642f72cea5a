//! An upgrade's pause on the bridges' sessions: every session of a `taskhost connect` bridge stops
//! taking requests, finishes those it took, and then tells its bridge [`RESTARTING`]: what the
//! bridge sent that was not answered by then was never read, and the bridge sends it again to the
//! next host. So a client whose request was on its way during an upgrade sees no error. An open
//! `subscriptions/listen` stream is not waited for: it is answered only when it ends, and the bridge
//! opens it again on the next host.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The line a host sends a bridge once it took its last request before re-executing itself.
pub const RESTARTING: &str = "#taskhost restarting";

/// The host's side of the pause, shared by every bridge session (see the module doc).
#[derive(Clone, Default)]
pub struct Drain(Arc<Inner>);

#[derive(Default)]
struct Inner {
    asked: CancellationToken,
    /// Sessions that have not yet told their bridge.
    pausing: AtomicUsize,
    changed: Notify,
}

impl Drain {
    /// Asks every bridge session to pause, and waits until each has told its bridge (or has
    /// ended), for at most `within`; false when some had not by then.
    pub async fn pause_all(&self, within: Duration) -> bool {
        self.0.asked.cancel();
        tokio::time::timeout(within, async {
            loop {
                let changed = self.0.changed.notified();
                if self.0.pausing.load(Ordering::Acquire) == 0 {
                    return;
                }
                changed.await;
            }
        })
        .await
        .is_ok()
    }

    /// A session's part: counted until it has paused or ended.
    pub fn enter(&self) -> Pausing {
        self.0.pausing.fetch_add(1, Ordering::AcqRel);
        Pausing {
            drain: self.clone(),
            in_flight: Arc::default(),
            done: false,
        }
    }
}

/// One bridge session's part of a [`Drain`]: the requests it took and has not answered.
pub struct Pausing {
    drain: Drain,
    /// The requests this session took and has not answered.
    pub in_flight: Arc<InFlight>,
    done: bool,
}

impl Pausing {
    /// Resolves when the host asks its sessions to pause.
    pub async fn asked(&self) {
        self.drain.0.asked.cancelled().await;
    }

    /// Waits until every request taken was answered.
    pub async fn answered(&self) {
        loop {
            let changed = self.in_flight.changed.notified();
            if self.in_flight.ids.lock().is_empty() {
                return;
            }
            changed.await;
        }
    }

    /// This session told its bridge.
    pub fn paused(&mut self) {
        if !self.done {
            self.done = true;
            self.drain.0.pausing.fetch_sub(1, Ordering::AcqRel);
            self.drain.0.changed.notify_waiters();
        }
    }
}

impl Drop for Pausing {
    fn drop(&mut self) {
        self.paused();
    }
}

/// The ids of the requests a session took and has not answered.
#[derive(Default)]
pub struct InFlight {
    ids: Mutex<HashSet<String>>,
    changed: Notify,
}

/// What the pause reads of a JSON-RPC line: its id, and whether it is a request (and which).
#[derive(serde::Deserialize)]
struct Envelope {
    id: Option<serde_json::Value>,
    method: Option<serde_json::Value>,
}

/// The request that stays open for as long as its stream: never answered before an upgrade, and
/// replayed by the bridge to the next host, so the pause does not wait for it.
const LISTEN: &str = "subscriptions/listen";

impl InFlight {
    /// Notes a line the session takes: a request is in flight until answered (a
    /// `subscriptions/listen` stream excepted).
    pub fn took(&self, line: &[u8]) {
        if let Ok(Envelope {
            id: Some(id),
            method: Some(method),
        }) = serde_json::from_slice(line)
            && method != LISTEN
        {
            self.ids.lock().insert(id.to_string());
        }
    }

    /// Notes that the answer to request `id` (see [`answer_to`]) is queued for the client: its
    /// request is no longer in flight.
    pub fn answered(&self, id: &str) {
        if self.ids.lock().remove(id) {
            self.changed.notify_waiters();
        }
    }
}

/// The id (as JSON text) of the request a line the session sends answers; `None` for a line that
/// is not an answer.
pub fn answer_to(line: &[u8]) -> Option<String> {
    match serde_json::from_slice(line) {
        Ok(Envelope {
            id: Some(id),
            method: None,
        }) => Some(id.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_waits_for_the_requests_taken_but_not_for_a_listen_stream() {
        let taken = InFlight::default();
        taken.took(br#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{}}"#);
        assert!(taken.ids.lock().is_empty());
        taken.took(br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{}}"#);
        taken.took(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert_eq!(taken.ids.lock().len(), 1);
        taken.answered(&answer_to(br#"{"jsonrpc":"2.0","id":2,"result":{}}"#).unwrap());
        assert!(taken.ids.lock().is_empty());
    }
}
