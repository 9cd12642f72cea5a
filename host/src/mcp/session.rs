//! One MCP session: its tool calls, the notices it is told, the list changes it hears of, and the
//! plugins' prompts, resources and completions (answered in `surface.rs`).
#![allow(
    deprecated,
    reason = "MCP logging notifications carry the notices (SEP-2577 deprecates them in rmcp)"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, CompleteRequestParams,
    CompleteResult, GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult,
    Implementation, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, LoggingLevel, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams, SubscriptionFilter, Tool, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::{NotificationContext, RequestContext, RoleServer, SubscriptionContext};
use rmcp::{ErrorData as McpError, ServerHandler};

use super::hub::{Hub, Listener};
use super::peers::Peers;
use super::principals::{Principal, PrincipalOwners};
use super::surface;
use crate::Taskhost;

/// One MCP session: a connection's (stdio, a socket), or an HTTP client's (a legacy session, or one
/// stateless 2026-07-28 request), serving the owner it belongs to.
pub struct McpSession {
    pub(super) host: Arc<Taskhost>,
    owner: OwnerOf,
    /// This session's key among the change listeners ([`Peers`]): unique on the host, so that a
    /// session ending never forgets another's listeners.
    key: String,
    pub(super) peers: Peers,
    /// This session as its owner's hub sees it: its peer and the log level it asked for.
    pub(super) listener: Arc<Listener>,
    /// The tool set changes counted when the session started ([`Peers::changes`]).
    changes_at_start: u64,
    /// Cancelled when the client's side of the connection closes.
    pub(super) client_gone: tokio_util::sync::CancellationToken,
}

/// Whose tasks a session serves.
enum OwnerOf {
    /// The owner of one connection.
    Connection(Arc<Hub>),
    /// The principal each HTTP request's token names; a legacy session is bound to the first one it
    /// saw, and refuses a request that names another.
    Principal {
        owners: Arc<PrincipalOwners>,
        bound: OnceLock<String>,
    },
}

/// A key for a session no other has on this host.
fn unique_key(owner: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!("{owner}#{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

impl McpSession {
    /// A session for owner `id`, which the caller opened in [`Taskhost::sessions`]; its notices go
    /// to this connection from now on. Called within the host's runtime.
    pub(super) fn new(
        host: Arc<Taskhost>,
        id: String,
        peers: Peers,
        client_gone: tokio_util::sync::CancellationToken,
    ) -> Self {
        let hub = Hub::install(&host, &id);
        let listener = Arc::new(Listener::default());
        hub.attach(&listener);
        Self {
            changes_at_start: peers.changes(),
            key: unique_key(&id),
            host,
            owner: OwnerOf::Connection(hub),
            peers,
            listener,
            client_gone,
        }
    }

    /// A session of an HTTP client: each request's owner is the principal its token names (see
    /// [`Principal`]), which the HTTP layer put in the request's extensions.
    pub fn for_http(host: Arc<Taskhost>, peers: Peers, owners: Arc<PrincipalOwners>) -> Self {
        Self {
            changes_at_start: peers.changes(),
            key: unique_key("http"),
            host,
            owner: OwnerOf::Principal {
                owners,
                bound: OnceLock::new(),
            },
            peers,
            listener: Arc::default(),
            client_gone: tokio_util::sync::CancellationToken::new(),
        }
    }

    /// The hub of the owner a request (or notification) with `extensions` is served for.
    pub(super) async fn hub(
        &self,
        extensions: &rmcp::model::Extensions,
    ) -> Result<Arc<Hub>, McpError> {
        match &self.owner {
            OwnerOf::Connection(hub) => Ok(hub.clone()),
            OwnerOf::Principal { owners, bound } => {
                let principal = extensions
                    .get::<axum::http::request::Parts>()
                    .and_then(|parts| parts.extensions.get::<Principal>())
                    .ok_or_else(|| {
                        McpError::invalid_request("the request names no principal", None)
                    })?;
                if *bound.get_or_init(|| principal.owner.clone()) != principal.owner {
                    return Err(McpError::invalid_request(
                        "this MCP session belongs to another principal",
                        None,
                    ));
                }
                Ok(owners.hub(principal).await)
            }
        }
    }

    /// What every request tells of its session: its peer (a 2026-07-28 session never sends
    /// `notifications/initialized`) and, in the 2026-07-28 era, the log level it opts in to.
    pub(super) fn observe(&self, context: &RequestContext<RoleServer>) {
        let _ = self.listener.peer.set(context.peer.clone());
        if let Some(level) = context.meta.log_level() {
            *self.listener.level.lock() = Some(level);
        }
    }
}

impl Drop for McpSession {
    fn drop(&mut self) {
        self.peers.remove(&self.key);
    }
}

impl ServerHandler for McpSession {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_completions()
            .enable_prompts()
            .enable_prompts_list_changed()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_resources_list_changed()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_tasks()
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
            .map(surface::mcp_tool)
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.host.plugins().tool(name).map(surface::mcp_tool)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.call(request, context).await
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let _ = self.listener.peer.set(context.peer.clone());
        if let OwnerOf::Connection(hub) = &self.owner
            && let Some(info) = context.peer.peer_info()
        {
            // People's views name the owner by its client ("claude-code #3").
            self.host
                .sessions()
                .name_client(&hub.id, &info.client_info.name);
        }
        // A legacy session gets logging messages unless it asks otherwise (`logging/setLevel`).
        self.listener.level.lock().get_or_insert(LoggingLevel::Info);
        if let OwnerOf::Principal { .. } = self.owner
            && let Ok(hub) = self.hub(&context.extensions).await
        {
            hub.attach(&self.listener);
        }
        self.peers
            .add_legacy(&self.key, context.peer, self.changes_at_start);
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.observe(&context);
        *self.listener.level.lock() = Some(request.level);
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(
            SubscriptionFilter::builder()
                .tools_list_changed()
                .prompts_list_changed()
                .resources_list_changed()
                .build(),
        )
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        self.observe(context.request_context());
        let sink = context.sink().clone();
        let id = sink.id().clone();
        self.peers
            .add_stream(&self.key, sink, self.changes_at_start);
        // A stream ends when the client cancels it or leaves: rmcp would wait 5 s for the handler
        // of a client that left with its stream open before ending the session.
        tokio::select! {
            () = context.cancelled() => {}
            () = self.client_gone.cancelled() => {}
        }
        self.peers.remove_stream(&self.key, &id);
        Ok(())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        self.observe(&context);
        Ok(surface::list_resources(&self.host))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        self.observe(&context);
        Ok(surface::list_templates(&self.host))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.observe(&context);
        let local = matches!(self.owner, OwnerOf::Connection(_));
        surface::read_resource(&self.host, request, &context.meta, local).await
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.observe(&context);
        self.peers.subscribe(&self.key, &request.uri, true);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.observe(&context);
        self.peers.subscribe(&self.key, &request.uri, false);
        Ok(())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        self.observe(&context);
        Ok(surface::list_prompts(&self.host))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        self.observe(&context);
        surface::get_prompt(&self.host, request, &context.meta).await
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.observe(&context);
        let hub = self.hub(&context.extensions).await?;
        self.peers
            .tasks()
            .get(&self.host, &hub.id, &request.task_id)
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.observe(&context);
        let hub = self.hub(&context.extensions).await?;
        self.peers.tasks().update(
            &self.host,
            &hub.id,
            &request.task_id,
            request.input_responses,
        )
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.observe(&context);
        let hub = self.hub(&context.extensions).await?;
        self.peers
            .tasks()
            .cancel(&self.host, &hub.id, &request.task_id)
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, McpError> {
        self.observe(&context);
        surface::complete(&self.host, request, &context.meta).await
    }
}
