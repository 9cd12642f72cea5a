//! The MCP layer (`crate::mcp::layer`) on HTTP: its in side is the middleware in front of rmcp's
//! service ([`layer`]), which hands a 2025-11-25 session's requests to the layer (answered there, as
//! JSON, for the principal the gate admitted) and passes every other request to rmcp as it came; its
//! out side wraps the transport of every session rmcp runs ([`LayeredSessions`]). What rmcp
//! answers is never read here.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::{RestoreOutcome, ServerSseMessage};
use rmcp::transport::streamable_http_server::{SessionId, SessionManager};
use serde_json::Value;

use super::sessions::Sessions;
use crate::mcp::layer::{Layered, Negotiated};
use crate::mcp::{Layer, Principal, PrincipalOwners};

/// The header that names a session.
const SESSION_ID: &str = "mcp-session-id";

/// What the HTTP side of the layer holds.
pub(super) struct LayerHttp {
    pub(super) layer: Layer,
    pub(super) owners: Arc<PrincipalOwners>,
    /// The largest request body read.
    pub(super) max_body_bytes: usize,
    /// The legacy sessions (what each negotiated).
    sessions: Arc<Sessions>,
}

impl LayerHttp {
    pub(super) fn new(
        layer: Layer,
        owners: Arc<PrincipalOwners>,
        sessions: Arc<Sessions>,
        max_body_bytes: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            layer,
            owners,
            max_body_bytes,
            sessions,
        })
    }
}

/// The middleware: see the module's doc. A request that names a session whose client subscribed
/// to a resource or set a log level pins that session (never parked).
pub(super) async fn layer(
    State(http): State<Arc<LayerHttp>>,
    request: Request,
    next: Next,
) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let session = request
        .headers()
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let negotiated = session.as_deref().and_then(|s| http.sessions.negotiated(s));
    let (parts, body) = request.into_parts();
    let bytes = match super::connection::read_body(body, http.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    // A request of a 2025-11-25 session is read whole (it may be one answered here); any other only
    // for its method, and rmcp parses it once.
    let method = match negotiated.filter(|n| n.tasks_era()) {
        Some(negotiated) => {
            let message: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
            if http.layer.takes(&negotiated, &message) {
                let Some(principal) = parts.extensions.get::<Principal>().cloned() else {
                    return (StatusCode::UNAUTHORIZED, "no principal").into_response();
                };
                let owner = http.owners.hub(&principal).await.id.clone();
                return axum::Json(http.layer.answer(&owner, &message).await).into_response();
            }
            Peek::of_value(&message)
        }
        None => Peek::of(&bytes),
    };
    if let Some(s) = session.as_deref()
        && matches!(method.as_str(), "resources/subscribe" | "logging/setLevel")
    {
        http.sessions.pin(s);
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// The listener's sessions as rmcp runs them: [`Sessions`], each session's transport wrapped in
/// the layer ([`Layered`]), with what the session negotiated kept by [`Sessions`] (so a parked
/// session comes back in its era).
pub(super) struct LayeredSessions {
    pub(super) sessions: Arc<Sessions>,
    pub(super) layer: Layer,
}

impl LayeredSessions {
    /// `transport`, session `id`'s, in the layer.
    fn wrap<T>(&self, id: &SessionId, transport: T) -> Layered<T> {
        let negotiated = self
            .sessions
            .negotiated(id)
            .unwrap_or_else(|| Arc::new(Negotiated::default()));
        self.layer.wrap(transport, negotiated)
    }
}

type Inner = <Sessions as SessionManager>::Transport;

impl SessionManager for LayeredSessions {
    type Error = <Sessions as SessionManager>::Error;
    type Transport = Layered<Inner>;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        let (id, transport) = self.sessions.create_session().await?;
        let transport = self.wrap(&id, transport);
        Ok((id, transport))
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.sessions.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.sessions.has_session(id).await
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        self.sessions.close_session(id).await
    }

    async fn restore_session(
        &self,
        id: SessionId,
    ) -> Result<RestoreOutcome<Self::Transport>, Self::Error> {
        Ok(match self.sessions.restore_session(id.clone()).await? {
            RestoreOutcome::Restored(transport) => {
                RestoreOutcome::Restored(self.wrap(&id, transport))
            }
            RestoreOutcome::AlreadyPresent => RestoreOutcome::AlreadyPresent,
            _ => RestoreOutcome::NotSupported,
        })
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.sessions.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.sessions.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.sessions.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.sessions.resume(id, last_event_id).await
    }

    fn event_store(
        &self,
    ) -> Option<Arc<dyn rmcp::transport::streamable_http_server::session::EventStore>> {
        self.sessions.event_store()
    }
}

/// What the middleware reads of a request it passes on: its method.
#[derive(serde::Deserialize)]
struct Peek {
    method: Option<String>,
}

impl Peek {
    /// The method (empty for none) of the request `body`, read without building the rest of it;
    /// a body the typed read refuses (a repeated key) is read whole, as rmcp will.
    fn of(body: &[u8]) -> String {
        match serde_json::from_slice::<Peek>(body) {
            Ok(peek) => peek.method.unwrap_or_default(),
            Err(_) => Self::of_value(&serde_json::from_slice(body).unwrap_or(Value::Null)),
        }
    }

    /// [`Peek::of`] for a request already read whole.
    fn of_value(message: &Value) -> String {
        message["method"].as_str().unwrap_or_default().to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::Peek;

    #[test]
    fn a_peek_reads_the_method_and_skips_the_rest() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"x":[1,2,{"y":null}]}}}"#;
        assert_eq!(Peek::of(body), "initialize");
        let call = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"ls"}}}"#;
        assert_eq!(Peek::of(call), "tools/call");
    }

    #[test]
    fn a_body_the_typed_peek_refuses_is_read_as_rmcp_reads_it() {
        // A repeated key: the last one counts, as in a whole read.
        let repeated =
            br#"{"method":"tools/list","method":"logging/setLevel","params":{"level":"debug"}}"#;
        assert_eq!(Peek::of(repeated), "logging/setLevel");
        assert_eq!(
            Peek::of(br#"{"method":"tools/list","params":[1]}"#),
            "tools/list"
        );
        assert_eq!(Peek::of(b"not json"), "");
        assert_eq!(Peek::of(br#"[{"method":"initialize"}]"#), "");
    }
}
