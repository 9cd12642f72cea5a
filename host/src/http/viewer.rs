//! Who looks at a plugin's page: a token given once as `?token=TOKEN` (answered with a cookie and a
//! redirect to the same page without it, as Jupyter does), then the cookie; a bearer header serves
//! scripts. A page that changes anything (`POST`, ...) on the strength of the cookie must come from
//! this listener's own origin. Every answer carries the headers a page of task output needs: a
//! content security policy that runs no inline script, `nosniff`, no framing, no caching.

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::auth::bearer_of;
use crate::mcp::Principal;
use taskhost_store::{PrincipalLookup, Token};

/// The cookie that carries a viewer's token.
pub(super) const COOKIE: &str = "taskhost_token";

/// Where a viewer's token came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Presented {
    /// `?token=` in the URL: answered with the cookie and a redirect.
    Query,
    /// The cookie: a browser's page.
    Cookie,
    /// `Authorization: Bearer`: a script.
    Header,
}

/// The token a request presents, and how.
pub(super) fn presented(
    headers: &HeaderMap,
    query: &std::collections::BTreeMap<String, String>,
) -> Option<(String, Presented)> {
    if let Some(token) = query.get("token") {
        return Some((token.clone(), Presented::Query));
    }
    if let Some(token) = bearer_of(headers) {
        return Some((token.to_owned(), Presented::Header));
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| {
            let (name, value) = pair.trim().split_once('=')?;
            (name == COOKIE).then(|| (value.to_owned(), Presented::Cookie))
        })
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

/// The answer to `?token=` that named a principal: the cookie, and a redirect to `path` without
/// the token (so it leaves the address bar and the history).
pub(super) fn login(path: &str, token: &str, tls: bool) -> Response {
    let secure = if tls { "; Secure" } else { "" };
    let cookie = format!("{COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict{secure}");
    let mut response = StatusCode::SEE_OTHER.into_response();
    let headers = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&cookie) {
        headers.insert(header::SET_COOKIE, v);
    }
    if let Ok(v) = HeaderValue::from_str(path) {
        headers.insert(header::LOCATION, v);
    }
    response
}

/// 401: the login page for a browser (a form that sends `?token=`), plain text otherwise.
pub(super) fn refused(headers: &HeaderMap, why: &str) -> Response {
    let wants_page = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"));
    if !wants_page {
        return (StatusCode::UNAUTHORIZED, why.to_owned()).into_response();
    }
    let page = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>taskhost: sign in</title></head>\
         <body><h1>taskhost</h1><p>{}</p><form method=\"get\"><label>Token \
         <input name=\"token\" type=\"password\" autocomplete=\"off\" required></label> \
         <button>Open</button></form><p>A token comes from <code>taskhost token create NAME</code>.</p>\
         </body></html>",
        escape(why)
    );
    let mut response = (StatusCode::UNAUTHORIZED, page).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// True when a request that changes something may go on: it came with a bearer token, or from a
/// page of the site it was sent to (its `Origin`, which browsers send with every such request, is
/// `scheme://` and the request's own `Host`: the listener as the person reached it, `localhost` or
/// `127.0.0.1` alike). Another site's page fails this; a rebound name gets no cookie to send.
pub(super) fn same_origin(
    method: &Method,
    presented: Presented,
    headers: &HeaderMap,
    scheme: &str,
) -> bool {
    if matches!(*method, Method::GET | Method::HEAD) || presented == Presented::Header {
        return true;
    }
    let value = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    match (value(header::ORIGIN), value(header::HOST)) {
        (Some(origin), Some(host)) => origin.eq_ignore_ascii_case(&format!("{scheme}://{host}")),
        _ => false,
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

/// `text` with the characters HTML gives meaning to escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
