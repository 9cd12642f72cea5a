//! What a session serves of the plugins' MCP surface besides tools: their prompts, resources and
//! templates listed and answered (with the host's own `taskhost://plugins` resource), completions,
//! and a tool's result as MCP gets it. The plugins speak MCP JSON; this turns it into rmcp's types
//! (a plugin's answer that is not valid MCP is an internal error naming the plugin), and the
//! requests into the JSON the plugins get, `_meta` included.

use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult, ContentBlock,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, InputRequiredResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, Prompt,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Reference,
    RequestMetaObject, Resource, ResourceContents, ResourceTemplate,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use taskhost_abi::McpItemKind;

use crate::Taskhost;
use crate::plugin::{CallOutput, ItemEntry};

/// `params` as the plugins get it: the request's params with its `_meta`.
pub(super) fn with_meta(params: &impl serde::Serialize, meta: &RequestMetaObject) -> Value {
    let mut value = serde_json::to_value(params).unwrap_or_else(|_| json!({}));
    if let (Value::Object(map), Ok(meta)) = (&mut value, serde_json::to_value(meta)) {
        map.insert("_meta".to_owned(), meta);
    }
    value
}

/// A plugin's JSON as an rmcp type, or an internal error naming the plugin. A complete result
/// without its `resultType` (the 2026-07-28 schema requires it; plugins need not know the eras) is
/// given `"complete"`.
fn parse<T: DeserializeOwned>(plugin: &str, what: &str, mut value: Value) -> Result<T, McpError> {
    if let Value::Object(map) = &mut value {
        map.entry("resultType").or_insert_with(|| json!("complete"));
    }
    serde_json::from_value(value).map_err(|e| {
        McpError::internal_error(
            format!("plugin {plugin} answered {what} with what is not MCP: {e}"),
            None,
        )
    })
}

/// A plugin's JSON-RPC error object as the client gets it.
fn plugin_error(plugin: &str, error: Value) -> McpError {
    serde_json::from_value(error.clone()).unwrap_or_else(|_| {
        McpError::internal_error(format!("plugin {plugin} failed: {error}"), None)
    })
}

/// The specs of every item of `kind`, as rmcp's type (a malformed one is left out, logged).
fn specs<T: DeserializeOwned>(host: &Taskhost, kind: McpItemKind) -> Vec<T> {
    host.plugins()
        .items(kind)
        .into_iter()
        .filter_map(|item| match serde_json::from_value(item.spec.clone()) {
            Ok(spec) => Some(spec),
            Err(e) => {
                tracing::warn!(plugin = item.plugin(), key = %item.key, error = %e, "a {} spec is not MCP; it is not listed", kind.as_str());
                None
            }
        })
        .collect()
}

/// A plugin's answer that may be an `InputRequiredResult` (`"resultType": "input_required"`) or
/// the complete result `C`, as the response type `R` rmcp sends.
fn parse_outcome<C, R>(plugin: &str, what: &str, value: Value) -> Result<R, McpError>
where
    C: DeserializeOwned,
    R: From<C> + From<InputRequiredResult>,
{
    if value.get("resultType").and_then(Value::as_str) == Some("input_required") {
        parse::<InputRequiredResult>(plugin, what, value).map(Into::into)
    } else {
        parse::<C>(plugin, what, value).map(Into::into)
    }
}

/// Asks `item` and returns its raw answer, or the client's error.
async fn ask(
    host: &Taskhost,
    item: &ItemEntry,
    method: &str,
    params: &Value,
) -> Result<Value, McpError> {
    host.plugins()
        .item_request(item, method, params)
        .await
        .map_err(|error| plugin_error(item.plugin(), error))
}

pub(super) fn list_prompts(host: &Taskhost) -> ListPromptsResult {
    ListPromptsResult::with_all_items(specs::<Prompt>(host, McpItemKind::Prompt))
}

pub(super) async fn get_prompt(
    host: &Taskhost,
    request: GetPromptRequestParams,
    meta: &RequestMetaObject,
) -> Result<GetPromptResponse, McpError> {
    let item = host
        .plugins()
        .item(McpItemKind::Prompt, &request.name)
        .ok_or_else(|| {
            McpError::invalid_params(format!("unknown prompt {}", request.name), None)
        })?;
    let answer = ask(host, &item, "prompts/get", &with_meta(&request, meta)).await?;
    parse_outcome::<GetPromptResult, _>(item.plugin(), "prompts/get", answer)
}

pub(super) fn list_resources(host: &Taskhost) -> ListResourcesResult {
    let mut resources =
        vec![Resource::new(PLUGINS_URI, "plugins").with_mime_type("application/json")];
    resources.extend(specs::<Resource>(host, McpItemKind::Resource));
    ListResourcesResult::with_all_items(resources)
}

pub(super) fn list_templates(host: &Taskhost) -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(specs::<ResourceTemplate>(
        host,
        McpItemKind::ResourceTemplate,
    ))
}

/// Reads a resource: the host's own plugin table (with the plugins' paths only for a `local`
/// session: a principal over HTTP is not shown the host's files), or a plugin's.
pub(super) async fn read_resource(
    host: &Taskhost,
    request: ReadResourceRequestParams,
    meta: &RequestMetaObject,
    local: bool,
) -> Result<ReadResourceResponse, McpError> {
    if request.uri == PLUGINS_URI {
        let text = crate::status::plugins_json(host.plugins(), local).to_string();
        let contents = ResourceContents::text(text, PLUGINS_URI).with_mime_type("application/json");
        return Ok(ReadResourceResult::new(vec![contents]).into());
    }
    let Some(item) = host.plugins().item_for_uri(&request.uri) else {
        return Err(McpError::resource_not_found(
            format!("no resource at {}", request.uri),
            Some(json!({"uri": request.uri})),
        ));
    };
    let answer = ask(host, &item, "resources/read", &with_meta(&request, meta)).await?;
    parse_outcome::<ReadResourceResult, _>(item.plugin(), "resources/read", answer)
}

pub(super) async fn complete(
    host: &Taskhost,
    request: CompleteRequestParams,
    meta: &RequestMetaObject,
) -> Result<CompleteResult, McpError> {
    let plugins = host.plugins();
    let item = match &request.r#ref {
        Reference::Prompt(prompt) => plugins.item(McpItemKind::Prompt, &prompt.name),
        Reference::Resource(resource) => plugins
            .item(McpItemKind::ResourceTemplate, &resource.uri)
            .or_else(|| plugins.item(McpItemKind::Resource, &resource.uri)),
        _ => None,
    };
    let Some(item) = item else {
        let none = json!({"completion": {"values": [], "total": 0, "hasMore": false}});
        return parse("taskhost", "completion/complete", none);
    };
    let answer = ask(
        host,
        &item,
        "completion/complete",
        &with_meta(&request, meta),
    )
    .await?;
    parse(item.plugin(), "completion/complete", answer)
}

/// The `_meta` key under which a tool's result names the background task the call started:
/// `{"taskhost/started": {"task": ID}}`, the id as data for clients (the text is the model's).
pub(crate) const STARTED_META: &str = "taskhost/started";

/// A tool's output as MCP gets it, with `notices` (text blocks) added to a plain result, and the
/// task the call started in its `_meta` ([`STARTED_META`]).
pub(super) fn tool_response(
    tool: &str,
    out: CallOutput,
    notices: Vec<ContentBlock>,
) -> Result<CallToolResponse, McpError> {
    let started = out.started.map(|task| json!({"task": task}));
    let Some(mut mcp) = out.mcp else {
        let mut blocks = vec![ContentBlock::text(out.text)];
        blocks.extend(notices);
        let mut result = if out.is_error {
            CallToolResult::error(blocks)
        } else {
            CallToolResult::success(blocks)
        };
        if let Some(started) = started {
            result
                .meta
                .get_or_insert_with(Default::default)
                .insert(STARTED_META.to_owned(), started);
        }
        return Ok(result.into());
    };
    if let Some(error) = mcp.get("error") {
        return Err(plugin_error(tool, error.clone()));
    }
    if let Some(Value::Array(content)) = mcp.get_mut("content") {
        content.extend(notices.iter().filter_map(|n| serde_json::to_value(n).ok()));
    }
    if let (Some(started), Value::Object(result)) = (started, &mut mcp) {
        let meta = result.entry("_meta").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            meta.insert(STARTED_META.to_owned(), started);
        }
    }
    parse_outcome::<CallToolResult, _>(tool, "tools/call", mcp)
}

/// The URI of the plugin table resource.
pub const PLUGINS_URI: &str = "taskhost://plugins";

/// A tool as MCP lists it: its name, description and schema, and the rest of the description the
/// plugin gave (a field that is not MCP is left out, with the others kept).
pub(super) fn mcp_tool(t: crate::plugin::ToolEntry) -> rmcp::model::Tool {
    let schema = match &*t.input_schema {
        Value::Object(m) => m.clone(),
        _ => serde_json::Map::new(),
    };
    let plain = rmcp::model::Tool::new(t.name, t.description, std::sync::Arc::new(schema));
    let fields = match &*t.mcp {
        Value::Object(fields) if !fields.is_empty() => fields,
        _ => return plain,
    };
    let Ok(Value::Object(whole)) = serde_json::to_value(&plain) else {
        return plain;
    };
    let with = |keep: &dyn Fn(&str) -> bool| {
        let mut all = whole.clone();
        all.extend(
            fields
                .iter()
                .filter(|(k, _)| keep(k))
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        serde_json::from_value::<rmcp::model::Tool>(Value::Object(all))
    };
    if let Ok(tool) = with(&|_| true) {
        return tool;
    }
    // A field that is not MCP: keep each of the others.
    let good: Vec<&String> = fields
        .keys()
        .filter(|k| with(&|key| key == k.as_str()).is_ok())
        .collect();
    with(&|key| good.iter().any(|g| g.as_str() == key)).unwrap_or(plain)
}
