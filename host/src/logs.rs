//! The binary's log: to stderr, colour codes only for a terminal.

/// Starts logging to stderr: a server logs its lifecycle (`info`); a one-shot command only says what
/// went wrong (`warn`). `RUST_LOG` overrides either.
pub fn init(server: bool) {
    let default_filter = if server { "info" } else { "warn" };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        // A log file or a client's pipe gets plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| default_filter.into()),
        )
        .init();
}
