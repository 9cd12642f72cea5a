//! The binary's log: to stderr, colour codes only for a terminal. A client that goes away is not the
//! host's error: rmcp's ERROR events for an answer it could no longer send (`channel closed`) are
//! left out.

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;

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
        .finish()
        .with(ClientGone)
        .init();
}

/// Leaves out rmcp's ERROR events whose `error` says the client's channel closed.
struct ClientGone;

impl<S: tracing::Subscriber> Layer<S> for ClientGone {
    fn event_enabled(&self, event: &tracing::Event<'_>, _: Context<'_, S>) -> bool {
        let meta = event.metadata();
        if *meta.level() != tracing::Level::ERROR || !meta.target().starts_with("rmcp::") {
            return true;
        }
        let mut closed = ChannelClosed(false);
        event.record(&mut closed);
        !closed.0
    }
}

/// Whether an event's `error` field says a channel closed.
struct ChannelClosed(bool);

impl Visit for ChannelClosed {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "error" && format!("{value:?}").contains("channel closed") {
            self.0 = true;
        }
    }
}
