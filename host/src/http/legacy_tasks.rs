//! The 2025-11-25 era's task methods over HTTP ([`LegacyTasks`]), ahead of rmcp's service: a
//! session whose `initialize` negotiated 2025-11-25 gets `capabilities.tasks` in its answer and
//! each tool's `execution` in its `tools/list`; its `tasks/*` requests and task-augmented
//! `tools/call`s are answered here, as JSON, for the principal the gate admitted.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::sessions::Sessions;

use crate::mcp::{LEGACY_TASKS_VERSION, LegacyTasks, Principal, PrincipalOwners};

/// The header that names a session.
const SESSION_ID: &str = "mcp-session-id";

/// The largest answer of rmcp's that is read to be amended (an `initialize` or a `tools/list`).
const MAX_AMENDED: usize = 16 << 20;

/// What the HTTP side of the legacy task methods holds.
pub(super) struct LegacyHttp {
    pub(super) tasks: LegacyTasks,
    pub(super) owners: Arc<PrincipalOwners>,
    /// The largest request body read.
    pub(super) max_body_bytes: usize,
    /// The legacy sessions (which of them negotiated 2025-11-25).
    sessions: Arc<Sessions>,
}

impl LegacyHttp {
    pub(super) fn new(
        tasks: LegacyTasks,
        owners: Arc<PrincipalOwners>,
        sessions: Arc<Sessions>,
        max_body_bytes: usize,
    ) -> Arc<Self> {
        Arc::new(Self {
            tasks,
            owners,
            max_body_bytes,
            sessions,
        })
    }
}

/// The middleware: see the module's doc. Anything else passes to rmcp unchanged.
pub(super) async fn legacy_tasks(
    State(legacy): State<Arc<LegacyHttp>>,
    request: Request,
    next: Next,
) -> Response {
    let session = request
        .headers()
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let known = session
        .as_ref()
        .is_some_and(|s| legacy.sessions.is_tasks_era(s));
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let bytes = match super::connection::read_body(body, legacy.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(refused) => return refused,
    };
    // A request of this era's session is read whole (it may be one answered here); any other only
    // for its method and an `initialize`'s version, and rmcp parses it once.
    let (method, version) = if known {
        let message: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if LegacyTasks::answers(&message) {
            let Some(principal) = parts.extensions.get::<Principal>().cloned() else {
                return (StatusCode::UNAUTHORIZED, "no principal").into_response();
            };
            let owner = legacy.owners.hub(&principal).await.id.clone();
            let answer = legacy.tasks.answer(&owner, &message).await;
            return axum::Json(answer).into_response();
        }
        Peek::of_value(&message)
    } else {
        Peek::of(&bytes)
    };
    if let Some(s) = session.as_deref()
        && matches!(method.as_str(), "resources/subscribe" | "logging/setLevel")
    {
        legacy.sessions.pin(s);
    }
    let request = Request::from_parts(parts, Body::from(bytes));
    let amended = match method.as_str() {
        "initialize" => version.as_deref() == Some(LEGACY_TASKS_VERSION),
        "tools/list" => known,
        _ => false,
    };
    let response = next.run(request).await;
    if !amended {
        return response;
    }
    let (response, negotiated) = amend(&legacy.tasks, &method, response).await;
    if negotiated
        && let Some(s) = response
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
    {
        legacy.sessions.note_tasks_era(s);
    }
    response
}

/// What this layer reads of a request it passes on: its method and its `params.protocolVersion`.
#[derive(serde::Deserialize)]
struct Peek {
    method: Option<String>,
    params: Option<PeekParams>,
}

#[derive(serde::Deserialize)]
struct PeekParams {
    #[serde(rename = "protocolVersion")]
    protocol_version: Option<String>,
}

impl Peek {
    /// The method (empty for none) and version of the request `body`, read without building the
    /// rest of it; a body the typed read refuses (a `params` that is not an object, a repeated
    /// key) is read whole, as rmcp will.
    fn of(body: &[u8]) -> (String, Option<String>) {
        match serde_json::from_slice::<Peek>(body) {
            Ok(peek) => (
                peek.method.unwrap_or_default(),
                peek.params.and_then(|p| p.protocol_version),
            ),
            Err(_) => Self::of_value(&serde_json::from_slice(body).unwrap_or(Value::Null)),
        }
    }

    /// [`Peek::of`] for a request already read whole.
    fn of_value(message: &Value) -> (String, Option<String>) {
        (
            message["method"].as_str().unwrap_or_default().to_owned(),
            message["params"]["protocolVersion"]
                .as_str()
                .map(str::to_owned),
        )
    }
}

/// rmcp's answer to a request of `method`, amended (see [`LegacyTasks::amend`]), in JSON or as
/// the events of a stream; true when it negotiated this era.
async fn amend(tasks: &LegacyTasks, method: &str, response: Response) -> (Response, bool) {
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_AMENDED).await else {
        return (
            (StatusCode::BAD_GATEWAY, "an answer too large to amend").into_response(),
            false,
        );
    };
    let mut negotiated = false;
    let mut amend_one = |text: &str| -> Option<String> {
        let mut message: Value = serde_json::from_str(text).ok()?;
        let result = message.get_mut("result")?;
        negotiated |= tasks.amend(method, result);
        Some(message.to_string())
    };
    let text = String::from_utf8_lossy(&bytes);
    let amended: String = if text.trim_start().starts_with('{') {
        amend_one(&text).unwrap_or_else(|| text.clone().into_owned())
    } else {
        text.split_inclusive('\n')
            .map(|line| {
                let Some(data) = line.strip_prefix("data:") else {
                    return line.to_owned();
                };
                let end = if line.ends_with('\n') { "\n" } else { "" };
                amend_one(data.trim())
                    .map_or_else(|| line.to_owned(), |json| format!("data: {json}{end}"))
            })
            .collect()
    };
    parts.headers.remove(header::CONTENT_LENGTH);
    (Response::from_parts(parts, Body::from(amended)), negotiated)
}

#[cfg(test)]
mod tests {
    use super::Peek;

    #[test]
    fn a_peek_reads_the_method_and_the_version_and_skips_the_rest() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"x":[1,2,{"y":null}]}}}"#;
        assert_eq!(
            Peek::of(body),
            ("initialize".to_owned(), Some("2025-11-25".to_owned()))
        );
        let call = br#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bash","arguments":{"command":"ls"}}}"#;
        assert_eq!(Peek::of(call), ("tools/call".to_owned(), None));
    }

    #[test]
    fn a_body_the_typed_peek_refuses_is_read_as_rmcp_reads_it() {
        // A repeated key: the last one counts, as in a whole read.
        let repeated = br#"{"method":"tools/list","method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#;
        assert_eq!(
            Peek::of(repeated),
            ("initialize".to_owned(), Some("2025-11-25".to_owned()))
        );
        // Params that are not an object still leave the method.
        assert_eq!(
            Peek::of(br#"{"method":"tools/list","params":[1]}"#),
            ("tools/list".to_owned(), None)
        );
        assert_eq!(Peek::of(b"not json"), (String::new(), None));
        assert_eq!(
            Peek::of(br#"[{"method":"initialize"}]"#),
            (String::new(), None)
        );
    }
}
