//! `taskhost run` and `taskhost kill`: one tool call each, as the person.

use std::process::ExitCode;

use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{Value, json};

use super::address::Address;
use super::link::{self, Client, Target};
use crate::client_cli::Outcome;

/// Calls `tool` with `arguments` (a JSON object).
///
/// # Errors
/// `(1, why)` when the call did not reach the tool (the host is gone, the tool unknown).
pub(super) async fn call_tool(
    client: &Client,
    tool: &str,
    arguments: Value,
) -> Result<CallToolResult, (u8, String)> {
    let Value::Object(arguments) = arguments else {
        return Err((2, "arguments must be a JSON object".to_owned()));
    };
    client
        .peer()
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments))
        .await
        .map_err(|e| (1, format!("calling {tool}: {e}")))
}

/// A result's first text block: the tool's answer (the blocks after it are notices for a model).
pub(super) fn text_of(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .find_map(|block| block.as_text().map(|t| t.text.clone()))
        .unwrap_or_default()
}

/// `taskhost run`: starts `command` as a background task of the person's; the tool's answer goes
/// to stderr, the task's id to stdout.
///
/// # Errors
/// `(1, why)` when the host cannot be reached or refused the start.
pub(super) async fn start(target: &Target, command: &[String]) -> Outcome {
    let mut arguments = json!({"command": shell_line(command), "run_in_background": true});
    if let (Address::Unix(_), Ok(dir)) = (&target.address, std::env::current_dir()) {
        arguments["workdir"] = json!(dir.display().to_string());
    }
    let client = link::open(target).await.map_err(|e| (1, e))?;
    let result = call_tool(&client, "bash", arguments).await?;
    let _ = client.cancel().await;
    let text = text_of(&result);
    if result.is_error == Some(true) {
        return Err((1, text));
    }
    let started = serde_json::to_value(&result).unwrap_or_default();
    let Some(id) = started["_meta"]["taskhost/started"]["task"].as_str() else {
        return Err((1, format!("the host started no task: {text}")));
    };
    eprintln!("{text}");
    crate::outln!("{id}");
    Ok(ExitCode::SUCCESS)
}

/// `taskhost kill`: asks the host to stop task `id`, and prints its answer.
///
/// # Errors
/// `(1, why)` when the host cannot be reached; `(2, why)` when it refused (an unknown task).
pub(super) async fn kill(target: &Target, id: &str) -> Outcome {
    let client = link::open(target).await.map_err(|e| (1, e))?;
    let result = call_tool(&client, "task_kill", json!({"task_id": id})).await?;
    let _ = client.cancel().await;
    let text = text_of(&result);
    if result.is_error == Some(true) {
        return Err((2, text));
    }
    crate::outln!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// The shell line for `command`: one argument as it is (`taskhost run -- 'make && make test'`),
/// several quoted each where the shell would read them otherwise.
fn shell_line(command: &[String]) -> String {
    if let [line] = command {
        return line.clone();
    }
    command
        .iter()
        .map(|word| quoted(word))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `word` as the shell reads it back: as it is when it holds only safe characters, else in single
/// quotes.
fn quoted(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_./:=@%+,-".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        return word.to_owned();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_words_are_quoted_where_the_shell_would_split_or_expand_them() {
        let words = |w: &[&str]| w.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            shell_line(&words(&["make -j4 && make test"])),
            "make -j4 && make test"
        );
        assert_eq!(
            shell_line(&words(&["echo", "a b", "it's", "$HOME", "x=1"])),
            r"echo 'a b' 'it'\''s' '$HOME' x=1"
        );
        assert_eq!(shell_line(&words(&["printf", ""])), "printf ''");
    }
}
