//! Who looks at a plugin's page: the principal an `Authorization: Bearer TOKEN` header names. A
//! page sends it itself (it keeps the token in `localStorage`, scoped to its own origin); no cookie
//! carries it, since a browser sends a cookie to every port of its host, and `?token=` names
//! nobody. A request that changes anything (`POST`, ...) from a browser's page must come from this
//! listener's own origin. Every answer carries the headers a page of task output needs: a content
//! security policy that runs no inline script, `nosniff`, no framing, no caching.

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};

use super::auth::bearer_of;
use crate::mcp::Principal;
use taskhost_store::{PrincipalLookup, Token};

/// The token a request presents: its `Authorization: Bearer` header's.
pub(super) fn presented(headers: &HeaderMap) -> Option<String> {
    bearer_of(headers).map(str::to_owned)
}

/// The principal `token` names, if any, and whether its views show every owner's tasks; `Err`
/// when the token cannot be checked now (answered 503).
pub(super) fn principal(
    lookup: &PrincipalLookup,
    token: &str,
) -> Result<Option<(Principal, bool)>, Unavailable> {
    let Some(token) = Token::parse(token) else {
        return Ok(None);
    };
    match lookup.viewer_of(&token) {
        Ok(found) => Ok(found.map(|(name, owner, all)| (Principal { name, owner }, all))),
        Err(e) => {
            tracing::warn!(error = %e, "cannot check a viewer's token");
            Err(Unavailable)
        }
    }
}

/// The token store cannot be read now.
#[derive(Debug)]
pub(super) struct Unavailable;

impl IntoResponse for Unavailable {
    fn into_response(self) -> Response {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "the token cannot be checked now; try again",
        )
            .into_response()
    }
}

/// 401, saying `why` and where a token comes from.
pub(super) fn refused(why: &str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        format!(
            "{why} Send Authorization: Bearer TOKEN; a browser signs in at http://HOST:PORT/#token=TOKEN (a token comes from taskhost token create NAME)."
        ),
    )
        .into_response()
}

/// True when a request that changes something may go on: a browser's page (which sends an
/// `Origin` with every such request) must be of the site it was sent to (`scheme://` and the
/// request's own `Host`: the listener as the person reached it, `localhost` or `127.0.0.1` alike);
/// a request with no `Origin` is no page's (a script with its token). Over HTTP/2 the `Host` is the
/// URI's authority.
pub(super) fn same_origin(method: &Method, headers: &HeaderMap, uri: &Uri, scheme: &str) -> bool {
    if matches!(*method, Method::GET | Method::HEAD) {
        return true;
    }
    let value = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let host = value(header::HOST).or_else(|| uri.authority().map(|a| a.as_str()));
    match (value(header::ORIGIN), host) {
        (None, _) => true,
        (Some(origin), Some(host)) => origin.eq_ignore_ascii_case(&format!("{scheme}://{host}")),
        (Some(_), None) => false,
    }
}

/// Adds the headers every answer of a plugin's route carries.
pub(super) fn harden(response: &mut Response) {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
}
