//! The multi-round tools (SEP-2322): each answers `input_required` with the requests the client
//! must fulfil, until the client retries with their responses (and the state it was given back,
//! checked: a state the client changed is refused).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::OnceLock;

use taskhost_abi::sdk::McpError;
use taskhost_abi::serde_json::{Map, Value, json};
use taskhost_abi::{Host, ToolCall, ToolResult};

use crate::tools::{client_capabilities, text};

fn elicitation(message: &str, properties: Value, required: Value) -> Value {
    json!({"method": "elicitation/create", "params": {"mode": "form", "message": message,
        "requestedSchema": {"type": "object", "properties": properties, "required": required}}})
}

fn sampling(prompt: &str) -> Value {
    json!({"method": "sampling/createMessage", "params": {"messages": [{"role": "user",
        "content": {"type": "text", "text": prompt}}], "maxTokens": 100}})
}

fn roots() -> Value {
    json!({"method": "roots/list"})
}

/// `input_required` with `requests` (and `state`, sealed, when given).
fn required(requests: Value, state: Option<&Value>) -> ToolResult {
    let mut result = json!({"resultType": "input_required", "inputRequests": requests});
    if let Some(state) = state {
        result["requestState"] = json!(seal(state));
    }
    ToolResult::mcp("input required", false, &result)
}

/// The keyed tag of `payload` (a key drawn at random once per process).
fn tag(payload: &str) -> u64 {
    static KEY: OnceLock<RandomState> = OnceLock::new();
    KEY.get_or_init(RandomState::new).hash_one(payload)
}

fn seal(state: &Value) -> String {
    let payload = state.to_string();
    let hex: String = payload.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{hex}.{:016x}", tag(&payload))
}

/// The state the client echoed, if it is one this plugin sealed and nobody changed.
fn open(sealed: &str) -> Result<Value, McpError> {
    let tampered = || McpError::invalid_params("requestState failed integrity verification");
    let (hex, mac) = sealed.split_once('.').ok_or_else(tampered)?;
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
        })
        .collect();
    let payload = bytes
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(tampered)?;
    if format!("{:016x}", tag(&payload)) != mac {
        return Err(tampered());
    }
    taskhost_abi::serde_json::from_str(&payload).map_err(|_| tampered())
}

/// The retried call's `inputResponses` and `requestState`.
fn retry(call: &ToolCall) -> (Map<String, Value>, Option<String>) {
    let request: Value =
        taskhost_abi::serde_json::from_str(call.request()).unwrap_or_else(|_| json!({}));
    let responses = request["inputResponses"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let state = request["requestState"].as_str().map(str::to_owned);
    (responses, state)
}

/// A usable response: an object (anything else is asked for again).
fn response<'a>(responses: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    responses.get(key).filter(|r| r.is_object())
}

fn name_request() -> Value {
    elicitation(
        "What is your name?",
        json!({"name": {"type": "string"}}),
        json!(["name"]),
    )
}

fn run(name: &str, call: &ToolCall) -> Result<ToolResult, McpError> {
    let (responses, state) = retry(call);
    let opened = state.as_deref().map(open).transpose()?;
    Ok(match name {
        "test_input_required_result_elicitation" => match response(&responses, "user_name") {
            Some(r) => text(&format!(
                "Hello, {}!",
                r["content"]["name"].as_str().unwrap_or("friend")
            )),
            None => required(json!({"user_name": name_request()}), None),
        },
        "test_input_required_result_sampling" => match response(&responses, "capital_question") {
            Some(r) => text(&format!(
                "Sampling response: {}",
                r["content"]["text"]
                    .as_str()
                    .unwrap_or("(no sampling text)")
            )),
            None => required(
                json!({"capital_question": sampling("What is the capital of France?")}),
                None,
            ),
        },
        "test_input_required_result_list_roots" => match response(&responses, "client_roots") {
            Some(r) => {
                let uris: Vec<&str> = r["roots"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|root| root["uri"].as_str())
                    .collect();
                text(&format!("Client roots: [{}]", uris.join(", ")))
            }
            None => required(json!({"client_roots": roots()}), None),
        },
        "test_input_required_result_request_state"
        | "test_input_required_result_tampered_state" => match opened {
            Some(_) => text("Confirmed: state-ok"),
            None => required(
                json!({"confirm": elicitation("Please confirm", json!({"ok": {"type": "boolean"}}), json!(["ok"]))}),
                Some(&json!({"stage": "confirm"})),
            ),
        },
        "test_input_required_result_multiple_inputs" => {
            let all = ["user_name", "greeting", "client_roots"]
                .iter()
                .all(|k| response(&responses, k).is_some());
            if all && opened.is_some() {
                text("All inputs received")
            } else {
                required(
                    json!({"user_name": name_request(), "greeting": sampling("Generate a greeting"), "client_roots": roots()}),
                    Some(&json!({"stage": "gather"})),
                )
            }
        }
        "test_input_required_result_multi_round" => {
            match opened.and_then(|s| s["round"].as_i64()).unwrap_or(0) {
                0 => required(
                    json!({"step1": elicitation("Step 1: What is your name?", json!({"name": {"type": "string"}}), json!(["name"]))}),
                    Some(&json!({"round": 1})),
                ),
                1 => required(
                    json!({"step2": elicitation("Step 2: What is your favorite color?", json!({"color": {"type": "string"}}), json!(["color"]))}),
                    Some(&json!({"round": 2})),
                ),
                _ => text("Multi-round flow complete"),
            }
        }
        "test_input_required_result_capabilities" => {
            if !responses.is_empty() {
                return Ok(text("Capability-aware flow complete"));
            }
            let declared = client_capabilities(call);
            let mut requests = Map::new();
            if declared.get("elicitation").is_some() {
                requests.insert("user_name".to_owned(), name_request());
            }
            if declared.get("sampling").is_some() {
                requests.insert("greeting".to_owned(), sampling("Generate a greeting"));
            }
            if declared.get("roots").is_some() {
                requests.insert("client_roots".to_owned(), roots());
            }
            if requests.is_empty() {
                text("Client declared no MRTR-capable capabilities")
            } else {
                required(Value::Object(requests), None)
            }
        }
        "test_streaming_elicitation" => required(
            json!({"streaming_elicitation": elicitation("Provide a value", json!({"value": {"type": "string"}}), json!(["value"]))}),
            None,
        ),
        other => return Err(McpError::invalid_params(format!("Unknown tool: {other}"))),
    })
}

/// The answer to a prompt that needs the user's context first.
pub(crate) fn prompt_with_input(params: &Value) -> Value {
    match params["inputResponses"]["user_context"].as_object() {
        Some(r) => {
            json!({"description": "A prompt built from elicited context", "messages": [{"role": "user",
            "content": {"type": "text", "text": format!("Prompt with elicited context: {}",
                r.get("content").and_then(|c| c["context"].as_str()).unwrap_or("(no context)"))}}]})
        }
        None => {
            json!({"resultType": "input_required", "inputRequests": {"user_context": elicitation(
            "What context should the prompt use?", json!({"context": {"type": "string"}}), json!(["context"]))}})
        }
    }
}

pub(crate) fn register(host: &Host) -> Result<(), String> {
    for (name, description) in [
        (
            "test_input_required_result_elicitation",
            "Requires an elicitation input via InputRequiredResult (SEP-2322)",
        ),
        (
            "test_input_required_result_sampling",
            "Requires a sampling input via InputRequiredResult (SEP-2322)",
        ),
        (
            "test_input_required_result_list_roots",
            "Requires a roots/list input via InputRequiredResult (SEP-2322)",
        ),
        (
            "test_input_required_result_request_state",
            "Round-trips an integrity-protected requestState (SEP-2322)",
        ),
        (
            "test_input_required_result_multiple_inputs",
            "Requires several inputs at once (SEP-2322)",
        ),
        (
            "test_input_required_result_multi_round",
            "Drives multiple input_required rounds with evolving requestState (SEP-2322)",
        ),
        (
            "test_input_required_result_tampered_state",
            "Rejects a tampered requestState (SEP-2322)",
        ),
        (
            "test_input_required_result_capabilities",
            "Requests only inputs the client declared (SEP-2322)",
        ),
        (
            "test_streaming_elicitation",
            "Returns an input_required result containing an elicitation request",
        ),
    ] {
        let tool = name.to_owned();
        host.register_tool(
            name,
            description,
            json!({"type": "object", "properties": {}}),
            move |call: &ToolCall| run(&tool, call).unwrap_or_else(|e| e.tool_result()),
        )?;
    }
    Ok(())
}
