//! The binary's log: to stderr, as text for people (colour codes only for a terminal) or as one JSON
//! object per line for log collectors (`serve --log-format json`). A client that goes away is not
//! the host's error: rmcp's ERROR events for an answer it could no longer send (`channel closed`)
//! are left out; its INFO lines (several per call) are too, unless `RUST_LOG` asks for them.

use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Text for people.
    #[default]
    Text,
    /// One JSON object per line: `timestamp`, `level`, `target`, `fields` (with `message`).
    Json,
}

/// The filter without `RUST_LOG`: a server logs its lifecycle (`info`, rmcp's own lines only from
/// `warn`); a client command only says what went wrong (`warn`), in its own words (rmcp's, such as
/// a connection reset by a host that restarts under `follow`, are left out).
pub fn default_filter(server: bool) -> &'static str {
    if server {
        "info,rmcp=warn"
    } else {
        "warn,rmcp=off"
    }
}

/// Starts logging to stderr in `format`, filtered by `RUST_LOG`, else by [`default_filter`].
pub fn init(server: bool, format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| default_filter(server).into());
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter);
    match format {
        // A log file or a client's pipe gets plain text.
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .finish()
            .with(ClientGone)
            .init(),
        LogFormat::Json => builder.json().finish().with(ClientGone).init(),
    }
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
