//! One host: the registry, the services its tasks run on, and the plugins feeding it.

use std::sync::Arc;

use taskhost_registry::{Registry, RegistryConfig};
use tokio::runtime::Handle;

use crate::owners::Owners;
use crate::plugin::watch::{self, Targets, Watch, WatchError};
use crate::plugin::{LoadOptions, Plugins};
use crate::process::ProcessService;
use crate::process::keeper::Handed;
use crate::services::handover::Predecessor;
use crate::services::{ServiceOptions, Services};
use crate::sessions::Sessions;

/// One host: a registry, the services its tasks run on (processes, sessions), and the plugins
/// feeding it. The host creates the services and hands them to the loader.
pub struct Taskhost {
    services: Services,
    plugins: Arc<Plugins>,
    owners: Owners,
    /// The bridges' sessions' pause for an upgrade.
    drain: crate::drain::Drain,
}

/// The process service of a host of `services`: with the keeper `predecessor` handed over (and
/// its tasks, returned), else with a keeper of its own.
fn processes(
    runtime: &Handle,
    spill_dir: std::path::PathBuf,
    services: &ServiceOptions,
    predecessor: Option<Predecessor>,
) -> (ProcessService, Option<Handed>) {
    let mut processes = ProcessService::new(
        runtime.clone(),
        spill_dir,
        services.spill_budget,
        &services.env,
        services.keeper.as_deref().filter(|_| predecessor.is_none()),
    );
    let mut handed = None;
    if let (Some(Predecessor { keeper, handed: h }), Some(program)) =
        (predecessor, services.keeper.as_deref())
    {
        processes = processes.with_adopted_keeper(program, keeper, &h);
        handed = Some(h);
    }
    (processes, handed)
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
        Self::build(config, runtime, options, services, None).0
    }

    /// As [`Taskhost::new`], serving with the keeper a gone predecessor handed its running tasks
    /// over with instead of starting one. Returns the host and those tasks, for
    /// [`Taskhost::take_back_tasks`] once the plugins are loaded (`None` when `services` names no
    /// keeper program: the keeper is let go, and the tasks end with it).
    pub fn taking_over(
        config: RegistryConfig,
        runtime: Handle,
        options: LoadOptions,
        services: ServiceOptions,
        predecessor: Predecessor,
    ) -> (Self, Option<Handed>) {
        Self::build(config, runtime, options, services, Some(predecessor))
    }

    fn build(
        config: RegistryConfig,
        runtime: Handle,
        options: LoadOptions,
        services: ServiceOptions,
        predecessor: Option<Predecessor>,
    ) -> (Self, Option<Handed>) {
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
        let (mut processes, handed) = processes(&runtime, spill_dir, &services, predecessor);
        if let Some(state) = &services.state {
            processes = processes.with_kept_output(state.output_dir());
        }
        if let Some(policies) = &services.policies {
            processes = processes.with_owner_bounds(policies.clone());
        }
        let processes = Arc::new(processes);
        let sessions = Arc::new(Sessions::new(
            registry.clone(),
            services.max_foreground_per_owner,
            services.state.clone(),
        ));
        let owners = Owners::new(services.state.clone(), services.owner_grace);
        let queue = crate::services::queue::Queue::new(
            registry.clone(),
            services.max_running,
            services.policies.as_ref().and_then(|p| p.owner_limit()),
        );
        let services = Services {
            registry,
            processes,
            sessions,
            runtime,
            state: services.state,
            restarting: taskhost_registry::CancellationToken::new(),
            continued: Default::default(),
            policies: services.policies,
            queue,
            facts: Default::default(),
        };
        services.tell_unheld();
        let plugins = Arc::new(Plugins::new(services.clone(), options));
        crate::status::install(&plugins, services.clone());
        let host = Self {
            services,
            plugins,
            owners,
            drain: crate::drain::Drain::default(),
        };
        (host, handed)
    }

    /// The bridges' sessions' pause before an upgrade ([`crate::drain`]).
    pub fn drain(&self) -> &crate::drain::Drain {
        &self.drain
    }

    /// Takes back the running tasks `handed`, which a gone predecessor's keeper handed to this host
    /// (as [`Taskhost::taking_over`] returned them; see [`Services::take_back`]); call once the
    /// plugins are loaded. Returns their ids.
    pub fn take_back_tasks(&self, handed: Handed) -> Vec<String> {
        self.services.take_back(handed)
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

    /// The owners of this host's connections.
    pub fn owners(&self) -> &Owners {
        &self.owners
    }

    /// Ends an owner: in the records its secret is retired first (so no connection comes back as
    /// it while its tasks end), then its session is closed (as [`Taskhost::close_session`]).
    ///
    /// # Cancel safety
    /// As [`Taskhost::close_session`].
    pub async fn end_owner(self: &Arc<Self>, id: &str) {
        let (host, name) = (self.clone(), id.to_owned());
        let _ = tokio::task::spawn_blocking(move || host.owners.end(&name)).await;
        self.close_session(id).await;
    }

    /// An owner whose connection was lost without a goodbye: its calls end, its notices wait, and
    /// unless a connection with a later lease takes it within the grace, it is ended then.
    pub fn away(self: &Arc<Self>, id: &str, lease: u64) {
        self.sessions().detach(id);
        let (host, id) = (self.clone(), id.to_owned());
        let grace = self.owners.grace();
        self.services.runtime.spawn(async move {
            tokio::time::sleep(grace).await;
            if host.owners.expire(&id, lease) {
                tracing::info!(session = %id, "an owner did not come back within its grace; its tasks are cancelled");
                host.end_owner(&id).await;
            }
        });
    }

    /// Brings back the settled tasks of owner `id` from the records (a connection that came back
    /// from an earlier host): listed and readable as its own, and each whose end it was never told
    /// announced once. Every task it was not told of comes back, and of the others the newest
    /// [`RESTORED_TASKS_MAX`] (`taskhost tasks` shows them all); their output is the last
    /// [`RESTORED_OUTPUT_BYTES`] of each kept stream, the read naming the file that has all of it.
    /// Blocks on the store. Returns how many came back.
    pub fn restore_owner(&self, id: &str) -> usize {
        let (Some(state), Some(agent)) = (&self.services.state, self.sessions().agent(id)) else {
            return 0;
        };
        let records = match state.owner_tasks(id) {
            Ok(records) => records,
            Err(e) => {
                tracing::warn!(session = %id, error = %e, "cannot read an owner's records");
                return 0;
            }
        };
        let told = records.iter().filter(|r| r.told).count();
        let mut skip_told = told.saturating_sub(RESTORED_TASKS_MAX);
        let mut restored = 0;
        for record in records {
            if record.told && skip_told > 0 {
                skip_told -= 1;
                continue;
            }
            if self.registry().get(&record.id, Some(&agent)).is_ok() {
                continue; // taken over live, or brought back already
            }
            let Some(task) = restored_task(state, record) else {
                continue;
            };
            match self.registry().restore(&agent, task) {
                Ok(()) => restored += 1,
                Err(e) => {
                    tracing::warn!(session = %id, error = %e, "a record was not brought back")
                }
            }
        }
        restored
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

/// How much of each kept stream a task brought back from the records shows, from where its owner's
/// reads stood (the rest is in the kept file the read names).
pub const RESTORED_OUTPUT_BYTES: u64 = 16 * 1024;

/// How many settled tasks an owner was told of come back with it (the newest).
pub const RESTORED_TASKS_MAX: usize = 100;

/// A settled record as the registry takes it back; `None` for a live one (another host runs it).
fn restored_task(
    state: &taskhost_store::Store,
    record: taskhost_store::TaskRecord,
) -> Option<taskhost_registry::RestoredTask> {
    let status = taskhost_registry::TaskStatus::parse(&record.status)?;
    if !status.is_terminal() {
        return None;
    }
    let has_files = record.stdout_path.is_some() || record.stderr_path.is_some();
    let output = if record.expired_at_ms.is_some() {
        "(this task's kept output was removed by the state directory's retention)\n".to_owned()
    } else {
        state
            .kept_tail(&record, RESTORED_OUTPUT_BYTES, record.read)
            .unwrap_or_else(|e| format!("(this task's kept output cannot be read: {e})\n"))
    };
    Some(taskhost_registry::RestoredTask {
        id: record.id,
        kind: record.kind,
        label: record.label,
        status,
        detail: record.detail,
        started_at_ms: record.started_at_ms,
        finished_at_ms: record.finished_at_ms.unwrap_or(record.started_at_ms),
        stream: has_files || record.expired_at_ms.is_some(),
        output,
        told: record.told,
    })
}
