//! A plugin that breaks the rule that keeps plugins unloadable: its init starts a thread of its own
//! (not a `Host::spawn_worker` thread), which parks forever. `taskhost check` must name it.

use taskhost_abi::prelude::*;

fn init(host: Host) -> Result<NoState, String> {
    host.register_tool(
        "leak_thread_ping",
        "Answers pong.",
        json!({"type": "object"}),
        |_: &ToolCall| ToolResult::ok("pong"),
    )?;
    std::thread::Builder::new()
        .name("leaked-by-plugin".into())
        .spawn(|| {
            loop {
                std::thread::park();
            }
        })
        .map_err(|e| e.to_string())?;
    Ok(NoState)
}

export_plugin!(name: "leak_thread", init: init);
