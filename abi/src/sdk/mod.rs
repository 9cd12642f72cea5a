//! The plugin author's side: plain Rust traits, types and closures, wrapped into the boundary's
//! objects ([`crate::ffi`]) with every call under `catch_unwind`, so a plugin panic becomes an error
//! result instead of an abort.
//!
//! ```ignore
//! use taskhost_abi::prelude::*;
//!
//! struct Echo;
//! impl Plugin for Echo {}
//!
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(crate = "taskhost_abi::serde")]
//! #[schemars(crate = "taskhost_abi::schemars")]
//! struct EchoArgs { text: String }
//!
//! struct EchoTool;
//! impl Tool for EchoTool {
//!     type Args = EchoArgs;
//!     fn name(&self) -> &str { "echo" }
//!     fn description(&self) -> String { "Echoes its text.".into() }
//!     fn run(&self, _call: &ToolCall, args: EchoArgs) -> ToolResult { ToolResult::ok(args.text) }
//! }
//!
//! fn init(host: Host) -> Result<Echo, String> {
//!     host.register(EchoTool)?;
//!     Ok(Echo)
//! }
//!
//! export_plugin!(name: "echo", init: init);
//! ```
//!
//! Where things are: [`Host`] (`host.rs`: the registry's calls, notices, logs, workers),
//! task starts (`starts.rs`), tools (`tool.rs`), prompts, resources and a call's client (`mcp.rs`),
//! HTTP routes for surfaces that serve people (`http.rs`), typed config (`config.rs`), the traits a plugin
//! implements (`plugin.rs`), the export (`export.rs`), and the glue between them and the boundary
//! (`glue.rs`).
//!
//! A tool that starts a background task reports it as data: it answers
//! [`ToolResult::started`](crate::ffi::ToolResult::started)`(text, id)`, the text for the model in
//! whatever words it likes, the id for the host (MCP Tasks, and the `_meta` of the call's MCP
//! result: `{"taskhost/started": {"task": ID}}`).

mod args;
mod config;
mod config_keys;
mod export;
mod glue;
mod host;
pub mod http;
mod mcp;
mod plugin;
mod starts;
mod tool;
pub mod typed;

pub use args::non_empty;
pub use config::{NonEmpty, Positive, PositiveMs};
// The export macro's plumbing: public for the code `export_plugin!` writes, not for authors.
#[doc(hidden)]
pub use export::{ROOT_MODULE_SYMBOL, root_module, run_init};
pub use host::Host;
pub use mcp::{ItemHandler, McpError};
pub use plugin::{Handler, NoState, Output, Plugin, TaskControl, TaskHandle};
pub use starts::{Declaration, PROCESS_MARKER};
pub use taskhost_common::shown;
pub use tool::{NoArgs, Tool, runs_as_task, runs_in_background_as_task};
