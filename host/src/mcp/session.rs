//! One MCP session: its tool calls, the notices it is told, the tool changes it hears of, the
//! `taskhost://plugins` resource.
#![allow(
    deprecated,
    reason = "MCP logging notifications carry the notices (SEP-2577 deprecates them in rmcp)"
)]

use parking_lot::Mutex;
use std::sync::{Arc, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourcesResult, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, Peer, RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ErrorData as McpError, ServerHandler};
use serde_json::{Value, json};

use super::peers::Peers;
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
    /// Cancelled when the client's side of the connection closes.
    client_gone: tokio_util::sync::CancellationToken,
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
    pub(super) fn new(
        host: Arc<Taskhost>,
        id: String,
        peers: Peers,
        client_gone: tokio_util::sync::CancellationToken,
    ) -> Self {
        let changes_at_start = peers.changes();
        let session = Self {
            host,
            id,
            peers,
            peer: Arc::default(),
            log_level: Arc::default(),
            pending: Arc::default(),
            changes_at_start,
            client_gone,
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
        // A stream ends when the client cancels it or leaves: rmcp would wait 5 s for the handler
        // of a client that left with its stream open before ending the session.
        tokio::select! {
            () = context.cancelled() => {}
            () = self.client_gone.cancelled() => {}
        }
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
