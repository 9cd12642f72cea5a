//! A tool call of a session: run as a call (its progress and its client's requests passed to the
//! plugin, its notices added to its result), or as an MCP task when the client and the tool want one.

use std::sync::Arc;

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    ProgressNotificationParam,
};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

use super::client::CallClient;
use super::session::McpSession;
use super::surface;
use crate::CallError;
use crate::plugin::CallExtras;

impl McpSession {
    /// Serves `tools/call`.
    ///
    /// # Errors
    /// The owner cannot be named, the call was cancelled, or the plugin answered a JSON-RPC error.
    pub(super) async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        self.observe(&context);
        let hub = self.hub(&context.extensions).await?;
        let arguments = request
            .arguments
            .clone()
            .map_or_else(|| json!({}), Value::Object);
        if let Some(task) = self
            .as_task(&request, &context, &hub.id, &arguments)
            .await?
        {
            return Ok(task.into());
        }
        let request_json = self.request_json(&request, &context);
        let extras = CallExtras {
            progress: Self::progress(&context),
            request: Some(request_json.clone()),
            client: Some(Arc::new(CallClient {
                peer: context.peer.clone(),
                progress_token: context.meta.get_progress_token(),
                listener: self.listener.clone(),
                runtime: tokio::runtime::Handle::current(),
            })),
            request_id: serde_json::to_value(&context.id).ok(),
        };
        let call = self
            .host
            .plugins()
            .call_tool_with(&request.name, &hub.id, &arguments, extras);
        // `notifications/cancelled` for this request, or its connection's end: dropping the call
        // cancels what it started.
        let outcome = tokio::select! {
            outcome = call => outcome,
            () = self.cancelled(&context.ct) => {
                return Err(McpError::internal_error("cancelled by the client", None));
            }
        };
        match outcome {
            Ok(out)
                if out.mcp.as_ref().and_then(|m| m.get("resultType")) == Some(&json!("task")) =>
            {
                // The tool asks to go on as a task (after a first, synchronous round).
                if !tasks_declared(&context) {
                    return Err(McpError::missing_required_client_capability(
                        rmcp::model::ClientCapabilities::builder()
                            .enable_tasks()
                            .build(),
                    ));
                }
                self.peers
                    .tasks()
                    .start(&self.host, &hub.id, &request.name, arguments, request_json)
                    .map(Into::into)
            }
            Ok(out) => {
                let sessions = self.host.sessions();
                let notices = hub
                    .take_pending()
                    .into_iter()
                    .filter(|n| {
                        !n.task
                            .as_deref()
                            .is_some_and(|t| sessions.already_reported(&hub.id, t))
                    })
                    .map(|n| ContentBlock::text(n.text))
                    .collect();
                surface::tool_response(&request.name, out, notices)
            }
            Err(
                e @ (CallError::UnknownTool(_)
                | CallError::BadArguments { .. }
                | CallError::Unavailable(_)),
            ) => Ok(Self::tool_error(format!("Error: {e}")).into()),
        }
    }

    /// Ends when the client cancels the request `ct` is of, or its connection ends: the end of one
    /// connection ends its own calls only (another connection of the same owner, a person's, may
    /// call on).
    async fn cancelled(&self, ct: &tokio_util::sync::CancellationToken) {
        tokio::select! {
            () = ct.cancelled() => {}
            () = self.client_gone.cancelled() => {}
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

    /// The rest of a tool call's request as the plugin gets it: its params but the name and
    /// arguments, and its `_meta` with the client's capabilities (a legacy session's, from its
    /// `initialize`, where the request carries none).
    fn request_json(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Value {
        let mut value =
            json!({"_meta": serde_json::to_value(&context.meta).unwrap_or_else(|_| json!({}))});
        if let Some(responses) = &request.input_responses {
            value["inputResponses"] = json!(responses);
        }
        if let Some(state) = &request.request_state {
            value["requestState"] = json!(state);
        }
        const CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
        if value["_meta"].get(CAPABILITIES).is_none()
            && let Some(info) = context.peer.peer_info()
            && let Ok(capabilities) = serde_json::to_value(&info.capabilities)
            && value["_meta"].is_object()
        {
            value["_meta"][CAPABILITIES] = capabilities;
        }
        value
    }

    /// A call run as an MCP task, when the client declared the tasks extension and the tool
    /// supports tasks; `None` to run it as a call.
    ///
    /// # Errors
    /// `-32021` for a tool that runs only as a task, called by a client that did not declare the
    /// extension; the registry's refusal of the task.
    async fn as_task(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        owner: &str,
        arguments: &Value,
    ) -> Result<Option<rmcp::model::CreateTaskResult>, McpError> {
        let Some(tool) = self.host.plugins().tool(&request.name) else {
            return Ok(None);
        };
        let support = tool.mcp["execution"]["taskSupport"]
            .as_str()
            .unwrap_or("forbidden");
        if tool.mcp["_meta"]["taskhost/escalates"] == json!(true) {
            // The tool itself answers `resultType: "task"` when it goes on as a task.
            return Ok(None);
        }
        let declared = tasks_declared(context);
        let background = tool.mcp["_meta"]["taskhost/background"].as_object();
        match (support, declared, background) {
            ("required", false, _) => Err(McpError::missing_required_client_capability(
                rmcp::model::ClientCapabilities::builder()
                    .enable_tasks()
                    .build(),
            )),
            ("required" | "optional", true, Some(with)) => self
                .peers
                .tasks()
                .start_background(&self.host, owner, &request.name, arguments.clone(), with)
                .await
                .map(Some),
            ("required" | "optional", true, None) => self
                .peers
                .tasks()
                .start(
                    &self.host,
                    owner,
                    &request.name,
                    arguments.clone(),
                    self.request_json(request, context),
                )
                .map(Some),
            _ => Ok(None),
        }
    }

    fn tool_error(text: String) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(text)])
    }
}

/// True when the request's client declared the tasks extension in the 2026-07-28 era: the
/// extension is that era's (a 2025-11-25 session's tasks are another protocol, which this host does
/// not speak).
fn tasks_declared(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v >= rmcp::model::ProtocolVersion::V_2026_07_28)
        && context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks())
}
