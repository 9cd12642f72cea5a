//! One host: the registry, the services its tasks run on, and the plugins feeding it.

use std::sync::Arc;

use taskhost_registry::{Registry, RegistryConfig};
use tokio::runtime::Handle;

use crate::plugin::watch::{self, Targets, Watch, WatchError};
use crate::plugin::{LoadOptions, Plugins};
use crate::process::ProcessService;
use crate::services::{ServiceOptions, Services};
use crate::sessions::Sessions;

/// One host: a registry, the services its tasks run on (processes, sessions), and the plugins
/// feeding it. The host creates the services and hands them to the loader.
pub struct Taskhost {
    services: Services,
    plugins: Arc<Plugins>,
}

impl Taskhost {
    /// Creates a host with no plugins loaded, driving completions on `runtime`; spill files go
    /// beside the generation directory unless `services` says where.
    pub fn new(
        config: RegistryConfig,
        runtime: Handle,
        options: LoadOptions,
        services: ServiceOptions,
    ) -> Self {
        let journal = services.state.as_ref().and_then(|s| s.journal().ok());
        let registry = match journal {
            Some(journal) => Registry::with_journal(config, runtime.clone(), journal),
            None => Registry::new(config, runtime.clone()),
        };
        let spill_dir = services.spill_dir.clone().unwrap_or_else(|| {
            let generations = &options.generation_dir;
            generations
                .parent()
                .map_or_else(|| generations.join("spill"), |p| p.join("spill"))
        });
        let mut processes = ProcessService::new(
            runtime.clone(),
            spill_dir,
            services.spill_budget,
            &services.env,
            services.keeper.as_deref(),
        );
        if let Some(state) = &services.state {
            processes = processes.with_kept_output(state.output_dir());
        }
        let processes = Arc::new(processes);
        let sessions = Arc::new(Sessions::new(
            registry.clone(),
            services.max_foreground_per_owner,
        ));
        let services = Services {
            registry,
            processes,
            sessions,
            runtime,
            state: services.state,
        };
        let plugins = Arc::new(Plugins::new(services.clone(), options));
        Self { services, plugins }
    }

    /// The services plugins reach through their host handles.
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// The task registry.
    pub fn registry(&self) -> &Registry {
        &self.services.registry
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
    pub fn watch(&self, window: std::time::Duration) -> Result<Watch, WatchError> {
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
    ) -> Result<Watch, WatchError> {
        let targets = Targets::new(&self.plugins.paths(), plugin_dirs);
        watch::watch(self.plugins.clone(), targets, window)
    }

    /// The sessions.
    pub fn sessions(&self) -> &Sessions {
        &self.services.sessions
    }

    /// The process service every producer's children run under.
    pub fn processes(&self) -> &ProcessService {
        &self.services.processes
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
        self.services.registry.dispose().await;
        self.processes().shutdown();
        self.plugins.unload_all();
        if let Some(state) = &self.services.state {
            state.close();
        }
    }
}
