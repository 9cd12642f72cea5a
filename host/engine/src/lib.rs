//! The engine a taskhost plugin runs on: loads plugins, owns the task registry, the services tasks
//! run on, the sessions and their owners. It serves no client: the MCP, HTTP, wire, bridge and
//! command-line edges are the `taskhost` crate's, and the testkit (a plugin author's tests) depends
//! on this crate alone.
//!
//! Feature `store` (on by default; the `taskhost` crate's): durable state (`serve --state`) in
//! `taskhost-store`'s SQLite. The testkit builds the engine without it: its hosts keep everything in
//! memory, and a plugin author's first `cargo test` compiles no SQLite.
//!
//! Rooms: [`host`] (one host, tying the rest together), [`services`] (what tasks run on, no FFI),
//! [`plugin`] (loading, generations and the host handle: the only place that loads libraries),
//! [`sessions`] and [`owners`] (who owns a connection's tasks, and how an owner comes back),
//! [`owner_names`] (owners as people know them),
//! [`policy`] (the bounds an owner's processes run under), [`drain`], [`rundir`], [`status`] and
//! [`memory`].
//!
//! Architecture invariant: `unsafe` lives in three modules alone (the workspace denies it; each says
//! why it may, and the tidy test checks this list against them): `plugin::loader` (opening and
//! checking a plugin library), `plugin::own_threads` (a plugin's own threads hold its code) and
//! `memory` (the one allocator call).

pub mod drain;
pub mod host;
#[expect(
    unsafe_code,
    reason = "malloc_trim, the one allocator call the host makes"
)]
pub mod memory;
pub mod owner_names;
pub mod owners;
pub mod plugin;
pub mod policy;
pub mod rundir;
pub mod services;
pub mod sessions;
pub mod status;

/// The process service (the `taskhost-process` crate): every child of every producer.
pub use taskhost_process as process;

pub use host::Taskhost;
pub use plugin::{CallError, CallOutput, LoadError, LoadOptions, PluginInfo, Plugins};
pub use services::ServiceOptions;
pub use sessions::Sessions;
