//! The taskhost host: loads plugins, owns the task registry and the sessions, and (in the binary)
//! serves them over MCP.
//!
//! Architecture invariant: this is the only crate that loads libraries; `unsafe` lives in
//! `plugin::loader` and in `memory`'s one allocator call alone (the crate denies it, those two
//! modules allow it).

#![deny(unsafe_code)]

pub mod acp;
pub mod check;
pub mod config;
pub mod dial;
mod external;
pub mod listen;
pub mod mcp;
pub mod memory;
pub mod new_plugin;
pub mod plugin;
pub mod rundir;

/// The process service (the `taskhost-process` crate): every child of every producer.
pub use taskhost_process as process;
pub mod serve;
pub mod sessions;
pub mod wire;

use std::sync::Arc;

use taskhost_registry::{Registry, RegistryConfig};
use tokio::runtime::Handle;

pub use plugin::{CallError, CallOutput, LoadError, LoadOptions, PluginInfo, Plugins};
pub use sessions::Sessions;

/// One host: a registry, the services its tasks run on (processes, sessions), and the plugins
/// feeding it. The host creates the services and hands them to the loader.
pub struct Taskhost {
    registry: Registry,
    processes: Arc<process::ProcessService>,
    sessions: Arc<Sessions>,
    plugins: Arc<Plugins>,
}

impl Taskhost {
    /// Creates a host with no plugins loaded, driving completions on `runtime`.
    pub fn new(config: RegistryConfig, runtime: Handle, options: LoadOptions) -> Self {
        let registry = Registry::new(config, runtime.clone());
        let spill_dir = options.spill_dir.clone().unwrap_or_else(|| {
            let generations = &options.generation_dir;
            generations
                .parent()
                .map_or_else(|| generations.join("spill"), |p| p.join("spill"))
        });
        let processes = Arc::new(process::ProcessService::new(
            runtime.clone(),
            spill_dir,
            options.spill_budget,
            &options.env,
            options.keeper.as_deref(),
        ));
        let sessions = Arc::new(Sessions::new(
            registry.clone(),
            options.max_foreground_per_owner,
        ));
        let plugins = Arc::new(Plugins::new(
            registry.clone(),
            runtime,
            options,
            processes.clone(),
            sessions.clone(),
        ));
        Self {
            registry,
            processes,
            sessions,
            plugins,
        }
    }

    /// The task registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The plugins.
    pub fn plugins(&self) -> &Plugins {
        &self.plugins
    }

    /// Starts watching every loaded plugin file; a content change loads a new generation at once
    /// when the file is complete (`window` after its last event for a writer that never closes it).
    /// Dropping the returned guard stops watching.
    ///
    /// # Errors
    /// When a plugin directory cannot be watched.
    pub fn watch(
        &self,
        window: std::time::Duration,
    ) -> Result<plugin::watch::Watch, plugin::watch::WatchError> {
        self.watch_with_dirs(window, &[])
    }

    /// As [`Taskhost::watch`], and also every library in `plugin_dirs`: one that appears is loaded,
    /// one removed is unloaded (its tasks live on).
    ///
    /// # Errors
    /// When a directory cannot be watched.
    pub fn watch_with_dirs(
        &self,
        window: std::time::Duration,
        plugin_dirs: &[std::path::PathBuf],
    ) -> Result<plugin::watch::Watch, plugin::watch::WatchError> {
        let targets = plugin::watch::Targets::new(&self.plugins.paths(), plugin_dirs);
        plugin::watch::watch(self.plugins.clone(), targets, window)
    }

    /// The sessions.
    pub fn sessions(&self) -> &Sessions {
        &self.sessions
    }

    /// The process service every producer's children run under.
    pub fn processes(&self) -> &process::ProcessService {
        &self.processes
    }

    /// Closes a session: its tasks are cancelled and awaited, its records and spill files removed.
    ///
    /// # Cancel safety
    /// As [`Sessions::close`]; the spill files stay until a later call completes.
    pub async fn close_session(&self, id: &str) {
        self.sessions().close(id).await;
        self.processes().remove_spills(id);
    }

    /// Shuts down: every task is cancelled and awaited (boundedly), every remaining child process group
    /// is ended, then every plugin is retired.
    ///
    /// # Cancel safety
    /// Not cancel safe: dropped before it completes, the registry is disposed (no new task starts)
    /// but processes and plugins are left as they are; the keeper still ends the processes when the
    /// host exits.
    pub async fn shutdown(&self) {
        self.registry.dispose().await;
        self.processes().shutdown();
        self.plugins.unload_all();
    }
}
