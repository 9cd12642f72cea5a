//! The taskhost host: loads plugins, owns the task registry and the sessions, and (in the binary)
//! serves them over MCP.
//!
//! Rooms: [`host`] (one host, tying the rest together), [`services`] (what tasks run on, no FFI),
//! [`plugin`] (loading, generations and the host handle: the only place that loads libraries),
//! [`mcp`] with [`serve`], [`listen`], [`dial`] and [`wire`] (the edges to clients), [`sessions`] and
//! [`owners`] (who owns a connection's tasks, and how an owner comes back),
//! [`config`], [`rundir`], [`check`] and [`new_plugin`] (the plugin authors' tools).
//!
//! Architecture invariant: `unsafe` lives in four modules alone (the workspace denies it; each says
//! why it may, and the tidy test checks this list against them): `plugin::loader` (opening and
//! checking a plugin library), `plugin::own_threads` (a plugin's own threads hold its code), `memory`
//! (the one allocator call) and the binary's `main` (the exported thread-creation entry point).

pub mod bridge;
pub mod check;
pub mod client_cli;
pub mod config;
pub mod dial;
pub mod drain;
pub mod env_check;
pub mod host;
pub mod http;
pub mod listen;
pub mod logs;
pub mod mcp;
#[expect(
    unsafe_code,
    reason = "malloc_trim, the one allocator call the host makes"
)]
pub mod memory;
pub mod new_plugin;
pub mod owners;
pub mod plugin;
pub mod policy;
pub mod rundir;
pub mod serve;
pub mod services;
pub mod sessions;
pub mod status;
pub mod tasks_cli;
mod tasks_table;
pub mod terminal;
pub mod token_cli;
pub mod utc;
pub mod version;
pub mod wire;

/// The process service (the `taskhost-process` crate): every child of every producer.
pub use taskhost_process as process;

pub use host::Taskhost;
pub use plugin::{CallError, CallOutput, LoadError, LoadOptions, PluginInfo, Plugins};
pub use services::ServiceOptions;
pub use sessions::Sessions;
