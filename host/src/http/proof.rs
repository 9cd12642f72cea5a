//! The view's proof of the host: before a page sends its bearer token anywhere (the first request
//! of a load, every reconnect of its event stream), it asks `GET PATH?principal=P&nonce=N`, with no
//! token, where `P = hex(SHA-256(H))` and `H` is what the store keeps of the token
//! (`SHA-256` of its 64 hex digits). The host answers
//! `hex(HMAC-SHA256(H, "taskhost-view-proof\n" + N + "\n" + Host))`, which only a server holding
//! the token's record can compute, so a server that took the view's port while the host was down
//! gets no token. A revoked principal is answered 410 with the same MAC over
//! `"taskhost-view-revoked\n" ...`, so the page signs out on the host's word alone; any other `P`
//! (unknown, malformed) gets one and the same 404.

use std::collections::BTreeMap;

use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use taskhost_store::PrincipalLookup;

/// Where the host answers the proof, ahead of the plugins' routes.
pub(super) const PATH: &str = "/.well-known/taskhost-view-proof";

/// The answer to a proof request of `query` (`principal`, `nonce`).
pub(super) fn answer(
    lookup: &PrincipalLookup,
    parts: &Parts,
    query: &BTreeMap<String, String>,
) -> Response {
    let nonce = query
        .get("nonce")
        .filter(|n| (32..=128).contains(&n.len()) && n.bytes().all(|b| b.is_ascii_hexdigit()));
    let host = parts
        .headers
        .get(header::HOST)
        .and_then(|v: &HeaderValue| v.to_str().ok())
        .or_else(|| parts.uri.authority().map(|a| a.as_str()));
    let (Some(id), Some(nonce), Some(host)) = (query.get("principal"), nonce, host) else {
        return unknown();
    };
    let key = match lookup.proof_key(id) {
        Ok(Some(key)) => key,
        Ok(None) => return unknown(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the principals for a view's proof");
            return super::viewer::Unavailable.into_response();
        }
    };
    let (status, label) = if key.live {
        (StatusCode::OK, "taskhost-view-proof")
    } else {
        (StatusCode::GONE, "taskhost-view-revoked")
    };
    let mac = key.sign(format!("{label}\n{nonce}\n{host}").as_bytes());
    (status, [(header::CONTENT_TYPE, "text/plain")], mac).into_response()
}

/// The one answer for a principal this host does not know.
fn unknown() -> Response {
    (StatusCode::NOT_FOUND, "nothing is served here").into_response()
}
