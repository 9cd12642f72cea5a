//! What one principal may hold of a listener at once, and its end: its connections (counted from
//! its first request on each until the connection closes) and its event streams (`GET /mcp` and
//! `subscriptions/listen` alike), each capped
//! (429 past the cap); its legacy sessions ([`Sessions`]); and every response it has open, which
//! ends when its token is revoked, together with its sessions.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Weak};

use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use parking_lot::Mutex;
use tokio_util::sync::CancellationToken;

use super::guarded::Guarded;
use super::sessions::{InSession, Sessions};
use super::slots::{Slot, Slots};

/// How many connections a principal holds when `[http] max_connections_per_principal` is not set.
pub const DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL: usize = 256;

/// What the principals hold of one listener.
pub(super) struct Bounds {
    /// The legacy sessions.
    pub(super) sessions: Arc<Sessions>,
    streams: Slots,
    connections: Slots,
    /// Each owner with a response open: cancelled when its token is revoked.
    ending: Mutex<HashMap<String, CancellationToken>>,
    /// The owners of the revoked principals.
    revoked: tokio::sync::watch::Receiver<Arc<BTreeSet<String>>>,
}

/// The principals' places one connection holds, given back when the connection closes (the last
/// clone drops: the gate takes it out of each request, so no session keeps it).
#[derive(Clone, Default)]
pub(super) struct ConnectionClaims(Arc<Mutex<Vec<Slot>>>);

/// What a response holds until it ends.
#[expect(
    dead_code,
    reason = "held for their drop: each gives its place back when the response ends"
)]
pub(super) struct Holding {
    /// Its place among the principal's event streams.
    pub(super) stream: Option<Slot>,
    /// The session it is open in.
    pub(super) session: Option<InSession>,
}

impl Bounds {
    /// Nothing held yet; `streams` and `connections` are the caps per principal. Each revoked
    /// principal's responses and sessions end as `revoked` names them, for as long as these bounds
    /// are in use.
    pub(super) fn new(
        sessions: Arc<Sessions>,
        streams: usize,
        connections: usize,
        revoked: tokio::sync::watch::Receiver<Arc<BTreeSet<String>>>,
    ) -> Arc<Self> {
        let bounds = Arc::new(Self {
            sessions,
            streams: Slots::new(streams),
            connections: Slots::new(connections.max(1)),
            ending: Mutex::default(),
            revoked: revoked.clone(),
        });
        bounds.follow(revoked);
        bounds
    }

    /// Counts the connection of `claims` as one of `owner`'s; 429 when it holds the cap.
    pub(super) fn claim(&self, claims: &ConnectionClaims, owner: &str) -> Result<(), TooMany> {
        let mut held = claims.0.lock();
        if held.iter().any(|s| s.owner() == owner) {
            return Ok(());
        }
        let slot = self.connections.take(owner).ok_or_else(|| {
            TooMany(format!(
                "at most {} connections per principal are served at once",
                self.connections.cap()
            ))
        })?;
        held.push(slot);
        Ok(())
    }

    /// A place for one more event stream of `owner` (`GET /mcp`, `subscriptions/listen`); 429 when
    /// it holds the cap.
    pub(super) fn stream(&self, owner: &str) -> Result<Slot, TooMany> {
        self.streams.take(owner).ok_or_else(|| {
            TooMany(format!(
                "at most {} MCP event streams (GET and subscriptions/listen) per principal are open at once",
                self.streams.cap()
            ))
        })
    }

    /// `response`, holding `holding` until its body ends, and ended when `owner`'s token is revoked
    /// (at once when it already was).
    pub(super) fn hold(&self, owner: &str, response: Response, holding: Holding) -> Response {
        let ending = self
            .ending
            .lock()
            .entry(owner.to_owned())
            .or_default()
            .clone();
        if self.revoked.borrow().contains(owner) {
            ending.cancel();
        }
        let ended = ending.cancelled_owned();
        response.map(|body| Body::new(Guarded::ending(body, holding, ended)))
    }

    /// Ends `owner`'s open responses and sessions (its token was revoked).
    pub(super) async fn end(&self, owner: &str) {
        if let Some(ending) = self.ending.lock().remove(owner) {
            ending.cancel();
        }
        self.sessions.end_owner(owner).await;
    }

    /// Ends each revoked principal's responses and sessions as `revoked` names them, for as long as
    /// these bounds are in use.
    fn follow(self: &Arc<Self>, mut revoked: tokio::sync::watch::Receiver<Arc<BTreeSet<String>>>) {
        let bounds: Weak<Self> = Arc::downgrade(self);
        tokio::spawn(async move {
            while revoked.changed().await.is_ok() {
                let owners = revoked.borrow_and_update().clone();
                let Some(bounds) = bounds.upgrade() else {
                    return;
                };
                for owner in owners.iter() {
                    bounds.end(owner).await;
                }
            }
        });
    }
}

/// A principal holds the cap of something: 429, saying what.
pub(super) struct TooMany(String);

impl IntoResponse for TooMany {
    fn into_response(self) -> Response {
        (StatusCode::TOO_MANY_REQUESTS, self.0).into_response()
    }
}
