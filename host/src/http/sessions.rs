//! The legacy sessions of one listener: rmcp's [`LocalSessionManager`] keeps them, and this knows of
//! each its principal's owner, when it last served a request, how many of its requests and streams
//! are open, and whether it negotiated 2025-11-25's tasks. What is known of a session is forgotten
//! when rmcp closes it (a `DELETE`, its idle timeout, its end, an eviction), so nothing here
//! outlives the sessions. A principal holds at most a cap of sessions: past it, the one of its
//! sessions idle longest (no request or stream open) ends. A resume of a stream that already
//! finished is answered with an empty stream, as rmcp answers it, without rmcp's warning.
//!
//! A session with nothing open for a while is parked: rmcp's worker for it (its tasks and channels,
//! about 68 KiB) ends, and only what its client sent to initialize it is kept here. Its next request
//! brings it back (rmcp's restore from a [`SessionStore`]: the kept `initialize` is replayed to a new
//! handler) under the same id, principal and era. A session whose client subscribed to a resource or
//! set a log level is never parked (its handler holds them); a notice that found no stream open to go
//! to is not kept for a parked one, as it was not for an idle one.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::{Stream, StreamExt};
use parking_lot::Mutex;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    RestoreOutcome, ServerSseMessage, SessionState, SessionStore, SessionStoreError,
};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

use crate::mcp::layer::Negotiated;

/// How many legacy sessions a principal holds when `[http] max_sessions_per_principal` is not set.
pub const DEFAULT_MAX_SESSIONS: usize = 64;

/// How long a legacy session with no traffic at all is kept: an agent's session sits idle while its
/// person is away, and rmcp's five minutes would end it under them.
pub const LEGACY_SESSION_IDLE: Duration = Duration::from_secs(24 * 3600);

/// How long a legacy session goes with nothing open before it is parked, when
/// `[http] session_park_ms` is not set.
pub const DEFAULT_PARK_AFTER: Duration = Duration::from_secs(30);

/// What is known of one live session.
struct Known {
    /// Its principal's owner, once the gate admitted it.
    owner: Option<String>,
    last_used: Instant,
    /// Its requests and streams open now.
    open: usize,
    /// What it negotiated that the MCP layer serves (2025-11-25's task methods).
    negotiated: Arc<Negotiated>,
    /// What its client sent to initialize it, once it did: a parked session comes back with it.
    init: Option<SessionState>,
    /// Its rmcp worker was let go; its next request restores it.
    parked: bool,
    /// The closes rmcp has yet to report for workers let go when parking: they end no session.
    letting_go: usize,
    /// Never parked: its handler holds state a restore would lose.
    pinned: bool,
}

/// The legacy sessions of one listener.
pub(super) struct Sessions {
    inner: LocalSessionManager,
    known: Mutex<HashMap<SessionId, Known>>,
    cap: usize,
    park_after: Duration,
}

/// Why a request naming a session is not served in it.
pub(super) struct NotYours;

impl Sessions {
    /// No session yet; at most `cap` per principal, each parked after `park_after` with nothing
    /// open (checked from a task on the current runtime, when there is one). No SSE priming events
    /// (see `HttpServing::mcp_config`), and an idle session kept for [`LEGACY_SESSION_IDLE`].
    pub(super) fn new(cap: usize, park_after: Duration) -> Arc<Self> {
        let mut inner = LocalSessionManager::default();
        inner.session_config.sse_retry = None;
        inner.session_config.keep_alive = Some(LEGACY_SESSION_IDLE);
        let sessions = Arc::new(Self {
            inner,
            known: Mutex::default(),
            cap: cap.max(1),
            park_after,
        });
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(park_while_alive(Arc::downgrade(&sessions)));
        }
        sessions
    }

    /// Gives the new session `id` to `owner`. Past the owner's cap, its session idle longest ends;
    /// when none is idle, `id` itself ends and `false` says so.
    pub(super) async fn admit(&self, id: &str, owner: &str) -> bool {
        let ending = {
            let mut known = self.known.lock();
            let Some(session) = known.get_mut(id) else {
                return true;
            };
            session.owner = Some(owner.to_owned());
            let theirs: Vec<(&SessionId, &Known)> = known
                .iter()
                .filter(|(_, k)| k.owner.as_deref() == Some(owner))
                .collect();
            (theirs.len() > self.cap).then(|| {
                theirs
                    .iter()
                    .filter(|(i, k)| k.open == 0 && &***i != id)
                    .min_by_key(|(_, k)| k.last_used)
                    .map_or_else(|| SessionId::from(id), |(i, _)| (*i).clone())
            })
        };
        let Some(ending) = ending else {
            return true;
        };
        tracing::debug!(owner, session = %ending, "a principal's session past its cap ends");
        self.forget(&ending).await;
        &*ending != id
    }

    /// Enters session `id` for a request of `owner`: `None` when no such session is known (rmcp
    /// answers it), an error when it is another owner's.
    pub(super) fn enter(
        self: &Arc<Self>,
        id: &str,
        owner: &str,
    ) -> Result<Option<InSession>, NotYours> {
        let mut known = self.known.lock();
        let Some(session) = known.get_mut(id) else {
            return Ok(None);
        };
        if session.owner.as_deref().is_some_and(|o| o != owner) {
            return Err(NotYours);
        }
        session.open += 1;
        session.last_used = Instant::now();
        Ok(Some(InSession {
            sessions: self.clone(),
            id: id.into(),
        }))
    }

    /// What session `id` negotiated that the MCP layer serves; `None` for a session not known.
    pub(super) fn negotiated(&self, id: &str) -> Option<Arc<Negotiated>> {
        self.known.lock().get(id).map(|k| k.negotiated.clone())
    }

    /// Keeps session `id` from ever being parked: its handler holds what a restore would not bring
    /// back (a resource subscription, a log level its client set).
    pub(super) fn pin(&self, id: &str) {
        if let Some(session) = self.known.lock().get_mut(id) {
            session.pinned = true;
        }
    }

    /// Ends every session of `owner`.
    pub(super) async fn end_owner(&self, owner: &str) {
        let theirs: Vec<SessionId> = self
            .known
            .lock()
            .iter()
            .filter(|(_, k)| k.owner.as_deref() == Some(owner))
            .map(|(id, _)| id.clone())
            .collect();
        for id in theirs {
            self.forget(&id).await;
        }
    }

    /// Ends session `id`, parked or not, and forgets it.
    async fn forget(&self, id: &SessionId) {
        self.known.lock().remove(id);
        let _ = self.inner.close_session(id).await;
    }

    /// Parks every session with nothing open for `after`, and ends every parked one idle past
    /// [`LEGACY_SESSION_IDLE`] (a parked session has no worker whose timeout would end it).
    async fn park_idle(&self, after: Duration) {
        let (parking, expired) = {
            let mut known = self.known.lock();
            let mut parking = Vec::new();
            let mut expired = Vec::new();
            for (id, k) in known.iter_mut() {
                let idle = k.last_used.elapsed();
                if k.parked && idle >= LEGACY_SESSION_IDLE {
                    expired.push(id.clone());
                } else if !k.parked && !k.pinned && k.open == 0 && k.init.is_some() && idle >= after
                {
                    k.parked = true;
                    k.letting_go += 1;
                    parking.push(id.clone());
                }
            }
            (parking, expired)
        };
        for id in &parking {
            tracing::debug!(session = %id, "an idle legacy session is parked");
            let _ = self.inner.close_session(id).await;
        }
        for id in &expired {
            self.forget(id).await;
        }
    }
}

/// Parks idle sessions every so often, for as long as `sessions` is there.
async fn park_while_alive(sessions: Weak<Sessions>) {
    let Some(every) = sessions
        .upgrade()
        .map(|s| (s.park_after / 4).clamp(Duration::from_millis(100), Duration::from_secs(5)))
    else {
        return;
    };
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(sessions) = sessions.upgrade() else {
            return;
        };
        sessions.park_idle(sessions.park_after).await;
    }
}

/// A request or stream open in a session: the session is not idle while one is.
pub(super) struct InSession {
    sessions: Arc<Sessions>,
    id: SessionId,
}

impl Drop for InSession {
    fn drop(&mut self) {
        if let Some(session) = self.sessions.known.lock().get_mut(&self.id) {
            session.open = session.open.saturating_sub(1);
            session.last_used = Instant::now();
        }
    }
}

impl SessionManager for Sessions {
    type Error = <LocalSessionManager as SessionManager>::Error;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.inner.create_session().await?;
        let known = Known {
            owner: None,
            last_used: Instant::now(),
            open: 0,
            negotiated: Arc::default(),
            init: None,
            parked: false,
            letting_go: 0,
            pinned: false,
        };
        self.known.lock().insert(id.clone(), known);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    /// Closes the session and forgets it (rmcp calls this for a `DELETE` and when a session's
    /// worker ends, whatever ended it), unless it is the end of a worker let go when parking.
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        {
            let mut known = self.known.lock();
            match known.get_mut(id) {
                Some(k) if k.letting_go > 0 => {
                    k.letting_go -= 1;
                    return Ok(());
                }
                _ => known.remove(id),
            };
        }
        self.inner.close_session(id).await
    }

    /// A new worker for parked session `id` (rmcp then replays its `initialize`); an unknown or
    /// unparked one is not restored.
    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        {
            let mut known = self.known.lock();
            let Some(k) = known.get_mut(&id).filter(|k| k.parked) else {
                return Ok(RestoreOutcome::NotSupported);
            };
            k.parked = false;
            k.last_used = Instant::now();
        }
        tracing::debug!(session = %id, "a parked legacy session is restored");
        self.inner.restore_session(id).await
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    /// A stream that finished (its request answered) or was never there has nothing to replay:
    /// an empty stream ends it, as rmcp would answer, and it is no cause for a warning (clients
    /// such as Gemini CLI resume every stream whose events had ids).
    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        match self.inner.resume(id, last_event_id).await {
            Ok(stream) => Ok(stream.left_stream()),
            Err(e) => {
                tracing::debug!(session = %id, error = %e, "nothing to resume: an empty stream");
                Ok(futures::stream::empty().right_stream())
            }
        }
    }
}

/// What a session's client sent to initialize it, kept with the rest that is known of it: rmcp
/// stores it after the handshake, and loads it to restore a session it does not hold (a parked one).
impl SessionStore for Sessions {
    fn load<'a, 'b, 'f>(
        &'a self,
        session_id: &'b str,
    ) -> BoxFuture<'f, Result<Option<SessionState>, SessionStoreError>>
    where
        'a: 'f,
        'b: 'f,
        Self: 'f,
    {
        let state = self
            .known
            .lock()
            .get(session_id)
            .filter(|k| k.parked)
            .and_then(|k| k.init.clone());
        Box::pin(std::future::ready(Ok(state)))
    }

    fn store<'a, 'b, 'c, 'f>(
        &'a self,
        session_id: &'b str,
        state: &'c SessionState,
    ) -> BoxFuture<'f, Result<(), SessionStoreError>>
    where
        'a: 'f,
        'b: 'f,
        'c: 'f,
        Self: 'f,
    {
        if let Some(k) = self.known.lock().get_mut(session_id) {
            k.init = Some(state.clone());
        }
        Box::pin(std::future::ready(Ok(())))
    }

    /// rmcp calls this for a `DELETE`: the session ends, parked or not.
    fn delete<'a, 'b, 'f>(
        &'a self,
        session_id: &'b str,
    ) -> BoxFuture<'f, Result<(), SessionStoreError>>
    where
        'a: 'f,
        'b: 'f,
        Self: 'f,
    {
        let id = SessionId::from(session_id);
        Box::pin(async move {
            self.forget(&id).await;
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests;
