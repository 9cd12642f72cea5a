//! What a session answers ahead of rmcp: the line guard hands each client message to the session's
//! [`Ahead`] (the MCP layer's in side, `crate::mcp::layer`) before passing it on.

use futures::future::BoxFuture;
use serde_json::Value;

/// The messages a session answers ahead of rmcp.
pub(crate) trait Ahead: Send + Sync + 'static {
    /// The whole JSON-RPC answer to the client's `message` when it is answered here (it is then
    /// not passed to rmcp); `None` to pass it on.
    fn take(&self, message: &Value) -> Option<BoxFuture<'static, Value>>;
}
