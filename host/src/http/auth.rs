//! The bearer-token gate in front of `/mcp`, and the RFC 9728 metadata that tells a client where
//! tokens come from. A request without `Authorization: Bearer TOKEN`, or whose token names no live
//! principal (unknown, malformed, revoked), gets 401 with `WWW-Authenticate: Bearer
//! resource_metadata="..."`; one whose token names a principal goes on with the [`Principal`] in its
//! extensions; its token is checked again once its body arrived, so a request whose head came before
//! a revocation is not served after it. Tokens are the state directory's own (`taskhost token create`), issued for this
//! resource and no other, so the audience check of RFC 8707 is the lookup itself: a token of
//! another server never names a principal here.
//!
//! A legacy session (`Mcp-Session-Id`) belongs to the principal that opened it: a request of
//! another principal naming it (a POST, its notice stream, its end) is answered as for a session
//! that does not exist. What a principal holds at once is bounded ([`Bounds`]).

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::bounds::{Bounds, ConnectionClaims, Holding};
use super::connection::read_body;
use crate::mcp::Principal;
use crate::process::OwnerBounds;
use taskhost_store::{PrincipalLookup, Token};

/// What the gate checks tokens against, and the metadata URL it names.
#[derive(Clone)]
pub(super) struct Gate {
    pub(super) lookup: Arc<PrincipalLookup>,
    /// The host's policies: a principal bound to one its config lacks is refused (403).
    pub(super) policies: Option<Arc<crate::policy::Policies>>,
    /// The URL of the resource's metadata document.
    pub(super) metadata_url: Arc<str>,
    /// What the principals hold, and their legacy sessions.
    pub(super) bounds: Arc<Bounds>,
    /// The largest request body read.
    pub(super) max_body_bytes: usize,
}

/// The method whose answer is a long-lived event stream.
const LISTEN: &str = "subscriptions/listen";

/// The header that names a legacy session.
const SESSION_ID: &str = "mcp-session-id";

/// The token of an `Authorization: Bearer TOKEN` header (the scheme's case does not matter).
fn bearer(request: &Request) -> Option<&str> {
    bearer_of(request.headers())
}

/// The token of an `Authorization: Bearer TOKEN` header among `headers`.
pub(super) fn bearer_of(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
}

impl Gate {
    /// The principal `token` names, or the answer refusing it: 401 when it names none (unknown,
    /// malformed, revoked), 403 when it is bound to a policy this host cannot give it, 503 when it
    /// cannot be checked.
    fn principal(&self, token: &Token) -> Result<Principal, Box<Response>> {
        match self.lookup.owner_of(token) {
            Ok(Some((name, owner))) => match self.policies.as_ref().map(|p| p.bounds_of(&owner)) {
                Some(Err(why)) => Err(Box::new((StatusCode::FORBIDDEN, why).into_response())),
                _ => Ok(Principal { name, owner }),
            },
            Ok(None) => Err(Box::new(self.challenge(
                Some("invalid_token"),
                "the token names no principal (unknown or revoked)",
            ))),
            Err(e) => {
                tracing::warn!(error = %e, "cannot check a bearer token");
                Err(Box::new(
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the token cannot be checked now; try again",
                    )
                        .into_response(),
                ))
            }
        }
    }

    /// Serves a request of `principal`: its connection counted as the principal's, its body read
    /// and its token checked again (a token revoked while the body came is refused), legacy
    /// sessions fenced by their owner, a `GET` or a `subscriptions/listen` counted among its
    /// streams, a new session admitted under the principal's cap; 429 past a cap.
    async fn pass(
        &self,
        request: Request,
        next: Next,
        token: &Token,
        principal: Principal,
    ) -> Response {
        let owner = principal.owner.clone();
        let (mut parts, body) = request.into_parts();
        if let Some(claims) = parts.extensions.remove::<ConnectionClaims>()
            && let Err(refused) = self.bounds.claim(&claims, &owner)
        {
            return refused.into_response();
        }
        let mut listens = false;
        let mut request = if parts.method == Method::GET {
            Request::from_parts(parts, body)
        } else {
            let body = match read_body(body, self.max_body_bytes).await {
                Ok(body) => body,
                Err(refused) => return refused,
            };
            match self.principal(token) {
                Ok(now) if now.owner == owner => {}
                Ok(_) => return self.challenge(Some("invalid_token"), "the token was revoked"),
                Err(refused) => return *refused,
            }
            listens = opens_a_stream(&body);
            Request::from_parts(parts, Body::from(body))
        };
        let named = request
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let session = match &named {
            Some(id) => match self.bounds.sessions.enter(id, &owner) {
                Ok(session) => session,
                Err(_) => return (StatusCode::NOT_FOUND, "no such MCP session").into_response(),
            },
            None => None,
        };
        let stream = if request.method() == Method::GET || listens {
            match self.bounds.stream(&owner) {
                Ok(slot) => Some(slot),
                Err(refused) => return refused.into_response(),
            }
        } else {
            None
        };
        request.extensions_mut().insert(principal);
        let response = next.run(request).await;
        if named.is_none()
            && let Some(id) = response
                .headers()
                .get(SESSION_ID)
                .and_then(|v| v.to_str().ok())
            && !self.bounds.sessions.admit(id, &owner).await
        {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                "this principal holds its most legacy sessions, none of them idle",
            )
                .into_response();
        }
        self.bounds
            .hold(&owner, response, Holding { stream, session })
    }

    /// 401, naming the metadata; `error` per RFC 6750 (none when no token was presented).
    fn challenge(&self, error: Option<&str>, why: &'static str) -> Response {
        let mut value = format!("Bearer resource_metadata=\"{}\"", self.metadata_url);
        if let Some(error) = error {
            value.push_str(&format!(", error=\"{error}\", error_description=\"{why}\""));
        }
        let mut response = (StatusCode::UNAUTHORIZED, why).into_response();
        if let Ok(value) = HeaderValue::from_str(&value) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// The gate as axum middleware.
pub(super) async fn require_bearer(
    State(gate): State<Gate>,
    request: Request,
    next: Next,
) -> Response {
    let Some(presented) = bearer(&request) else {
        return gate.challenge(None, "this MCP server needs Authorization: Bearer TOKEN");
    };
    let Some(token) = Token::parse(presented) else {
        return gate.challenge(Some("invalid_token"), "the token is not a taskhost token");
    };
    match gate.principal(&token) {
        Ok(principal) => gate.pass(request, next, &token, principal).await,
        Err(refused) => *refused,
    }
}

/// Whether a request body asks for a long-lived event stream: a `subscriptions/listen` request
/// (alone or in a batch).
fn opens_a_stream(body: &[u8]) -> bool {
    let listens = |m: &serde_json::Value| m.get("method").and_then(|m| m.as_str()) == Some(LISTEN);
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Array(batch)) => batch.iter().any(listens),
        Ok(message) => listens(&message),
        Err(_) => false,
    }
}

/// The protected resource metadata (RFC 9728) of the resource at `resource`.
pub(super) fn metadata(resource: &str, authorization_servers: &[String]) -> serde_json::Value {
    let mut document = serde_json::json!({
        "resource": resource,
        "bearer_methods_supported": ["header"],
        "resource_name": "taskhost",
    });
    if !authorization_servers.is_empty() {
        document["authorization_servers"] = serde_json::json!(authorization_servers);
    }
    document
}
