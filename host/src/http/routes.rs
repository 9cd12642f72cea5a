//! Plugins' routes on the HTTP listener (the SDK's `http` module): a request the host does not
//! serve itself, whose `Host` is the listener's own ([`super::authority`]), is the view's proof of
//! the host ([`super::proof`]) or goes to the plugin
//! serving the longest prefix of its path: a `GET` of one of the page's assets as it is, anything
//! else once the viewer's bearer token named a principal ([`super::viewer`]); that principal's
//! owner is opened on the host first, so its tasks from earlier hosts are there. A `GET` that
//! accepts `text/event-stream` is an event stream the host keeps open, calling the plugin for each
//! step (see the SDK's module doc).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use taskhost_abi::McpItemKind;
use taskhost_abi::sdk::http::{ASSET_METHOD, EVENTS_IDLE_MS, EVENTS_METHOD, Events, HttpResponse};

use super::authority::Authorities;
use super::slots::Slots;
use super::viewer;
use crate::Taskhost;
use crate::mcp::PrincipalOwners;
use crate::plugin::{ItemEntry, under};

/// The shortest time between two steps of an event stream that changes woke.
const STEP_GAP: Duration = Duration::from_millis(100);

/// What one event stream follows, for whom.
struct Watching {
    /// The request's path (the route serving it is looked up at every step).
    full_path: String,
    /// The path from the route's prefix on.
    path: String,
    query: BTreeMap<String, String>,
    /// The viewer, as the plugin gets it.
    viewer: Value,
    /// The token the stream was opened with.
    token: String,
}

/// The event streams one principal may have open at once (a page has one).
pub(super) const MAX_STREAMS: usize = 16;

/// How long a page waits before it opens again a stream that ended (the stream's `retry:`).
const RECONNECT_MS: u64 = 500;

/// What one listener's plugin routes share.
#[derive(Clone)]
pub(super) struct Routes {
    host: Arc<Taskhost>,
    owners: Arc<PrincipalOwners>,
    lookup: Arc<taskhost_store::PrincipalLookup>,
    max_body_bytes: usize,
    tls: bool,
    authorities: Authorities,
    changes: tokio::sync::watch::Receiver<u64>,
    /// Open event streams by owner.
    streams: Slots,
    _listening: Arc<taskhost_registry::Registration>,
}

/// What [`Routes::new`] takes from the listener.
pub(super) struct RoutesOf {
    pub(super) host: Arc<Taskhost>,
    pub(super) owners: Arc<PrincipalOwners>,
    pub(super) lookup: Arc<taskhost_store::PrincipalLookup>,
    pub(super) max_body_bytes: usize,
    pub(super) tls: bool,
    /// The `Host` values the listener answers to.
    pub(super) authorities: Authorities,
}

impl Routes {
    /// The routes of a listener; its event streams wake when a task registers or settles.
    pub(super) fn new(of: RoutesOf) -> Self {
        let (tell, changes) = tokio::sync::watch::channel(0u64);
        let listening = of
            .host
            .registry()
            .on_tasks_changed(Arc::new(move |_| tell.send_modify(|n| *n += 1)));
        Self {
            host: of.host,
            owners: of.owners,
            lookup: of.lookup,
            max_body_bytes: of.max_body_bytes,
            tls: of.tls,
            authorities: of.authorities,
            changes,
            streams: Slots::new(MAX_STREAMS),
            _listening: Arc::new(listening),
        }
    }

    /// The route serving `path`: the longest prefix that holds it.
    fn route_for(&self, path: &str) -> Option<ItemEntry> {
        self.host
            .plugins()
            .items(McpItemKind::HttpRoute)
            .into_iter()
            .filter(|r| under(path, &r.key))
            .max_by_key(|r| r.key.len())
    }

    /// The viewer a request signs in as (its bearer token, the principal it names, and whether its
    /// views show every owner), or the answer refusing it: no token, an unknown or revoked one, or a
    /// change that did not come from this host's own page.
    fn viewer_of(
        &self,
        parts: &axum::http::request::Parts,
    ) -> Result<(String, crate::mcp::Principal, bool), Box<Response>> {
        let Some(token) = viewer::presented(&parts.headers) else {
            return Err(Box::new(viewer::refused("This page needs a token.")));
        };
        let (principal, all_owners) = match viewer::principal(&self.lookup, &token) {
            Ok(Some(found)) => found,
            Ok(None) => {
                return Err(Box::new(viewer::refused(
                    "The token names no principal (unknown or revoked).",
                )));
            }
            Err(unavailable) => return Err(Box::new(unavailable.into_response())),
        };
        let scheme = if self.tls { "https" } else { "http" };
        if !viewer::same_origin(&parts.method, &parts.headers, &parts.uri, scheme) {
            return Err(Box::new(
                (
                    StatusCode::FORBIDDEN,
                    "a change must come from this host's own page",
                )
                    .into_response(),
            ));
        }
        Ok((token, principal, all_owners))
    }

    async fn answer(&self, request: Request) -> Response {
        let (parts, body) = request.into_parts();
        if !self.authorities.allow(&parts.headers, &parts.uri) {
            return (
                StatusCode::FORBIDDEN,
                "this listener does not answer to that Host",
            )
                .into_response();
        }
        let query = Query::<BTreeMap<String, String>>::try_from_uri(&parts.uri)
            .map(|q| q.0)
            .unwrap_or_default();
        let full_path = parts.uri.path().to_owned();
        if full_path == super::proof::PATH {
            return super::proof::answer(&self.lookup, &parts, &query);
        }
        let Some(route) = self.route_for(&full_path) else {
            return (StatusCode::NOT_FOUND, "nothing is served here").into_response();
        };
        let path = relative(&full_path, &route.key);
        if parts.method == Method::GET
            && let Some(asset) = asset(&route, &path).await
        {
            return asset;
        }
        let (token, principal, all_owners) = match self.viewer_of(&parts) {
            Ok(viewer) => viewer,
            Err(refused) => return *refused,
        };
        self.owners.hub(&principal).await;
        let viewer =
            json!({"name": principal.name, "owner": principal.owner, "all_owners": all_owners});
        let events = parts.method == Method::GET
            && parts
                .headers
                .get(header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|a| a.contains("text/event-stream"));
        if events {
            let watching = Watching {
                full_path,
                path,
                query,
                viewer,
                token,
            };
            return self.events(watching, &principal.owner);
        }
        let body = match super::connection::read_body(body, self.max_body_bytes).await {
            Ok(body) => body,
            Err(refused) => return refused,
        };
        let Ok(body) = String::from_utf8(body.to_vec()) else {
            return (StatusCode::BAD_REQUEST, "the body is not UTF-8").into_response();
        };
        let headers: BTreeMap<String, String> = parts
            .headers
            .iter()
            .filter(|(name, _)| *name != header::COOKIE && *name != header::AUTHORIZATION)
            .filter_map(|(n, v)| Some((n.as_str().to_owned(), v.to_str().ok()?.to_owned())))
            .collect();
        let params = json!({"path": path, "query": query, "headers": headers, "body": body, "viewer": viewer});
        match route.request(parts.method.as_str(), &params).await {
            Ok(answer) => match serde_json::from_value::<HttpResponse>(answer) {
                Ok(answer) => response(answer),
                Err(e) => plugin_failed(&route, &e.to_string()),
            },
            Err(error) => plugin_failed(&route, &error.to_string()),
        }
    }

    /// An event stream: each step asks the plugin serving `full_path` now (a reload's successor
    /// answers the next step), sends its events, and waits for a change, its follow time, or
    /// [`EVENTS_IDLE_MS`] (then a comment keeps the connection open); it ends when the page goes,
    /// the plugin says so, or no plugin serves the path any more.
    fn events(&self, watching: Watching, owner: &str) -> Response {
        let Some(open) = self.streams.take(owner) else {
            return (
                StatusCode::TOO_MANY_REQUESTS,
                format!("at most {MAX_STREAMS} event streams per principal are open at once"),
            )
                .into_response();
        };
        let (send, mut receive) = tokio::sync::mpsc::channel::<Bytes>(16);
        let routes = self.clone();
        tokio::spawn(async move {
            routes.stream(watching, send).await;
            drop(open);
        });
        let stream = futures::stream::poll_fn(move |cx| {
            receive.poll_recv(cx).map(|b| b.map(Ok::<_, Infallible>))
        });
        let mut response = Body::from_stream(stream).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        response
    }

    /// Runs one event stream until it ends (see [`Routes::events`]), or its token stops naming a
    /// principal (revoked: checked before every step). Steps woken by changes are at least
    /// [`STEP_GAP`] apart, so a burst of task starts costs the stream one step per gap.
    async fn stream(self, watching: Watching, send: tokio::sync::mpsc::Sender<Bytes>) {
        let Watching {
            full_path,
            path,
            query,
            viewer,
            token,
        } = watching;
        let mut changes = self.changes.clone();
        let mut state = Value::Null;
        let mut changed = true;
        let hello = Bytes::from(format!("retry: {RECONNECT_MS}\n\n"));
        if send.send(hello).await.is_err() {
            return;
        }
        loop {
            let Some(route) = self.route_for(&full_path) else {
                return;
            };
            if !matches!(viewer::principal(&self.lookup, &token), Ok(Some(_))) {
                return;
            }
            let began = tokio::time::Instant::now();
            changes.mark_unchanged();
            let params = json!({"path": path, "query": query, "viewer": viewer, "state": state, "changed": changed});
            let Ok(step) = route.request(EVENTS_METHOD, &params).await else {
                return;
            };
            let Ok(step) = serde_json::from_value::<Events>(step) else {
                return;
            };
            let text: String = step
                .events
                .iter()
                .map(|(name, data)| event(name, data))
                .collect();
            if !text.is_empty() && send.send(Bytes::from(text)).await.is_err() {
                return;
            }
            if step.end {
                return;
            }
            state = step.state;
            let wait =
                Duration::from_millis(step.follow_ms.unwrap_or(EVENTS_IDLE_MS).min(EVENTS_IDLE_MS));
            changed = tokio::select! {
                _ = changes.changed() => true,
                () = tokio::time::sleep(wait) => {
                    if step.follow_ms.is_none() && send.send(Bytes::from_static(b": idle\n\n")).await.is_err() {
                        return;
                    }
                    false
                }
                () = send.closed() => return,
            };
            if changed {
                tokio::select! {
                    () = tokio::time::sleep_until(began + STEP_GAP) => {}
                    () = send.closed() => return,
                }
            }
        }
    }
}

/// Serves a request that reached no route of the host's own.
pub(super) async fn serve(State(routes): State<Routes>, request: Request) -> Response {
    let mut response = routes.answer(request).await;
    viewer::harden(&mut response);
    response
}

/// One server-sent event; each line of `data` on a `data:` line of its own.
fn event(name: &str, data: &str) -> String {
    let name: String = name.chars().filter(|c| !c.is_control()).collect();
    let mut text = format!("event: {name}\n");
    for line in data.split('\n') {
        text.push_str("data: ");
        text.push_str(line.trim_end_matches('\r'));
        text.push('\n');
    }
    text.push('\n');
    text
}

/// `full_path` from the route's prefix on, starting with `/`.
fn relative(full_path: &str, prefix: &str) -> String {
    let rest = full_path
        .strip_prefix(prefix.trim_end_matches('/'))
        .unwrap_or(full_path);
    if rest.starts_with('/') {
        rest.to_owned()
    } else {
        format!("/{rest}")
    }
}

/// The asset `route` serves at `path` with no token, if it is one (a plugin that fails to say is
/// answered 502).
async fn asset(route: &ItemEntry, path: &str) -> Option<Response> {
    match route.request(ASSET_METHOD, &json!({ "path": path })).await {
        Ok(Value::Null) => None,
        Ok(answer) => Some(match serde_json::from_value::<HttpResponse>(answer) {
            Ok(answer) => response(answer),
            Err(e) => plugin_failed(route, &e.to_string()),
        }),
        Err(error) => Some(plugin_failed(route, &error.to_string())),
    }
}

/// The plugin's answer as an HTTP response (a header that is not valid is left out).
fn response(answer: HttpResponse) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = (status, answer.body).into_response();
    for (name, value) in answer.headers {
        if let (Ok(name), Ok(value)) = (
            header::HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            response.headers_mut().insert(name, value);
        }
    }
    response
}

/// 502: the plugin serving `route` failed to answer.
fn plugin_failed(route: &ItemEntry, why: &str) -> Response {
    tracing::warn!(plugin = route.plugin(), route = %route.key, error = why, "a plugin's HTTP route failed");
    (
        StatusCode::BAD_GATEWAY,
        format!("the plugin {} did not answer: {why}", route.plugin()),
    )
        .into_response()
}
