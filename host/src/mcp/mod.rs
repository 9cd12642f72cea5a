//! The MCP front end: one [`McpSession`] per MCP session (stdio: one; a Unix socket: one per
//! connection). Each session is one agent, the owner of the tasks it starts, disposed when the
//! session ends.
//!
//! Both protocol eras are served: a legacy session (`initialize`, up to 2025-11-25) is told of tool
//! changes through its peer and gets notices as logging messages; a 2026-07-28 session (`server/discover`,
//! no handshake) is told of tool changes only on the `subscriptions/listen` streams it opens, and gets
//! notices as logging messages once a request opted in with `io.modelcontextprotocol/logLevel`. In
//! both, a notice also rides on the session's next tool result, the one path every client shows its
//! model. rmcp marks logging deprecated (SEP-2577) for 2026-07-28; it is still what clients show.
//!
//! Every session's messages pass one [`layer`] in front of rmcp, which serves what rmcp does not
//! model (the 2025-11-25 era's tasks).

mod call;
mod client;
mod hub;
pub mod layer;
mod peers;
pub mod person;
mod principals;
mod serving;
mod session;
mod surface;
mod tasks;

pub use layer::{LEGACY_TASKS_VERSION, Layer, LegacyTasks};
pub use peers::Peers;
pub use principals::{Principal, PrincipalOwners, REVOCATION_CHECK};
pub use serving::{serve_stdio, serve_unix};
pub use session::McpSession;
pub use surface::PLUGINS_URI;
