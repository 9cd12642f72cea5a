//! A plugin linked with `-z nodelete` (see build.rs): glibc never unloads it, whatever the host does.
//! `taskhost check` must name the flag.

use taskhost_abi::prelude::*;

fn init(host: Host) -> Result<NoState, String> {
    host.register_tool(
        "nodelete_ping",
        "Answers pong.",
        json!({"type": "object"}),
        |_: &ToolCall| ToolResult::ok("pong"),
    )?;
    Ok(NoState)
}

export_plugin!(name: "nodelete", init: init);
