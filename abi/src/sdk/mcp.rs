//! What a plugin offers MCP clients besides tools: prompts, resources and resource templates, each
//! described by its MCP JSON and answered by a closure; and what a tool call may do with its client
//! while it runs: log, report progress, ask (sampling, elicitation, roots).

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RErr, ROk, ROption, RResult, RStr, RString};
use serde_json::{Value, json};

use super::host::{Host, host_result};
use super::plugin::contained;
use crate::ffi::{HostError, HostErrorKind, McpHandler, McpHandler_TO, McpItemKind};

/// A JSON-RPC error an item's handler (or a tool, through [`McpError::tool_result`]) answers with.
#[derive(Clone, Debug, PartialEq)]
pub struct McpError {
    /// The JSON-RPC error code (`-32602` invalid params, `-32002` resource not found, ...).
    pub code: i64,
    /// What went wrong.
    pub message: String,
    /// More about it, if anything.
    pub data: Option<Value>,
}

impl McpError {
    /// `-32602`: the params are wrong.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self {
            code: -32602,
            message: message.into(),
            data: None,
        }
    }

    /// The error as a JSON-RPC error object.
    pub fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }

    /// A tool result that answers the call with this JSON-RPC error.
    pub fn tool_result(&self) -> crate::ffi::ToolResult {
        crate::ffi::ToolResult::mcp(
            format!("Error: {}", self.message),
            true,
            &json!({"error": self.to_json()}),
        )
    }
}

/// What answers an item's requests: `(method, params)` to the MCP result.
pub trait ItemHandler: Send + Sync + 'static {
    /// Answers one request.
    ///
    /// # Errors
    /// The JSON-RPC error the client gets.
    fn handle(&self, method: &str, params: Value) -> Result<Value, McpError>;
}

impl<F: Fn(&str, Value) -> Result<Value, McpError> + Send + Sync + 'static> ItemHandler for F {
    fn handle(&self, method: &str, params: Value) -> Result<Value, McpError> {
        self(method, params)
    }
}

/// An item handler as the boundary's [`McpHandler`].
pub(crate) struct ItemGlue<H>(pub(crate) H);

impl<H: ItemHandler> McpHandler for ItemGlue<H> {
    fn handle(&self, method: RStr<'_>, params_json: RStr<'_>) -> RResult<RString, RString> {
        let params = serde_json::from_str(params_json.as_str()).unwrap_or_else(|_| json!({}));
        let answered = contained("an MCP item's handler", || {
            self.0.handle(method.as_str(), params)
        });
        match answered {
            Ok(Ok(result)) => ROk(result.to_string().into()),
            Ok(Err(e)) => RErr(e.to_json().to_string().into()),
            Err(panicked) => RErr(
                json!({"code": -32603, "message": panicked})
                    .to_string()
                    .into(),
            ),
        }
    }
}

impl Host {
    /// Registers a prompt, resource or resource template described by `spec` (its MCP JSON: a
    /// `Prompt` with its `name`, a `Resource` with its `uri`, a `ResourceTemplate` with its
    /// `uriTemplate`), answered by `handler`.
    ///
    /// # Errors
    /// The host's refusal (a malformed spec, a key another plugin serves).
    pub fn register_item(
        &self,
        kind: McpItemKind,
        spec: &Value,
        handler: impl ItemHandler,
    ) -> Result<(), HostError> {
        let handler = McpHandler_TO::from_value(ItemGlue(handler), TD_Opaque);
        host_result(self.0.register_item(kind, spec.to_string().into(), handler))
    }

    /// Unregisters one of this plugin's items.
    pub fn unregister_item(&self, kind: McpItemKind, key: &str) {
        self.0.unregister_item(kind, key.into());
    }

    /// Tells every client that the list of `kind` changed.
    pub fn list_changed(&self, kind: McpItemKind) {
        self.0.list_changed(kind);
    }

    /// Tells the clients subscribed to `uri` that it changed.
    pub fn resource_updated(&self, uri: &str) {
        self.0.resource_updated(uri.into());
    }

    /// Logs `data` at `level` (`info`, `warning`, ...) to the client of the tool call this thread
    /// runs, when it asked for such messages.
    pub fn call_log(&self, level: &str, logger: &str, data: &Value) {
        self.0.call_log(
            level.into(),
            logger.into(),
            data.to_string().as_str().into(),
        );
    }

    /// Reports progress of the tool call this thread runs, when its client asked for it.
    pub fn call_progress(&self, progress: f64, total: Option<f64>, message: &str) {
        self.0
            .call_progress(progress, ROption::from(total), message.into());
    }

    /// Asks the client several things at once: `requests` maps a key to each request
    /// (`{"method", "params"}`); the answer maps each key to its result.
    ///
    /// # Errors
    /// As [`Host::call_ask`].
    pub fn call_ask_all(&self, requests: &Value) -> Result<Value, HostError> {
        let answer = self
            .0
            .call_ask_all(requests.to_string().as_str().into())
            .into_result()?;
        serde_json::from_str(answer.as_str()).map_err(|e| {
            HostError::new(
                HostErrorKind::Internal,
                format!("the client's answers: {e}"),
            )
        })
    }

    /// Asks the client of the tool call this thread runs (`sampling/createMessage`,
    /// `elicitation/create`, `roots/list`) and waits for its answer.
    ///
    /// # Errors
    /// No client that can be asked, the client's error, or the call was cancelled.
    pub fn call_ask(&self, method: &str, params: &Value) -> Result<Value, HostError> {
        let answer = self
            .0
            .call_ask(method.into(), params.to_string().as_str().into())
            .into_result()?;
        serde_json::from_str(answer.as_str()).map_err(|e| {
            HostError::new(HostErrorKind::Internal, format!("the client's answer: {e}"))
        })
    }
}
