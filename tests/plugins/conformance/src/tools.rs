//! The tools: content of every kind, logging, progress, errors, sampling and elicitation through
//! the client, list changes, a capability check, and the schema and header fixtures.

use taskhost_abi::sdk::McpError;
use taskhost_abi::serde_json::{Value, json};
use taskhost_abi::{Host, McpItemKind, ToolCall, ToolResult};

use crate::{AUDIO, IMAGE};

/// A successful result with these content blocks.
pub(crate) fn content(blocks: Value) -> ToolResult {
    let text = blocks
        .as_array()
        .and_then(|b| b.first())
        .and_then(|b| b["text"].as_str())
        .unwrap_or("")
        .to_owned();
    ToolResult::mcp(text, false, &json!({"content": blocks}))
}

/// A successful result with one text block.
pub(crate) fn text(text: &str) -> ToolResult {
    content(json!([{"type": "text", "text": text}]))
}

fn arguments(call: &ToolCall) -> Value {
    taskhost_abi::serde_json::from_str(call.arguments()).unwrap_or_else(|_| json!({}))
}

/// The client's capabilities, as the host put them in the request's `_meta`.
pub(crate) fn client_capabilities(call: &ToolCall) -> Value {
    let request: Value =
        taskhost_abi::serde_json::from_str(call.request()).unwrap_or_else(|_| json!({}));
    request["_meta"]["io.modelcontextprotocol/clientCapabilities"].clone()
}

fn empty() -> Value {
    json!({"type": "object", "properties": {}})
}

fn elicitation_answer(answer: Result<Value, String>, prefix: &str) -> ToolResult {
    match answer {
        Ok(result) => text(&format!(
            "{prefix}: action={}, content={}",
            result["action"].as_str().unwrap_or("unknown"),
            result["content"]
        )),
        Err(e) => ToolResult::mcp(
            format!("Elicitation error: {e}"),
            true,
            &json!({"content": [{"type": "text", "text": format!("Elicitation error: {e}")}], "isError": true}),
        ),
    }
}

fn elicit(host: &Host, message: &str, schema: Value) -> Result<Value, String> {
    host.call_ask(
        "elicitation/create",
        &json!({"mode": "form", "message": message, "requestedSchema": schema}),
    )
    .map_err(String::from)
}

pub(crate) fn register(host: &Host) -> Result<(), String> {
    let add = |name: &str,
               description: &str,
               schema: Value,
               run: Box<dyn Fn(&ToolCall) -> ToolResult + Send + Sync>| {
        host.register_tool(name, description, schema, move |call: &ToolCall| run(call))
    };
    add(
        "test_simple_text",
        "Returns simple text content",
        empty(),
        Box::new(|_| text("This is a simple text response for testing.")),
    )?;
    add(
        "test_image_content",
        "Returns image content",
        empty(),
        Box::new(|_| content(json!([{"type": "image", "data": IMAGE, "mimeType": "image/png"}]))),
    )?;
    add(
        "test_audio_content",
        "Returns audio content",
        empty(),
        Box::new(|_| content(json!([{"type": "audio", "data": AUDIO, "mimeType": "audio/wav"}]))),
    )?;
    add(
        "test_embedded_resource",
        "Returns an embedded resource",
        empty(),
        Box::new(|_| {
            content(
                json!([{"type": "resource", "resource": {"uri": "test://embedded-resource",
            "mimeType": "text/plain", "text": "This is an embedded resource content."}}]),
            )
        }),
    )?;
    add(
        "test_multiple_content_types",
        "Returns text, image and a resource",
        empty(),
        Box::new(|_| {
            content(json!([
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": IMAGE, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "test://mixed-content-resource",
                    "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}
            ]))
        }),
    )?;
    let h = host.clone();
    add(
        "test_tool_with_logging",
        "Sends log messages while it runs",
        empty(),
        Box::new(move |_| {
            for message in [
                "Tool execution started",
                "Tool processing data",
                "Tool execution completed",
            ] {
                h.call_log("info", "conformance", &json!(message));
            }
            text("Logging test completed")
        }),
    )?;
    let h = host.clone();
    add(
        "test_logging_tool",
        "Logs at the level the request asked for",
        empty(),
        Box::new(move |_| {
            h.call_log("info", "conformance", &json!("logLevel was requested"));
            text("Logging tool completed")
        }),
    )?;
    add(
        "test_error_handling",
        "Returns an error result",
        empty(),
        Box::new(|_| {
            let message = "This tool intentionally returns an error for testing";
            ToolResult::mcp(
                message,
                true,
                &json!({"content": [{"type": "text", "text": message}], "isError": true}),
            )
        }),
    )?;
    let h = host.clone();
    add(
        "test_tool_with_progress",
        "Reports progress while it runs",
        empty(),
        Box::new(move |_| {
            for (progress, message) in [(0.0, "Starting"), (50.0, "Halfway"), (100.0, "Complete")] {
                h.call_progress(progress, Some(100.0), message);
            }
            text("Progress test completed")
        }),
    )?;
    let h = host.clone();
    add(
        "test_sampling",
        "Asks the client's model",
        json!({"type": "object",
        "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}),
        Box::new(move |call| {
            let prompt = arguments(call)["prompt"]
                .as_str()
                .unwrap_or("Hello")
                .to_owned();
            let asked = h.call_ask(
                "sampling/createMessage",
                &json!({"messages": [{"role": "user",
            "content": {"type": "text", "text": prompt}}], "maxTokens": 100}),
            );
            match asked {
                Ok(result) => text(&format!(
                    "LLM response: {}",
                    result["content"]["text"]
                        .as_str()
                        .unwrap_or("No text response")
                )),
                Err(e) => ToolResult::error(format!("Sampling error: {e}")),
            }
        }),
    )?;
    let h = host.clone();
    add(
        "test_elicitation",
        "Asks the user",
        json!({"type": "object",
        "properties": {"message": {"type": "string"}}, "required": ["message"]}),
        Box::new(move |call| {
            let message = arguments(call)["message"]
                .as_str()
                .unwrap_or("Please provide your information")
                .to_owned();
            elicitation_answer(
                elicit(
                    &h,
                    &message,
                    json!({"type": "object", "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}},
            "required": ["username", "email"]}),
                ),
                "User response",
            )
        }),
    )?;
    let h = host.clone();
    add(
        "test_elicitation_sep1034_defaults",
        "Asks the user, every field with a default",
        empty(),
        Box::new(move |_| {
            elicitation_answer(
                elicit(
                    &h,
                    "Please provide values (all have defaults)",
                    json!({"type": "object", "properties": {
            "name": {"type": "string", "description": "User's name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User's age", "default": 30},
            "score": {"type": "number", "description": "User's score", "default": 95.5},
            "status": {"type": "string", "description": "User's status", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "description": "Whether user is verified", "default": true}}}),
                ),
                "Elicitation completed",
            )
        }),
    )?;
    let h = host.clone();
    add(
        "test_elicitation_sep1330_enums",
        "Asks the user to pick from enums",
        empty(),
        Box::new(move |_| {
            elicitation_answer(
                elicit(
                    &h,
                    "Test enum schema improvements",
                    json!({"type": "object", "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}]}}}}),
                ),
                "Enum elicitation completed",
            )
        }),
    )?;
    add(
        "json_schema_2020_12_tool",
        "A tool whose schema uses JSON Schema 2020-12",
        json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"}, "email": {"type": "string"}},
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false}),
        Box::new(|call| {
            text(&format!(
                "Hello, {}!",
                arguments(call)["name"].as_str().unwrap_or("world")
            ))
        }),
    )?;
    add(
        "test_reconnection",
        "Answers after a moment",
        empty(),
        Box::new(|_| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            text("Reconnection test completed")
        }),
    )?;
    let h = host.clone();
    add(
        "test_trigger_tool_change",
        "Tells clients the tool list changed",
        empty(),
        Box::new(move |_| {
            h.list_changed(McpItemKind::Tool);
            text("Tool list change triggered")
        }),
    )?;
    let h = host.clone();
    add(
        "test_trigger_prompt_change",
        "Tells clients the prompt list changed",
        empty(),
        Box::new(move |_| {
            h.list_changed(McpItemKind::Prompt);
            text("Prompt list change triggered")
        }),
    )?;
    add(
        "test_missing_capability",
        "Needs the client's sampling capability",
        empty(),
        Box::new(|call| {
            if client_capabilities(call).get("sampling").is_none() {
                return McpError {
                    code: -32021,
                    message: "Missing required client capability: sampling".to_owned(),
                    data: Some(json!({"requiredCapabilities": {"sampling": {}}})),
                }
                .tool_result();
            }
            text("Required capability declared")
        }),
    )?;
    add(
        "test_custom_header",
        "Echoes a value also sent as a header",
        json!({"type": "object",
        "properties": {"value": {"type": "string", "x-mcp-header": "Value"}}, "required": ["value"]}),
        Box::new(|call| match arguments(call)["value"].as_str() {
            Some(value) => text(value),
            None => McpError::invalid_params("value must be a string").tool_result(),
        }),
    )?;
    Ok(())
}
