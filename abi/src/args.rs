//! Reading a tool's arguments and a plugin's config: the checks every plugin needs, with the errors
//! the model sees.

use crate::types::ToolResult;

/// A bad argument value as an error quotes it: its JSON text, at most 200 characters of it.
pub fn shown(value: &serde_json::Value) -> String {
    const MAX: usize = 200;
    let text = value.to_string();
    match text.char_indices().nth(MAX) {
        None => text,
        Some((at, _)) => format!(
            "{}... ({} more characters)",
            &text[..at],
            text[at..].chars().count()
        ),
    }
}

/// An optional boolean tool argument: absent or `null` is `false`; anything but a boolean is the
/// error result `invalid <key>: expected a boolean, got <json>`.
///
/// # Errors
/// That error result, ready to return from the tool.
pub fn bool_arg(args: &serde_json::Value, key: &str) -> Result<bool, ToolResult> {
    match &args[key] {
        serde_json::Value::Null => Ok(false),
        serde_json::Value::Bool(b) => Ok(*b),
        other => Err(ToolResult::error(format!(
            "invalid {key}: expected a boolean, got {}",
            shown(other)
        ))),
    }
}

/// A text argument that must not be blank: the error result is `invalid <key>: expected a non-empty
/// string, got <json>` (at most 200 characters of it).
///
/// # Errors
/// That error result, ready to return from the tool.
pub fn non_empty(key: &str, value: String) -> Result<String, ToolResult> {
    if value.trim().is_empty() {
        Err(ToolResult::error(format!(
            "invalid {key}: expected a non-empty string, got {}",
            shown(&serde_json::Value::String(value))
        )))
    } else {
        Ok(value)
    }
}

/// A positive integer key of a plugin's config table: absent or `null` is `default`; anything but an
/// integer above zero is the error `<plugin>: <key> must be a positive integer, got <json>`.
///
/// # Errors
/// That error, ready to return from init.
pub fn positive_config(
    config: &serde_json::Value,
    plugin: &str,
    key: &str,
    default: u64,
) -> Result<u64, String> {
    match &config[key] {
        serde_json::Value::Null => Ok(default),
        x => x.as_u64().filter(|n| *n > 0).ok_or_else(|| {
            format!(
                "{plugin}: {key} must be a positive integer, got {}",
                shown(x)
            )
        }),
    }
}
