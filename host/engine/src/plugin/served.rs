//! What the loaded plugins serve MCP clients: their tools and a call of one, and the prompts,
//! resources and resource templates they registered and a request of one.

use std::sync::Arc;

use serde_json::{Value, json};
use taskhost_abi::McpItemKind;

use super::generation::ItemEntry;
use super::generation::ToolEntry;
use super::plugins::Plugins;
use super::tools::{CallError, CallOutput};
use crate::services::{CallContext, ClientLink, Progress};

/// What a tool call carries besides its name, session and arguments.
#[derive(Clone, Default)]
pub struct CallExtras {
    /// Where a foreground command's progress goes, if the caller asked for it.
    pub progress: Option<Progress>,
    /// The rest of the MCP request (see [`taskhost_abi::ToolCall::request_json`]); `{}` for none.
    pub request: Option<Value>,
    /// The MCP client, for plugin code that logs to it, reports progress or asks it.
    pub client: Option<Arc<dyn ClientLink>>,
    /// The request's JSON-RPC id, when its client waits on the answer.
    pub request_id: Option<Value>,
}

impl Plugins {
    /// Calls `f` after every change of the tool set.
    pub fn on_tools_changed(&self, f: impl Fn() + Send + Sync + 'static) {
        self.shared.tools_changed.lock().push(Arc::new(f));
    }

    /// Calls `f` after every change of the prompts, resources or templates, with the kind.
    pub fn on_list_changed(&self, f: impl Fn(McpItemKind) + Send + Sync + 'static) {
        self.shared.list_changed.lock().push(Arc::new(f));
    }

    /// Calls `f` with the URI of every resource a plugin says changed.
    pub fn on_resource_updated(&self, f: impl Fn(&str) + Send + Sync + 'static) {
        self.shared.resource_updated.lock().push(Arc::new(f));
    }

    /// The tools served now, by name.
    pub fn tools(&self) -> Vec<ToolEntry> {
        self.shared.tools_read().values().cloned().collect()
    }

    /// The tool served as `name`, if any.
    pub fn tool(&self, name: &str) -> Option<ToolEntry> {
        self.shared.tools_read().get(name).cloned()
    }

    /// Calls a tool for `session` (empty for none).
    ///
    /// # Errors
    /// [`CallError`] when no plugin serves the tool, the arguments are not an object, or the serving
    /// generation went away.
    ///
    /// # Cancel safety
    /// Dropping the future cancels the call: a foreground command it started is ended as a kill ends
    /// it (SIGTERM, the grace, SIGKILL), and the plugin's answer is dropped. The session's end does
    /// the same to every call of the session.
    pub async fn call_tool(
        &self,
        name: &str,
        session: &str,
        arguments: &Value,
    ) -> Result<CallOutput, CallError> {
        self.call_tool_with(name, session, arguments, CallExtras::default())
            .await
    }

    /// [`Plugins::call_tool`] with what an MCP request carries: `progress` told how a foreground
    /// command the call runs is doing (at most ten times a second, only when its output grew), the
    /// rest of the request handed to the plugin, and the client it may log to, report progress to,
    /// or ask.
    ///
    /// # Errors
    /// As [`Plugins::call_tool`].
    ///
    /// # Cancel safety
    /// As [`Plugins::call_tool`].
    pub async fn call_tool_with(
        &self,
        name: &str,
        session: &str,
        arguments: &Value,
        extras: CallExtras,
    ) -> Result<CallOutput, CallError> {
        let entry = self.tool(name);
        let entry = entry.ok_or_else(|| CallError::UnknownTool(name.to_owned()))?;
        let cancel = self.shared.services.sessions.call_token(session);
        let _cancel_on_drop = cancel.clone().drop_guard();
        let context = CallContext {
            cancel,
            progress: extras.progress,
            client: extras.client,
            request_id: extras.request_id,
        };
        let request = extras.request.unwrap_or_else(|| json!({}));
        entry.call(session, arguments, &request, context).await
    }

    /// The items of `kind` served now, by key.
    pub fn items(&self, kind: McpItemKind) -> Vec<ItemEntry> {
        self.shared
            .items
            .read()
            .values()
            .filter(|e| e.kind == kind)
            .cloned()
            .collect()
    }

    /// The item of `kind` keyed `key`, if one is served.
    pub fn item(&self, kind: McpItemKind, key: &str) -> Option<ItemEntry> {
        self.shared
            .items
            .read()
            .get(&(kind, key.to_owned()))
            .cloned()
    }

    /// The item that serves reads of `uri`: the resource with that URI, else the first template
    /// (in key order) that matches it.
    pub fn item_for_uri(&self, uri: &str) -> Option<ItemEntry> {
        if let Some(resource) = self.item(McpItemKind::Resource, uri) {
            return Some(resource);
        }
        self.items(McpItemKind::ResourceTemplate)
            .into_iter()
            .find(|t| uri_template_matches(&t.key, uri))
    }

    /// Answers `method` with `params` by `item`: the MCP result, or the JSON-RPC error object.
    ///
    /// # Errors
    /// The plugin's error object, or `-32603` when its generation went away.
    pub async fn item_request(
        &self,
        item: &ItemEntry,
        method: &str,
        params: &Value,
    ) -> Result<Value, Value> {
        item.request(method, params).await
    }
}

/// True when `uri` is an expansion of `template` (RFC 6570 simple `{name}` expressions, each
/// matching one or more characters other than `/`).
pub fn uri_template_matches(template: &str, uri: &str) -> bool {
    let mut rest = uri;
    let mut parts = template.split('{');
    let Some(head) = parts.next() else {
        return false;
    };
    let Some(after) = rest.strip_prefix(head) else {
        return false;
    };
    rest = after;
    for part in parts {
        let Some((_, literal)) = part.split_once('}') else {
            return false;
        };
        let value_end = if literal.is_empty() {
            rest.find('/').unwrap_or(rest.len())
        } else {
            match rest.find(literal) {
                Some(at) => at,
                None => return false,
            }
        };
        let value = &rest[..value_end];
        if value.is_empty() || value.contains('/') {
            return false;
        }
        rest = &rest[value_end + literal.len()..];
    }
    rest.is_empty()
}

#[cfg(test)]
mod tests {
    use super::uri_template_matches;

    #[test]
    fn a_uri_matches_the_templates_it_expands() {
        let t = "test://template/{id}/data";
        assert!(uri_template_matches(t, "test://template/42/data"));
        assert!(!uri_template_matches(t, "test://template//data"));
        assert!(!uri_template_matches(t, "test://template/4/2/data"));
        assert!(!uri_template_matches(t, "test://template/42/datum"));
        assert!(uri_template_matches("file:///{name}", "file:///a.txt"));
        assert!(!uri_template_matches("file:///{name}", "file:///a/b"));
        assert!(uri_template_matches("x://{a}-{b}", "x://1-2"));
    }
}
