//! A generation: one load of one plugin file, and everything that keeps its code alive: the
//! [`GenBox`]es holding the plugin's objects, among them its tools ([`ToolEntry`]) and completion
//! listeners, each of which keeps the generation loaded while it lives.
//!
//! Plugin code runs only on its generation's threads (`executor.rs`). Every plugin-made object the host
//! holds is a [`GenBox`], which keeps the generation alive and is dropped on its threads. When the last
//! holder goes, the executor is shut down, its threads joined (their TLS destructors run) and the library
//! closed: a real unload, which the tests check against `/proc/self/maps`. A thread the plugin started
//! on its own holds the library open until that thread has ended (`own_threads.rs`).

use parking_lot::{Mutex, MutexGuard};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use taskhost_abi::{ListenerBox, PluginBox, PluginModRef, ToolHandlerBox};
use taskhost_registry::Registration;

use super::executor::Executor;
use super::loader::Libraries;

/// One load of a plugin file. Every host-held object made by this generation's code holds an
/// `Arc<Generation>` (through a `GenBox`), as do in-flight calls and workers; when the last one goes,
/// the generation shuts its executor down, joins its threads and closes its library (a real unload).
pub struct Generation {
    pub(crate) plugin: String,
    pub(crate) number: u64,
    pub(crate) source: PathBuf,
    pub(crate) executor: Executor,
    pub(crate) module: PluginModRef,
    pub(crate) config_json: String,
    pub(crate) live_tasks: AtomicUsize,
    pub(crate) retired: AtomicBool,
    /// When it was loaded, in ms since the Unix epoch.
    pub(crate) loaded_at_ms: u64,
    pub(crate) state: Mutex<GenState>,
    libraries: Mutex<Option<Arc<Libraries>>>,
}

/// What a generation registered, undone when it is retired.
#[derive(Default)]
pub(crate) struct GenState {
    pub(crate) instance: Option<PluginBox>,
    /// Tools registered during init, waiting for the swap.
    pub(crate) staged: Vec<ToolEntry>,
    /// Prompts, resources and templates registered during init, waiting for the swap.
    pub(crate) staged_items: Vec<ItemEntry>,
    /// The kinds of item whose list the swap changed, told once the generation is committed.
    pub(crate) items_changed: Vec<taskhost_abi::McpItemKind>,
    pub(crate) swapped_in: bool,
    pub(crate) surfaces: Vec<(u64, Registration)>,
    /// Keys of every completion listener this generation registered (staged or in force).
    pub(crate) listeners: Vec<u64>,
    /// Completion listeners registered during init, put in force by the swap in the same step that
    /// takes the previous generation's out: a settlement reaches exactly one generation's listener.
    pub(crate) staged_listeners: Vec<(u64, ListenerEntry)>,
}

impl Generation {
    pub(crate) fn new(
        plugin: String,
        number: u64,
        source: PathBuf,
        module: PluginModRef,
        libraries: Option<Arc<Libraries>>,
        config_json: String,
    ) -> Self {
        Self {
            executor: Executor::new(format!("{plugin}#g{number}")),
            plugin,
            number,
            source,
            module,
            config_json,
            live_tasks: AtomicUsize::new(0),
            retired: AtomicBool::new(false),
            loaded_at_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            state: Mutex::new(GenState::default()),
            libraries: Mutex::new(libraries),
        }
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, GenState> {
        self.state.lock()
    }

    /// The plugin's name.
    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// The plugin file this generation was loaded from.
    pub fn source(&self) -> &std::path::Path {
        &self.source
    }

    /// The generation number (1 for the first load of a plugin file).
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Tasks started through this generation that have not settled.
    pub fn live_tasks(&self) -> usize {
        self.live_tasks.load(Ordering::Relaxed)
    }

    /// True once a newer generation replaced this one (or the plugin was unloaded).
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Generation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generation")
            .field("plugin", &self.plugin)
            .field("number", &self.number)
            .field("live_tasks", &self.live_tasks())
            .field("retired", &self.is_retired())
            .finish_non_exhaustive()
    }
}

impl Drop for Generation {
    fn drop(&mut self) {
        let instance = self.state().instance.take();
        if let Some(instance) = instance {
            // Plugin-made: dropped on the generation's own threads.
            if self.executor.call(move || drop(instance)).is_none() {
                tracing::warn!(plugin = %self.plugin, generation = self.number, "could not drop the plugin instance on its own thread");
            }
        }
        let threads = self.executor.shut_down();
        let libraries = self.libraries.lock().take();
        let (plugin, number) = (self.plugin.clone(), self.number);
        let finish = move || {
            for t in threads {
                if t.join().is_err() {
                    tracing::warn!(%plugin, generation = number, "a plugin thread panicked");
                }
            }
            drop(libraries);
            tracing::debug!(%plugin, generation = number, "generation unloaded");
        };
        if self.executor.is_current() {
            // The last guard went on one of this generation's own threads: join from elsewhere.
            if let Err(e) = std::thread::Builder::new()
                .name("taskhost-reaper".into())
                .spawn(finish)
            {
                tracing::error!(error = %e, "cannot start the reaper thread; the generation stays mapped");
            }
        } else {
            finish();
        }
    }
}

/// A plugin-made value held by the host. It keeps its generation loaded, and is dropped on one of the
/// generation's threads.
pub(crate) struct GenBox<T: Send + 'static> {
    value: Option<T>,
    generation: Arc<Generation>,
}

impl<T: Send + 'static> GenBox<T> {
    pub(crate) fn new(value: T, generation: Arc<Generation>) -> Self {
        Self {
            value: Some(value),
            generation,
        }
    }

    pub(crate) fn generation(&self) -> &Arc<Generation> {
        &self.generation
    }

    pub(crate) fn get(&self) -> &T {
        // Always Some until drop.
        self.value
            .as_ref()
            .unwrap_or_else(|| unreachable!("GenBox value taken before drop"))
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.value
            .as_mut()
            .unwrap_or_else(|| unreachable!("GenBox value taken before drop"))
    }
}

impl<T: Send + 'static> Drop for GenBox<T> {
    fn drop(&mut self) {
        let Some(value) = self.value.take() else {
            return;
        };
        if self.generation.executor.is_current() {
            drop(value);
            return;
        }
        let generation = self.generation.clone();
        // If the executor is already closed the job (and the value) is dropped right here.
        self.generation.executor.submit(move || {
            drop(value);
            drop(generation);
        });
    }
}

/// A tool as the host serves it.
#[derive(Clone)]
pub struct ToolEntry {
    /// The tool's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its JSON schema (shared: a call's look-up copies no schema).
    pub input_schema: Arc<serde_json::Value>,
    /// More of its MCP description (`execution`, `annotations`, ...), as the plugin gave it.
    pub mcp: Arc<serde_json::Value>,
    pub(crate) handler: Arc<GenBox<ToolHandlerBox>>,
}

/// A plugin's completion listener, holding its generation.
pub(crate) type ListenerEntry = Arc<GenBox<ListenerBox>>;

/// A registered item as the host serves it.
#[derive(Clone)]
pub struct ItemEntry {
    /// What it is.
    pub kind: taskhost_abi::McpItemKind,
    /// Its key: a prompt's name, a resource's URI, a template's URI template.
    pub key: String,
    /// Its MCP description, as the plugin gave it.
    pub spec: serde_json::Value,
    pub(crate) handler: Arc<GenBox<taskhost_abi::McpHandlerBox>>,
}
