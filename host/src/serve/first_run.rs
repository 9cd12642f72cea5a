//! What `serve` says to a person who started it from a terminal, where a client was expected.

/// What `serve` says on stderr when a person, not a client, started it (stdin is a terminal).
pub(super) fn help() -> String {
    let exe =
        std::env::current_exe().map_or_else(|_| "taskhost".to_owned(), |p| p.display().to_string());
    format!(
        "taskhost is an MCP server: it is waiting for an MCP client on stdin, not for typing.\n\
         Register it with a client instead:\n\
         \x20 Claude Code:  claude mcp add taskhost -- {exe} serve\n\
         \x20 Codex:        ~/.codex/config.toml: [mcp_servers.taskhost] command = \"{exe}\" args = [\"serve\"]\n\
         \x20 Gemini CLI:   gemini mcp add taskhost {exe} serve\n\
         \x20 opencode:     opencode.json: {{\"mcp\": {{\"taskhost\": {{\"type\": \"local\", \"command\": [\"{exe}\", \"serve\"]}}}}}}\n\
         To try it by hand: {exe} serve --listen unix: (the socket $XDG_RUNTIME_DIR/taskhost.sock),\n\
         then in another terminal: {exe} run -- echo hi, and {exe} follow with the id it printed\n\
         Ctrl-C stops it.\n"
    )
}
