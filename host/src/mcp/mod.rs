//! The MCP front end: one [`McpSession`] per MCP session (stdio: one; a Unix socket: one per
//! connection). Each session is one agent, the owner of the tasks it starts, disposed when the
//! session ends.
//!
//! Both protocol eras are served: a legacy session (`initialize`, up to 2025-11-25) is told of tool
//! changes through its peer and gets notices as logging messages; a 2026-07-28 session (`server/discover`,
//! no handshake) is told of tool changes only on the `subscriptions/listen` streams it opens, and gets
//! notices as logging messages once a request opted in with `io.modelcontextprotocol/logLevel`. In
//! both, a notice also rides on the session's next tool result, the one path every client shows its
//! model. rmcp marks logging deprecated (SEP-2577) for 2026-07-28; it is still what clients show.
#![allow(
    deprecated,
    reason = "MCP logging notifications carry the notices (SEP-2577 deprecates them in rmcp)"
)]

mod peers;

pub use peers::Peers;

use parking_lot::Mutex;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourcesResult, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ErrorData as McpError, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use crate::owners::{Admission, CameBack, Claim, Leaving};
use crate::sessions::Notice;
use crate::{CallError, Taskhost};

/// The URI of the plugin table resource.
pub const PLUGINS_URI: &str = "taskhost://plugins";

/// One MCP session.
pub struct McpSession {
    host: Arc<Taskhost>,
    id: String,
    peers: Peers,
    peer: Arc<OnceLock<Peer<RoleServer>>>,
    /// The level the session asked logging messages at; `None` for none (a modern session that never
    /// opted in).
    log_level: Arc<Mutex<Option<LoggingLevel>>>,
    /// Notices not yet shown on a tool result.
    pending: Arc<Mutex<Vec<Notice>>>,
    /// The tool set changes counted when the session started ([`Peers::changes`]).
    changes_at_start: u64,
}

/// True when a message at `level` goes to a session that asked for `wanted` and above.
fn wants(wanted: Option<LoggingLevel>, level: LoggingLevel) -> bool {
    // The levels in order of severity, as RFC 5424 (and MCP) list them.
    let rank = |l: LoggingLevel| l as u8;
    wanted.is_some_and(|w| rank(w) <= rank(level))
}

impl McpSession {
    /// A session for `id`, which the caller opened in [`Taskhost::sessions`]; its notices go to
    /// this connection from now on.
    fn new(host: Arc<Taskhost>, id: String, peers: Peers) -> Self {
        let changes_at_start = peers.changes();
        let session = Self {
            host,
            id,
            peers,
            peer: Arc::default(),
            log_level: Arc::default(),
            pending: Arc::default(),
            changes_at_start,
        };
        let (peer, pending, log_level) = (
            session.peer.clone(),
            session.pending.clone(),
            session.log_level.clone(),
        );
        let runtime = tokio::runtime::Handle::current();
        session.host.sessions().set_sink(
            &session.id,
            Arc::new(move |notice: &Notice| {
                pending.lock().push(notice.clone());
                if !wants(*log_level.lock(), LoggingLevel::Info) {
                    return;
                }
                if let Some(peer) = peer.get().cloned() {
                    let param = LoggingMessageNotificationParam::new(
                        LoggingLevel::Info,
                        json!(notice.text),
                    )
                    .with_logger("tasks");
                    runtime.spawn(async move {
                        let _ = peer.notify_logging_message(param).await;
                    });
                }
            }),
        );
        session
    }

    /// What every request tells of its session: its peer (a 2026-07-28 session never sends
    /// `notifications/initialized`) and, in the 2026-07-28 era, the log level it opts in to.
    fn observe(&self, context: &RequestContext<RoleServer>) {
        let _ = self.peer.set(context.peer.clone());
        if let Some(level) = context.meta.log_level() {
            *self.log_level.lock() = Some(level);
        }
    }

    /// Reports a foreground command's progress to the caller, when its call carries a token.
    fn progress(context: &RequestContext<RoleServer>) -> Option<crate::services::Progress> {
        let token = context.meta.get_progress_token()?;
        let peer = context.peer.clone();
        let runtime = tokio::runtime::Handle::current();
        Some(Arc::new(move |progress: f64, line: String| {
            let param = ProgressNotificationParam::new(token.clone(), progress).with_message(line);
            let peer = peer.clone();
            runtime.spawn(async move {
                let _ = peer.notify_progress(param).await;
            });
        }))
    }

    fn tool_error(text: String) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(text)])
    }
}

impl ServerHandler for McpSession {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("taskhost", env!("CARGO_PKG_VERSION")))
            .with_instructions(self.host.plugins().prompt_sections().join("\n\n"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        self.observe(&context);
        let tools = self
            .host
            .plugins()
            .tools()
            .into_iter()
            .map(|t| {
                let schema = match t.input_schema {
                    Value::Object(m) => m,
                    _ => serde_json::Map::new(),
                };
                Tool::new(t.name, t.description, Arc::new(schema))
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.observe(&context);
        let arguments = request.arguments.map_or_else(|| json!({}), Value::Object);
        let call = self.host.plugins().call_tool_with_progress(
            &request.name,
            &self.id,
            &arguments,
            Self::progress(&context),
        );
        // `notifications/cancelled` for this request: dropping the call cancels what it started.
        let outcome = tokio::select! {
            outcome = call => outcome,
            () = context.ct.cancelled() => {
                return Err(McpError::internal_error("cancelled by the client", None));
            }
        };
        let result = match outcome {
            Ok(out) => {
                let mut blocks = vec![ContentBlock::text(out.text)];
                let pending = std::mem::take(&mut *self.pending.lock());
                let sessions = self.host.sessions();
                blocks.extend(
                    pending
                        .into_iter()
                        .filter(|n| {
                            !n.task
                                .as_deref()
                                .is_some_and(|t| sessions.already_reported(&self.id, t))
                        })
                        .map(|n| ContentBlock::text(n.text)),
                );
                if out.is_error {
                    CallToolResult::error(blocks)
                } else {
                    CallToolResult::success(blocks)
                }
            }
            Err(
                e @ (CallError::UnknownTool(_)
                | CallError::BadArguments { .. }
                | CallError::Unavailable(_)),
            ) => Self::tool_error(format!("Error: {e}")),
        };
        Ok(result.into())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let _ = self.peer.set(context.peer.clone());
        // A legacy session gets logging messages unless it asks otherwise (`logging/setLevel`).
        self.log_level.lock().get_or_insert(LoggingLevel::Info);
        self.peers
            .add_legacy(&self.id, context.peer, self.changes_at_start);
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.observe(&context);
        *self.log_level.lock() = Some(request.level);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(SubscriptionFilter::builder().tools_list_changed().build())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        self.observe(context.request_context());
        let sink = context.sink().clone();
        let id = sink.id().clone();
        if sink.accepted().tools_list_changed == Some(true) {
            self.peers.add_stream(&self.id, sink, self.changes_at_start);
        }
        context.cancelled().await;
        self.peers.remove_stream(&self.id, &id);
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.observe(&context);
        Ok(ListResourcesResult::with_all_items(vec![
            Resource::new(PLUGINS_URI, "plugins").with_mime_type("application/json"),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.observe(&context);
        if request.uri != PLUGINS_URI {
            return Err(McpError::resource_not_found(
                format!("no resource at {}", request.uri),
                None,
            ));
        }
        let text = plugins_json(&self.host).to_string();
        let contents = ResourceContents::text(text, PLUGINS_URI).with_mime_type("application/json");
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}

/// The plugin table as `taskhost://plugins` serves it.
pub fn plugins_json(host: &Taskhost) -> Value {
    let plugins: Vec<Value> = host
        .plugins()
        .info()
        .into_iter()
        .map(|p| {
            let generations: Vec<Value> = p
                .generations
                .iter()
                .map(|g| json!({"generation": g.generation, "state": g.state.as_str(), "live_tasks": g.live_tasks}))
                .collect();
            json!({"name": p.name, "path": p.path.display().to_string(), "generations": generations})
        })
        .collect();
    json!({"plugins": plugins})
}

/// How a served connection ended.
struct Ended {
    outcome: Result<(), String>,
    /// The client said goodbye (its bridge's client closed its input).
    goodbye: bool,
}

/// Serves session `id` (opened by the caller) over `transport`, whose first bytes, already read,
/// are `prefix`, until the client leaves. The session stays open: what happens to its owner is the
/// caller's to decide.
async fn run_session<T>(
    host: Arc<Taskhost>,
    peers: Peers,
    id: &str,
    transport: T,
    prefix: Vec<u8>,
) -> Ended
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let session = McpSession::new(host.clone(), id.to_owned(), peers.clone());
    let guarded = crate::wire::guard(transport, prefix);
    {
        // The client's end ends the session's calls at once (rmcp lets handlers run on for a while).
        let (host, id, gone) = (host.clone(), id.to_owned(), guarded.client_gone.clone());
        tokio::spawn(async move {
            gone.cancelled().await;
            host.sessions().cancel_calls(&id);
        });
    }
    let outcome = match session.serve(guarded.stream).await {
        Ok(running) => running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    peers.remove(id);
    Ended {
        outcome,
        goodbye: guarded.goodbye.load(Ordering::Acquire),
    }
}

/// Admits a connection as an owner (off the runtime's workers: it may write the records).
async fn admit(host: &Arc<Taskhost>, claim: Claim) -> Result<Admission, String> {
    let host = host.clone();
    tokio::task::spawn_blocking(move || host.owners().admit(claim, |s| host.sessions().is_open(s)))
        .await
        .map_err(|e| format!("admitting a connection: {e}"))?
}

/// Serves one session on stdin/stdout: an owner for the session's life, its tasks cancelled and
/// awaited when the client leaves.
///
/// # Errors
/// When the MCP handshake fails or no owner could be named.
///
/// # Cancel safety
/// Not cancel safe: dropped mid-session, the session's calls are not cancelled and its agent is not
/// disposed until the host shuts down. Run it to completion (it ends when the client leaves).
pub async fn serve_stdio(host: Arc<Taskhost>, peers: Peers) -> Result<(), String> {
    let (stdin, stdout) = rmcp::transport::stdio();
    let admission = admit(&host, Claim::Anonymous).await?;
    let id = admission.session;
    host.sessions().open(&id);
    let ended = run_session(
        host.clone(),
        peers,
        &id,
        tokio::io::join(stdin, stdout),
        Vec::new(),
    )
    .await;
    host.end_owner(&id).await;
    tracing::info!(session = %id, "session ended");
    ended.outcome
}

/// Serves one session per connection on `listener` (see [`crate::listen::BoundSocket`]), until the
/// future is dropped. A peer that `peers_allowed` does not admit (checked by `SO_PEERCRED` before
/// anything is read from it) is refused: its connection is closed at once.
///
/// # Errors
/// When accepting fails.
///
/// # Cancel safety
/// Dropping the future stops accepting; sessions already running go on until their client leaves.
pub async fn serve_unix(
    host: Arc<Taskhost>,
    peers: Peers,
    listener: tokio::net::UnixListener,
    peers_allowed: crate::listen::PeerPolicy,
) -> Result<(), String> {
    loop {
        let (stream, _) = listener
            .accept()
            .await
            .map_err(|e| format!("accept: {e}"))?;
        match stream.peer_cred() {
            Ok(cred) if peers_allowed.admits(cred.uid()) => {}
            Ok(cred) => {
                tracing::warn!(
                    uid = cred.uid(),
                    pid = cred.pid(),
                    "refused a connection from another user"
                );
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "refused a connection whose peer is unknown");
                continue;
            }
        }
        let (host, peers) = (host.clone(), peers.clone());
        tokio::spawn(async move {
            if let Err(e) = serve_connection(host, peers, stream).await {
                tracing::warn!(error = %e, "connection failed");
            }
        });
    }
}

/// Serves one socket connection: its hello read (if it sends one), its owner admitted and
/// welcomed, its session served; then its owner ends, or is away for its grace (a connection that
/// may come back and left without a goodbye).
async fn serve_connection(
    host: Arc<Taskhost>,
    peers: Peers,
    mut stream: tokio::net::UnixStream,
) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    let Some((claim, prefix)) = read_claim(&mut stream).await? else {
        // Closed before its first byte (a probe of whether the socket accepts): nobody to serve.
        return Ok(());
    };
    let may_return = claim != Claim::Anonymous;
    let admission = admit(&host, claim).await?;
    if let Some(welcome) = admission.welcome() {
        stream
            .write_all(welcome.as_bytes())
            .await
            .map_err(|e| format!("welcoming {}: {e}", admission.session))?;
    }
    let id = admission.session.clone();
    match admission.came_back {
        CameBack::Here => {}
        CameBack::No => {
            host.sessions().open(&id);
        }
        CameBack::FromRecords => {
            // Open already when this host took over external work of its.
            if !host.sessions().is_open(&id) {
                host.sessions().open(&id);
            }
            let (h, i) = (host.clone(), id.clone());
            let restored = tokio::task::spawn_blocking(move || h.restore_owner(&i))
                .await
                .unwrap_or(0);
            tracing::info!(session = %id, restored, "an owner came back from an earlier host");
        }
    }
    let ended = run_session(host.clone(), peers, &id, stream, prefix).await;
    match host
        .owners()
        .leave(&id, admission.lease, ended.goodbye, may_return)
    {
        Leaving::Superseded => {}
        Leaving::End => {
            host.end_owner(&id).await;
            tracing::info!(session = %id, "session ended");
        }
        Leaving::Away => {
            tracing::info!(session = %id, grace_ms = host.owners().grace().as_millis() as u64, "a connection was lost; its owner may come back");
            host.away(&id, admission.lease);
        }
    }
    ended.outcome
}

/// Reads a connection's hello, if its first byte starts one: the claim, and the bytes read that
/// belong to MCP (the first byte of a connection without a hello); `None` for a connection closed
/// before its first byte.
async fn read_claim(
    stream: &mut tokio::net::UnixStream,
) -> Result<Option<(Claim, Vec<u8>)>, String> {
    use tokio::io::AsyncReadExt;
    let mut first = [0u8; 1];
    if stream
        .read(&mut first)
        .await
        .map_err(|e| format!("reading a connection: {e}"))?
        == 0
    {
        return Ok(None);
    }
    if first[0] != b'#' {
        return Ok(Some((Claim::Anonymous, first.to_vec())));
    }
    let mut line = vec![first[0]];
    while line.len() < crate::owners::MAX_LINE && line.last() != Some(&b'\n') {
        let mut byte = [0u8; 1];
        if stream
            .read(&mut byte)
            .await
            .map_err(|e| format!("reading a hello: {e}"))?
            == 0
        {
            break;
        }
        line.push(byte[0]);
    }
    let text = String::from_utf8_lossy(&line);
    Claim::parse(&text)
        .map(|claim| Some((claim, Vec::new())))
        .ok_or_else(|| {
            format!(
                "refused a connection whose first line is not a hello: {}",
                text.trim_end()
            )
        })
}
