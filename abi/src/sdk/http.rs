//! Routes on the host's HTTP listener, for surface plugins that serve people (a web view): the
//! host accepts the connection, checks the viewer's token, and calls the plugin on its
//! generation's threads with one request at a time; the plugin starts no listener and no thread.
//!
//! Three kinds of call reach an [`HttpHandler`]:
//! - [`HttpHandler::asset`]: a file of the page itself (its HTML, script, style), the same for
//!   everyone and served with no token: a browser's navigation carries none. A page signs in by
//!   itself: the sign-in link is `http://HOST:PORT/#token=TOKEN` (a fragment never reaches a
//!   server), the page keeps the token in `localStorage` (scoped to its origin, port included) and
//!   sends `Authorization: Bearer TOKEN` on each of its requests. No cookie carries the token;
//!   `?token=` signs nobody in;
//! - [`HttpHandler::request`]: one request of a viewer, one response (text bodies: JSON above all);
//! - [`HttpHandler::events`]: one step of a server-sent event stream the host keeps open. The host
//!   calls it first with a `null` state, sends the events it returns, and calls again with the
//!   state it returned once a task registered or settled, or after [`Events::follow_ms`] when the
//!   plugin asked to be called back (to follow output), or at the latest after
//!   [`EVENTS_IDLE_MS`]. The stream's state lives in the host, so a reload of the plugin does not
//!   break an open stream: the next step is answered by the new generation, with the state the
//!   old one returned (a plugin must accept a state it does not recognize as a fresh start).
//!
//! The host adds what every page needs (a content security policy that allows no inline script,
//! `nosniff`, no framing, no caching of answers), answers only requests whose `Host` is the
//! listener's own, and refuses a request that changes anything (`POST`, `PUT`, `PATCH`, `DELETE`)
//! from another site's page.

use std::collections::BTreeMap;

use abi_stable::sabi_trait::TD_Opaque;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::host::Host;
use super::mcp::McpError;
use crate::ffi::{McpHandler_TO, McpItemKind};

/// The longest the host waits between two steps of an event stream when nothing happened.
pub const EVENTS_IDLE_MS: u64 = 15_000;

/// The method name of an event stream's step, as it crosses the boundary.
pub const EVENTS_METHOD: &str = "EVENTS";

/// The method name of an asset's lookup, as it crosses the boundary (its params: `{"path"}`).
pub const ASSET_METHOD: &str = "ASSET";

/// Who is looking: the principal the viewer's token names.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Viewer {
    /// The principal's name (`taskhost token create NAME`).
    pub name: String,
    /// The owner of its tasks.
    pub owner: String,
    /// True when its token was made with `--all-owners`: it may see, read and kill every owner's
    /// tasks through the view (never through MCP).
    #[serde(default)]
    pub all_owners: bool,
}

/// The `caller` of the host's task calls that stands for every owner (a viewer with
/// [`Viewer::all_owners`]); the host gives it no task of its own.
pub const EVERY_OWNER: &str = "*every-owner*";

impl Viewer {
    /// What the host's task calls take as `caller` for this viewer: its owner, or
    /// [`EVERY_OWNER`].
    pub fn caller(&self) -> &str {
        if self.all_owners {
            EVERY_OWNER
        } else {
            &self.owner
        }
    }
}

/// One HTTP request, as the host hands it over.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HttpRequest {
    /// `GET`, `POST`, ...
    #[serde(default)]
    pub method: String,
    /// The path, from the route's prefix on (`/api/tasks`).
    pub path: String,
    /// The query's parameters, decoded (the last of a repeated name wins).
    #[serde(default)]
    pub query: BTreeMap<String, String>,
    /// The headers, names in lower case.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The body, as text (a body that is not UTF-8 is refused before it gets here).
    #[serde(default)]
    pub body: String,
    /// Who asks.
    pub viewer: Viewer,
}

/// One HTTP response.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// Headers the plugin sets (`content-type` above all).
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// The body.
    #[serde(default)]
    pub body: String,
}

impl HttpResponse {
    /// A 200 answer of `content_type`.
    pub fn ok(content_type: &str, body: impl Into<String>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".to_owned(), content_type.to_owned())],
            body: body.into(),
        }
    }

    /// A 200 JSON answer.
    pub fn json(value: &Value) -> Self {
        Self::ok("application/json", value.to_string())
    }

    /// An answer of `status` with a plain-text reason.
    pub fn status(status: u16, reason: impl Into<String>) -> Self {
        Self {
            status,
            ..Self::ok("text/plain; charset=utf-8", reason)
        }
    }
}

/// One step of an event stream, as the host hands it over.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct EventsRequest {
    /// The path, from the route's prefix on.
    pub path: String,
    /// The query's parameters, decoded.
    #[serde(default)]
    pub query: BTreeMap<String, String>,
    /// Who watches.
    pub viewer: Viewer,
    /// What the previous step returned as [`Events::state`] (`null` at the first).
    #[serde(default)]
    pub state: Value,
    /// True at the first step and when a task registered or settled since the previous one;
    /// false when the step comes from [`Events::follow_ms`] alone.
    #[serde(default)]
    pub changed: bool,
}

/// What one step of an event stream sends, and where the stream stands after it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Events {
    /// The events to send: each an event name and its data (one line of text, JSON as a rule).
    #[serde(default)]
    pub events: Vec<(String, String)>,
    /// Handed back at the next step.
    #[serde(default)]
    pub state: Value,
    /// Call again after this many milliseconds even if no task registered or settled (to follow
    /// a task's output); `None` to wait for a change.
    #[serde(default)]
    pub follow_ms: Option<u64>,
    /// Ends the stream after these events (the page opens it again by itself).
    #[serde(default)]
    pub end: bool,
}

/// What answers the requests under a route's prefix.
pub trait HttpHandler: Send + Sync + 'static {
    /// The asset at `path` (from the route's prefix on), served to a `GET` with no token: the
    /// page's own files, which must hold nothing of any principal. `None` (the default) for a path
    /// that needs a viewer: the request goes on to [`HttpHandler::request`] once a bearer token
    /// names one, and is refused (401) otherwise.
    fn asset(&self, path: &str) -> Option<HttpResponse> {
        let _ = path;
        None
    }

    /// Answers one request of a viewer.
    fn request(&self, request: HttpRequest) -> HttpResponse;

    /// One step of the event stream at `request.path` (see the module's doc). The default serves
    /// no stream: it ends at once.
    fn events(&self, request: EventsRequest) -> Events {
        let _ = request;
        Events {
            end: true,
            ..Events::default()
        }
    }
}

struct RouteGlue<H>(H);

impl<H: HttpHandler> super::mcp::ItemHandler for RouteGlue<H> {
    fn handle(&self, method: &str, params: Value) -> Result<Value, McpError> {
        let bad =
            |e: serde_json::Error| McpError::invalid_params(format!("a malformed request: {e}"));
        let answer = if method == EVENTS_METHOD {
            serde_json::to_value(self.0.events(serde_json::from_value(params).map_err(bad)?))
        } else if method == ASSET_METHOD {
            let path = params
                .get("path")
                .and_then(Value::as_str)
                .unwrap_or_default();
            serde_json::to_value(self.0.asset(path))
        } else {
            let mut request: HttpRequest = serde_json::from_value(params).map_err(bad)?;
            method.clone_into(&mut request.method);
            serde_json::to_value(self.0.request(request))
        };
        answer.map_err(|e| McpError::invalid_params(format!("an unencodable answer: {e}")))
    }
}

impl Host {
    /// Serves the requests under `prefix` (`/` for everything the host does not serve itself) on
    /// the host's HTTP listener with `handler`. A host without an HTTP listener never calls it.
    ///
    /// # Errors
    /// The host's refusal: a prefix that does not start with `/`, one the host keeps (`/mcp`,
    /// `/.well-known/`), or one another plugin serves.
    pub fn serve_http(
        &self,
        prefix: &str,
        handler: impl HttpHandler,
    ) -> Result<(), crate::ffi::HostError> {
        let spec = serde_json::json!({ "prefix": prefix });
        let glue = McpHandler_TO::from_value(super::mcp::ItemGlue(RouteGlue(handler)), TD_Opaque);
        super::host::host_result(self.0.register_item(
            McpItemKind::HttpRoute,
            spec.to_string().into(),
            glue,
        ))
    }

    /// The last `max_bytes` of each of task `id`'s kept output streams, as a read shows them,
    /// authorized for `caller`; nothing is consumed (see [`crate::ffi::HostApi::task_tail`]).
    ///
    /// # Errors
    /// As [`Host::get_task`], or a kept file that cannot be read.
    pub fn task_tail(
        &self,
        caller: &str,
        id: &str,
        max_bytes: u64,
    ) -> Result<String, crate::ffi::HostError> {
        super::host::host_result(self.0.task_tail(caller.into(), id.into(), max_bytes))
            .map(String::from)
    }

    /// As [`Host::task_tail`], with the output's colours and styles kept as canonical SGR
    /// sequences (see [`crate::ffi::HostApi::task_tail_coloured`]).
    ///
    /// # Errors
    /// As [`Host::task_tail`].
    pub fn task_tail_coloured(
        &self,
        caller: &str,
        id: &str,
        max_bytes: u64,
    ) -> Result<String, crate::ffi::HostError> {
        super::host::host_result(
            self.0
                .task_tail_coloured(caller.into(), id.into(), max_bytes),
        )
        .map(String::from)
    }

    /// Of the newest `limit` records of `caller`'s tasks, those of tasks this host does not hold,
    /// newest first (see [`crate::ffi::HostApi::task_records_json`]); each a JSON object.
    pub fn task_records(&self, caller: &str, limit: u64) -> Vec<Value> {
        let text = self.0.task_records_json(caller.into(), limit);
        serde_json::from_str::<Value>(text.as_str())
            .ok()
            .and_then(|v| v.get("records").and_then(Value::as_array).cloned())
            .unwrap_or_default()
    }

    /// The names people know `owners` by, for `caller`'s view (see
    /// [`crate::ffi::HostApi::owner_names_json`]): owner id to name, for those that have one.
    pub fn owner_names(
        &self,
        caller: &str,
        owners: &[&str],
    ) -> std::collections::BTreeMap<String, String> {
        let asked = serde_json::to_string(owners).unwrap_or_default();
        let text = self
            .0
            .owner_names_json(caller.into(), asked.as_str().into());
        serde_json::from_str::<Value>(text.as_str())
            .ok()
            .and_then(|v| serde_json::from_value(v.get("names")?.clone()).ok())
            .unwrap_or_default()
    }

    /// What the host records of task `id`, for `caller` (see
    /// [`crate::ffi::HostApi::task_details_json`]); an empty object for a task it may not see.
    pub fn task_details(&self, caller: &str, id: &str) -> Value {
        let text = self.0.task_details_json(caller.into(), id.into());
        serde_json::from_str(text.as_str()).unwrap_or_else(|_| Value::Object(Default::default()))
    }

    /// The host as people watch it: its plugins and its health (see
    /// [`crate::ffi::HostApi::host_status_json`]).
    pub fn host_status(&self) -> Value {
        serde_json::from_str(self.0.host_status_json().as_str()).unwrap_or(Value::Null)
    }
}
