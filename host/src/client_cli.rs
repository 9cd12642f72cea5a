//! The one-shot client commands `taskhost plugins` and `taskhost call`: each joins its host as the
//! person at the terminal ([`crate::terminal::link`]), speaks MCP once, prints what it got and
//! leaves. A task `call` starts in the background is the person's, there for `taskhost follow`.

use std::process::ExitCode;

use rmcp::model::{CallToolRequestParams, ReadResourceRequestParams, ResourceContents};

use crate::mcp::PLUGINS_URI;
use crate::terminal::{Target, link};

/// A command's exit code, or its code and one message.
pub type Outcome = Result<ExitCode, (u8, String)>;

/// `taskhost plugins`: prints the plugin table of the host at `target`.
///
/// # Errors
/// `(1, why)` when the host cannot be reached or read.
pub async fn plugins(target: &Target) -> Outcome {
    let client = link::open(target).await.map_err(|e| (1, e))?;
    let read = client
        .peer()
        .read_resource(ReadResourceRequestParams::new(PLUGINS_URI))
        .await
        .map_err(|e| (1, format!("reading {PLUGINS_URI}: {e}")))?;
    let text = read.contents.into_iter().find_map(|c| match c {
        ResourceContents::TextResourceContents { text, .. } => Some(text),
        _ => None,
    });
    let table: serde_json::Value =
        serde_json::from_str(&text.unwrap_or_default()).map_err(|e| (1, e.to_string()))?;
    let mut rows = vec![[
        "plugin".to_owned(),
        "gen".to_owned(),
        "state".to_owned(),
        "tasks".to_owned(),
        "path".to_owned(),
    ]];
    for p in table["plugins"].as_array().into_iter().flatten() {
        for g in p["generations"].as_array().into_iter().flatten() {
            let number =
                |v: &serde_json::Value| v.as_u64().map_or("?".to_owned(), |n| n.to_string());
            rows.push([
                p["name"].as_str().unwrap_or("?").to_owned(),
                number(&g["generation"]),
                g["state"].as_str().unwrap_or("?").to_owned(),
                number(&g["live_tasks"]),
                p["path"].as_str().unwrap_or("?").to_owned(),
            ]);
        }
    }
    crate::out::bytes(align(&rows).as_bytes());
    let _ = client.cancel().await;
    Ok(ExitCode::SUCCESS)
}

/// Rows as columns padded to their widest cell (numbers right-aligned), the last column as is.
fn align(rows: &[[String; 5]]) -> String {
    let width = |c: usize| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0);
    let widths: Vec<usize> = (0..4).map(width).collect();
    let mut out = String::new();
    for r in rows {
        let cells: Vec<String> = (0..4)
            .map(|c| {
                let numeric = c == 1 || c == 3;
                if numeric {
                    format!("{:>w$}", r[c], w = widths[c])
                } else {
                    format!("{:<w$}", r[c], w = widths[c])
                }
            })
            .collect();
        out.push_str(&format!("{}  {}\n", cells.join("  "), r[4]));
    }
    out
}

/// `taskhost call`: calls `tool` with `arguments` (a JSON object) on the host at `target` and
/// prints its text; exit 1 when the result is an error.
///
/// # Errors
/// `(2, why)` for bad arguments, `(1, why)` when the host cannot be reached.
pub async fn call(target: &Target, tool: &str, arguments: &str) -> Outcome {
    let args: serde_json::Value =
        serde_json::from_str(arguments).map_err(|e| (2, format!("arguments are not JSON: {e}")))?;
    let serde_json::Value::Object(args) = args else {
        return Err((2, "arguments must be a JSON object".to_owned()));
    };
    let client = link::open(target).await.map_err(|e| (1, e))?;
    let result = client
        .peer()
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .map_err(|e| (1, format!("calling {tool}: {e}")))?;
    for block in &result.content {
        if let Some(t) = block.as_text() {
            crate::outln!("{}", t.text);
        }
    }
    let _ = client.cancel().await;
    Ok(if result.is_error == Some(true) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
