//! The prompts, resources and resource templates plugins registered (the union of what the active
//! generations registered, as the tools are), and a request of one of them on its generation's
//! threads. Registered during init they are staged and put in force by the swap, replacing the
//! previous generation's in the same step; registered later they are in force at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};
use taskhost_abi::{McpHandlerBox, McpItemKind};

use super::generation::{GenBox, ItemEntry};

impl ItemEntry {
    /// An entry for `spec`, keyed by the field its kind is named by.
    ///
    /// # Errors
    /// A spec that is not a JSON object with that field as a non-empty string.
    pub(crate) fn new(
        kind: McpItemKind,
        spec: &str,
        handler: Arc<GenBox<McpHandlerBox>>,
    ) -> Result<Self, String> {
        let field = match kind {
            McpItemKind::Prompt => "name",
            McpItemKind::Resource => "uri",
            McpItemKind::ResourceTemplate => "uriTemplate",
            McpItemKind::HttpRoute => "prefix",
            McpItemKind::Tool => return Err("tools are registered with register_tool".to_owned()),
        };
        let spec: Value = serde_json::from_str(spec)
            .map_err(|e| format!("a {} spec is not JSON: {e}", kind.as_str()))?;
        let key = spec
            .get(field)
            .and_then(Value::as_str)
            .filter(|k| !k.is_empty())
            .ok_or_else(|| format!("a {} spec needs its \"{field}\"", kind.as_str()))?
            .to_owned();
        if kind == McpItemKind::HttpRoute {
            check_prefix(&key)?;
        }
        Ok(Self {
            kind,
            key,
            spec,
            handler,
        })
    }

    /// The plugin serving it.
    pub fn plugin(&self) -> &str {
        &self.handler.generation().plugin
    }

    /// Answers `method` with `params` on the item's generation's threads: the MCP result, or the
    /// JSON-RPC error object the plugin answered with (a generation going away answers `-32603`).
    pub async fn request(&self, method: &str, params: &Value) -> Result<Value, Value> {
        let handler = self.handler.clone();
        let (method, params) = (method.to_owned(), params.to_string());
        let unavailable = || json!({"code": -32603, "message": format!("{} {} is unavailable (its plugin is being unloaded)", self.kind.as_str(), self.key)});
        let generation = handler.generation().clone();
        let rx = generation
            .executor
            .call_async(move || {
                let answer = handler
                    .get()
                    .handle(method.as_str().into(), params.as_str().into());
                answer
                    .into_result()
                    .map(|r| r.as_str().to_owned())
                    .map_err(|e| e.as_str().to_owned())
            })
            .ok_or_else(unavailable)?;
        let parse = |text: String| serde_json::from_str::<Value>(&text).unwrap_or(json!({}));
        match rx.await {
            Ok(Ok(result)) => Ok(parse(result)),
            Ok(Err(error)) => Err(parse(error)),
            Err(_) => Err(unavailable()),
        }
    }
}

/// The prefixes the host keeps for itself.
const KEPT: [&str; 2] = ["/mcp", "/.well-known"];

/// Checks a route's prefix: it starts with `/` and is none the host keeps.
///
/// # Errors
/// Which rule the prefix breaks.
pub(crate) fn check_prefix(prefix: &str) -> Result<(), String> {
    if !prefix.starts_with('/') {
        return Err(format!(
            "an HTTP route's prefix must start with /: {prefix:?}"
        ));
    }
    if KEPT
        .iter()
        .any(|k| under(prefix, k) || under(k, prefix) && prefix != "/")
    {
        return Err(format!("the host serves {prefix} itself"));
    }
    Ok(())
}

/// True when `path` is `prefix` or below it.
pub fn under(path: &str, prefix: &str) -> bool {
    let base = prefix.trim_end_matches('/');
    path == prefix
        || base.is_empty()
        || path
            .strip_prefix(base)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The items in force, by kind and key.
pub(crate) type Table = BTreeMap<(McpItemKind, String), ItemEntry>;
