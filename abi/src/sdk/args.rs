//! Reading a tool's arguments and a plugin's config: the checks every plugin needs, with the errors
//! the model sees.

use crate::ffi::ToolResult;
use taskhost_common::shown;

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

#[cfg(test)]
mod tests {
    use super::non_empty;

    #[test]
    fn a_blank_text_argument_is_refused_naming_it_and_quoting_at_most_200_characters() {
        assert_eq!(non_empty("prompt", "go".into()), Ok("go".to_owned()));
        assert_eq!(
            non_empty("prompt", "  ".into()).unwrap_err().text.as_str(),
            "Error: invalid prompt: expected a non-empty string, got \"  \""
        );
        let long = non_empty("command", " ".repeat(5000)).unwrap_err();
        assert!(long.text.len() < 300, "{}", long.text);
    }
}
