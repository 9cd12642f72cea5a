//! Prompts, resources, the resource template, and their completions.

use taskhost_abi::sdk::McpError;
use taskhost_abi::serde_json::{Value, json};
use taskhost_abi::{Host, McpItemKind};

use crate::IMAGE;
use crate::rounds::prompt_with_input;

fn user_text(text: &str) -> Value {
    json!({"role": "user", "content": {"type": "text", "text": text}})
}

fn prompt(name: &str, params: &Value) -> Result<Value, McpError> {
    let arguments = &params["arguments"];
    Ok(match name {
        "test_simple_prompt" => json!({"description": "A simple test prompt",
            "messages": [user_text("This is a simple test prompt.")]}),
        "test_prompt_with_arguments" => {
            json!({"description": "A prompt with arguments", "messages": [user_text(
            &format!("Prompt with arguments: arg1='{}', arg2='{}'",
                arguments["arg1"].as_str().unwrap_or(""), arguments["arg2"].as_str().unwrap_or("")))]})
        }
        "test_prompt_with_embedded_resource" => {
            json!({"description": "A prompt with an embedded resource",
            "messages": [user_text("Here is a resource:"), {"role": "user", "content": {"type": "resource",
                "resource": {"uri": "test://static-text", "mimeType": "text/plain", "text": "Resource content for prompt"}}}]})
        }
        "test_prompt_with_image" => json!({"description": "A prompt with an image",
            "messages": [user_text("Here is an image:"), {"role": "user", "content": {"type": "image", "data": IMAGE, "mimeType": "image/png"}}]}),
        "test_input_required_result_prompt" => prompt_with_input(params),
        other => return Err(McpError::invalid_params(format!("Unknown prompt: {other}"))),
    })
}

fn complete(params: &Value) -> Value {
    let name = params["argument"]["name"].as_str().unwrap_or("");
    let value = params["argument"]["value"].as_str().unwrap_or("");
    let candidates: &[&str] = match name {
        "id" => &["1", "2", "3"],
        "arg1" | "arg2" => &["paris", "park", "party"],
        _ => &[],
    };
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|c| c.starts_with(value))
        .collect();
    json!({"completion": {"values": values, "total": values.len(), "hasMore": false}})
}

fn answer(
    method: &str,
    params: &Value,
    get: impl Fn(&Value) -> Result<Value, McpError>,
) -> Result<Value, McpError> {
    match method {
        "completion/complete" => Ok(complete(params)),
        _ => get(params),
    }
}

pub(crate) fn register(host: &Host) -> Result<(), String> {
    let prompts = [
        json!({"name": "test_simple_prompt", "description": "A simple test prompt with no arguments"}),
        json!({"name": "test_prompt_with_arguments", "description": "A test prompt that accepts arguments",
            "arguments": [{"name": "arg1", "description": "First test argument", "required": true},
                          {"name": "arg2", "description": "Second test argument", "required": false}]}),
        json!({"name": "test_prompt_with_embedded_resource", "description": "A test prompt that includes an embedded resource"}),
        json!({"name": "test_prompt_with_image", "description": "A test prompt that includes an image"}),
        json!({"name": "test_input_required_result_prompt", "description": "A prompt that requires elicitation input via InputRequiredResult (SEP-2322)"}),
    ];
    for spec in prompts {
        let name = spec["name"].as_str().unwrap_or_default().to_owned();
        host.register_item(
            McpItemKind::Prompt,
            &spec,
            move |method: &str, params: Value| answer(method, &params, |p| prompt(&name, p)),
        )?;
    }
    host.register_item(
        McpItemKind::Resource,
        &json!({"uri": "test://static-text", "name": "Static Text Resource",
        "description": "A static text resource for testing", "mimeType": "text/plain"}),
        |method: &str, params: Value| {
            answer(method, &params, |_| {
                Ok(
                    json!({"contents": [{"uri": "test://static-text", "mimeType": "text/plain",
            "text": "This is the content of the static text resource."}]}),
                )
            })
        },
    )?;
    host.register_item(McpItemKind::Resource, &json!({"uri": "test://static-binary", "name": "Static Binary Resource",
        "description": "A static binary/blob resource for testing", "mimeType": "image/png"}), |method: &str, params: Value| {
        answer(method, &params, |_| Ok(json!({"contents": [{"uri": "test://static-binary", "mimeType": "image/png", "blob": IMAGE}]})))
    })?;
    host.register_item(
        McpItemKind::Resource,
        &json!({"uri": "test://watched-resource", "name": "Watched Resource",
        "description": "A resource clients may subscribe to", "mimeType": "text/plain"}),
        |method: &str, params: Value| {
            answer(method, &params, |_| {
                Ok(
                    json!({"contents": [{"uri": "test://watched-resource", "mimeType": "text/plain",
            "text": "Watched resource content"}]}),
                )
            })
        },
    )?;
    host.register_item(McpItemKind::ResourceTemplate, &json!({"uriTemplate": "test://template/{id}/data",
        "name": "Dynamic Resource", "description": "A dynamic resource with parameter substitution",
        "mimeType": "application/json"}), |method: &str, params: Value| {
        answer(method, &params, |p| {
            let uri = p["uri"].as_str().unwrap_or_default();
            let id = uri.strip_prefix("test://template/").and_then(|s| s.strip_suffix("/data")).unwrap_or("unknown");
            Ok(json!({"contents": [{"uri": uri, "mimeType": "application/json",
                "text": format!("{{\"id\":\"{id}\",\"templateTest\":true,\"data\":\"Data for ID: {id}\"}}")}]}))
        })
    })?;
    Ok(())
}
