//! The stable ABI between the taskhost host and its plugins, and the small SDK plugin authors use.
//!
//! A plugin is a cdylib that depends on this crate alone and calls [`export_plugin!`] once. Everything
//! that crosses the boundary is an `abi_stable` type, checked for layout when the host loads the file:
//! - data: [`types`] (tool specs and calls, task declarations, outcomes, snapshots);
//! - objects the host implements and hands to the plugin: [`HostApi`] (the host handle),
//!   [`Completion`] (settles one task);
//! - objects the plugin implements and hands to the host: [`ToolHandler`], [`Starter`], [`Hooks`],
//!   [`Listener`], [`Worker`], [`PluginInstance`].
//!
//! Boundary rules the SDK enforces so plugin authors need not: no panic crosses (every plugin-side
//! method runs under `catch_unwind` in [`sdk`]); plugins never run an async runtime or spawn raw
//! threads (the host runs plugin code on threads of the plugin's generation, see [`HostApi::spawn_worker`]);
//! logs cross as plain records through [`HostApi::log`].
//!
//! Architecture invariant: this crate holds types and glue only; it loads nothing and knows nothing of
//! the registry's internals.

mod args;
mod glue;
#[expect(
    unsafe_code,
    reason = "abi_stable's #[sabi_trait] expands its vtable calls into unsafe blocks"
)]
pub mod objects;
pub mod prelude;
pub mod root;
pub mod sdk;
mod starts;
pub mod typed;
pub mod types;
pub mod work;

pub use abi_stable;
pub use objects::*;
pub use root::{ABI_VERSION, PluginMod, PluginModRef};
pub use schemars;
pub use sdk::{Host, Plugin, TaskControl, TaskHandle, Tool};
pub use serde;
pub use serde_json;
pub use types::*;
