//! The live tool table (the union of what the active generations registered) and a call of one of
//! its tools on its generation's threads.

use std::collections::BTreeMap;

use taskhost_abi::ToolCall;

use super::call_scope::CallScope;
use super::generation::ToolEntry;
use crate::services::CallContext;

impl ToolEntry {
    /// The plugin serving the tool.
    pub fn plugin(&self) -> &str {
        &self.handler.generation().plugin
    }

    /// The generation serving the tool.
    pub fn generation(&self) -> u64 {
        self.handler.generation().number
    }
}

/// The result of one tool call, copied out of plugin memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallOutput {
    /// The text.
    pub text: String,
    /// True for an error result.
    pub is_error: bool,
    /// The whole MCP result, when the tool gave one (see [`taskhost_abi::ToolResult::mcp_json`]).
    pub mcp: Option<serde_json::Value>,
    /// The background task the call started, if any (see
    /// [`taskhost_abi::ToolResult::started_task`]).
    pub started: Option<String>,
}

/// Why a tool call did not reach a plugin.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CallError {
    /// No loaded plugin serves this tool.
    #[error("unknown tool {0}")]
    UnknownTool(String),
    /// The arguments were not a JSON object.
    #[error("invalid arguments for {tool}: expected a JSON object")]
    BadArguments {
        /// The tool.
        tool: String,
    },
    /// The serving generation went away mid-call.
    #[error("tool {0} is temporarily unavailable (its plugin is being unloaded)")]
    Unavailable(String),
}

pub(crate) type Table = BTreeMap<String, ToolEntry>;

impl ToolEntry {
    /// Calls the tool on its generation's threads; in-flight calls keep their generation alive.
    /// Host work the call starts (a foreground command) ends when the context's token is cancelled
    /// and reports its progress there.
    pub(crate) async fn call(
        &self,
        session: &str,
        arguments: &serde_json::Value,
        request: &serde_json::Value,
        context: CallContext,
    ) -> Result<CallOutput, CallError> {
        if !arguments.is_object() {
            return Err(CallError::BadArguments {
                tool: self.name.clone(),
            });
        }
        let handler = self.handler.clone();
        let call = ToolCall {
            session: session.into(),
            arguments_json: arguments.to_string().into(),
            request_json: request.to_string().into(),
        };
        let generation = handler.generation().clone();
        let rx = generation
            .executor
            .call_async(move || {
                let _scope = CallScope::enter(context);
                let result = handler.get().call(call);
                CallOutput {
                    text: result.text.as_str().to_owned(),
                    is_error: result.is_error,
                    mcp: result.mcp_json().and_then(|j| serde_json::from_str(j).ok()),
                    started: result.started_task().map(str::to_owned),
                }
            })
            .ok_or_else(|| CallError::Unavailable(self.name.clone()))?;
        rx.await
            .map_err(|_| CallError::Unavailable(self.name.clone()))
    }
}
