//! The taskhost host's edges: serves the engine (`taskhost-engine`: loading, the registry, the
//! services, sessions and owners) over MCP and HTTP, and holds the command line.
//!
//! Rooms: [`mcp`] with [`serve`], [`listen`], [`dial`], [`http`] and [`wire`] (the edges to
//! clients), [`bridge`] (a client's stdio to a running host), [`config`], [`check`] and
//! [`new_plugin`] (the plugin authors' tools), and the commands (`*_cli`, [`policy_check`]). The
//! engine's rooms are re-exported under their old paths ([`host`], [`plugin`], [`services`],
//! [`sessions`], [`owners`], ...), so `taskhost::plugin::...` still names them.
//!
//! Architecture invariant: `unsafe` lives in one module of this crate alone (the workspace denies
//! it; the engine's lib.rs names its own, and the tidy test checks both lists): the binary's `main`
//! (the exported thread-creation entry point).

pub mod bridge;
pub mod check;
pub mod client_cli;
pub mod config;
pub mod dial;
pub mod env_check;
pub mod http;
pub mod listen;
pub mod logs;
pub mod mcp;
pub mod new_plugin;
pub mod out;
pub mod policy_check;
pub mod serve;
pub mod tasks_cli;
mod tasks_table;
pub mod terminal;
pub mod token_cli;
pub mod utc;
pub mod version;
pub mod wire;

pub use taskhost_engine::{
    CallError, CallOutput, LoadError, LoadOptions, PluginInfo, Plugins, ServiceOptions, Sessions,
    Taskhost, drain, host, memory, owners, plugin, policy, process, rundir, services, sessions,
    status,
};
