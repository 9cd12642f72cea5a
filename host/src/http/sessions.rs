//! The legacy sessions of one listener: rmcp's [`LocalSessionManager`] keeps them, and this knows of
//! each its principal's owner, when it last served a request, how many of its requests and streams
//! are open, and whether it negotiated 2025-11-25's tasks. What is known of a session is forgotten
//! when rmcp closes it (a `DELETE`, its idle timeout, its end, an eviction), so nothing here
//! outlives the sessions. A principal holds at most a cap of sessions: past it, the one of its
//! sessions idle longest (no request or stream open) ends. A resume of a stream that already
//! finished is answered with an empty stream, as rmcp answers it, without rmcp's warning.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{Stream, StreamExt};
use parking_lot::Mutex;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::ServerSseMessage;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};

/// How many legacy sessions a principal holds when `[http] max_sessions_per_principal` is not set.
pub const DEFAULT_MAX_SESSIONS: usize = 64;

/// How long a legacy session with no traffic at all is kept: an agent's session sits idle while its
/// person is away, and rmcp's five minutes would end it under them.
pub const LEGACY_SESSION_IDLE: Duration = Duration::from_secs(24 * 3600);

/// What is known of one live session.
struct Known {
    /// Its principal's owner, once the gate admitted it.
    owner: Option<String>,
    last_used: Instant,
    /// Its requests and streams open now.
    open: usize,
    /// It negotiated 2025-11-25 (the legacy task methods answer it).
    tasks_era: bool,
}

/// The legacy sessions of one listener.
pub(super) struct Sessions {
    inner: LocalSessionManager,
    known: Mutex<HashMap<SessionId, Known>>,
    cap: usize,
}

/// Why a request naming a session is not served in it.
pub(super) struct NotYours;

impl Sessions {
    /// No session yet; at most `cap` per principal. No SSE priming events (see
    /// `HttpServing::mcp_config`), and an idle session kept for [`LEGACY_SESSION_IDLE`].
    pub(super) fn new(cap: usize) -> Arc<Self> {
        let mut inner = LocalSessionManager::default();
        inner.session_config.sse_retry = None;
        inner.session_config.keep_alive = Some(LEGACY_SESSION_IDLE);
        Arc::new(Self {
            inner,
            known: Mutex::default(),
            cap: cap.max(1),
        })
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
        let _ = self.close_session(&ending).await;
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

    /// Notes that session `id` negotiated 2025-11-25.
    pub(super) fn note_tasks_era(&self, id: &str) {
        if let Some(session) = self.known.lock().get_mut(id) {
            session.tasks_era = true;
        }
    }

    /// Whether session `id` negotiated 2025-11-25.
    pub(super) fn is_tasks_era(&self, id: &str) -> bool {
        self.known.lock().get(id).is_some_and(|k| k.tasks_era)
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
            let _ = self.close_session(&id).await;
        }
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
            tasks_era: false,
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
    /// worker ends, whatever ended it).
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.known.lock().remove(id);
        self.inner.close_session(id).await
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_rmcp_closes_is_forgotten() {
        let sessions = Sessions::new(2);
        let (id, _transport) = sessions.create_session().await.expect("a session");
        assert!(sessions.admit(&id, "principal-1").await);
        sessions.note_tasks_era(&id);
        assert!(sessions.is_tasks_era(&id));
        sessions.close_session(&id).await.expect("closed");
        assert!(sessions.known.lock().is_empty());
        assert!(!sessions.is_tasks_era(&id));
    }

    #[tokio::test]
    async fn past_the_cap_a_busy_session_stays_and_the_new_one_is_refused() {
        let sessions = Sessions::new(1);
        let (busy, _a) = sessions.create_session().await.expect("a session");
        assert!(sessions.admit(&busy, "principal-1").await);
        let _open = sessions.enter(&busy, "principal-1").ok().flatten();
        let (new, _b) = sessions.create_session().await.expect("a session");
        assert!(!sessions.admit(&new, "principal-1").await, "none idle");
        assert!(sessions.known.lock().contains_key(&busy));
        assert!(!sessions.known.lock().contains_key(&new));
        assert!(sessions.enter(&busy, "principal-2").is_err(), "fenced");
    }
}
