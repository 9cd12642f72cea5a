//! Plugins: loading, generations, the atomic swap, retiring and unloading, and the host handle
//! through which a generation reaches the host's services.
//!
//! A load of a plugin file makes a new [`Generation`] from a private copy of the file. Its `init` runs
//! with the tools it registers staged; only if it succeeds are they swapped in, under one write of the
//! tool table, so the tool set changes atomically; its completion listeners replace the old
//! generation's in the same way, so each settlement reaches exactly one of them. The old generation
//! is then retired: its surfaces detach (after the new one attached its own, so the fence never
//! flaps), its instance is disposed. Calls already in flight finish on it; tasks it started keep it loaded until
//! they settle; then it unloads for real.
//!
//! Entry points: [`Plugins::load`] (`plugins.rs`), the loader's `open` (`loader.rs`, the unsafe
//! part), the host handle (`host_api.rs`, each method one conversion and one service call).

mod call_scope;
mod convert;
mod elf;
mod executor;
mod generation;
mod host_api;
mod host_error;
mod host_kill;
mod host_log;
mod host_mcp;
mod host_view;
mod items;
mod load_options;
#[expect(
    unsafe_code,
    reason = "dlopen, dlsym and the layout check of a plugin library"
)]
mod loader;
pub mod mapped;
#[expect(
    unsafe_code,
    reason = "pthread_create interposition and dl_iterate_phdr: a plugin's own threads hold its code"
)]
pub mod own_threads;
mod plugins;
mod registered;
mod requests;
mod retire;
mod served;
mod signature;
mod slot;
mod table;
mod task_bridge;
mod tools;
pub mod watch;

pub use generation::{Generation, ItemEntry, ToolEntry};
pub use items::under;
pub use load_options::LoadOptions;
pub use loader::LoadError;
pub use plugins::Plugins;
pub use served::{CallExtras, uri_template_matches};
pub use slot::{GenerationInfo, GenerationState, PluginInfo};
pub use tools::{CallError, CallOutput};
