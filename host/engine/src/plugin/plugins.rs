//! The loaded plugins: each plugin file's slot, the load of a new generation, its swap into the tool
//! table, and unloading.

use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Weak};

use taskhost_abi::HostApi_TO;
use taskhost_abi::abi_stable::sabi_trait::TD_Opaque;
use taskhost_registry::Registration;

use super::generation::Generation;
use super::load_options::LoadOptions;
use super::loader::{self, LoadError};
use super::retire::{release_off_path, retire_state};
use super::signature::{FileSignature, fingerprint_then_remove, signature};
use super::slot::{GenerationInfo, GenerationState, PluginInfo, Slot};
use super::table::Shared;
use super::{elf, host_api};
use crate::services::Services;

/// The loaded plugins and the tool table they feed.
pub struct Plugins {
    pub(super) shared: Arc<Shared>,
    options: LoadOptions,
    slots: Mutex<BTreeMap<PathBuf, Slot>>,
    /// Serializes loads: one swap at a time.
    load_lock: Mutex<()>,
    /// The generation directory, held open from the first load on (files are created relative to
    /// it).
    generation_dir: Mutex<Option<Arc<crate::rundir::HeldDir>>>,
    _fan_out: Registration,
}

impl Plugins {
    /// The loader of a host whose services (`processes`, `sessions`) the host made: plugins reach them
    /// through their host handles; the loader owns none of them.
    pub(crate) fn new(services: Services, options: LoadOptions) -> Self {
        let registry = services.registry.clone();
        let shared = Arc::new(Shared {
            services,
            tools: RwLock::new(BTreeMap::new()),
            listeners: Mutex::new(BTreeMap::new()),
            keys: AtomicU64::new(0),
            tools_changed: Mutex::new(Vec::new()),
            items: RwLock::new(BTreeMap::new()),
            list_changed: Mutex::new(Vec::new()),
            resource_updated: Mutex::new(Vec::new()),
            status: RwLock::new(None),
        });
        let weak = Arc::downgrade(&shared);
        let fan_out = registry.on_task_done(Arc::new(move |snapshot, _owner| {
            if let Some(shared) = weak.upgrade() {
                shared.fan_out(snapshot);
            }
        }));
        Self {
            shared,
            options,
            slots: Mutex::new(BTreeMap::new()),
            load_lock: Mutex::new(()),
            generation_dir: Mutex::new(None),
            _fan_out: fan_out,
        }
    }

    /// Loads (or reloads) the plugin at `path` as a new generation and swaps it in once its init
    /// succeeded. With `only_if_changed`, a file whose content is unchanged since the last successful
    /// load is skipped (`Ok(None)`).
    ///
    /// # Errors
    /// [`LoadError`] naming the file and the cause; the previous generation (if any) keeps serving.
    pub fn load(
        &self,
        path: &Path,
        config_json: Option<String>,
        only_if_changed: bool,
    ) -> Result<Option<Arc<Generation>>, LoadError> {
        let _serial = self.load_lock.lock();
        // Absolute, so the watcher's event paths match it.
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let source = loader::open_source(&path, self.options.allow_untrusted)?;
        let mut signature = signature(&source).map_err(|source| LoadError::Io {
            path: path.clone(),
            source,
        })?;
        let unchanged = |last: Option<&FileSignature>| {
            only_if_changed && last.is_some_and(|l| l.same_content(&signature, &source))
        };
        let Some((number, config_json)) = self.reserve_generation(&path, config_json, unchanged)
        else {
            return Ok(None);
        };
        let generation_dir = self.generation_dir()?;
        let file = loader::private_copy(&path, &source, &generation_dir, number)?;
        let opened = loader::open(&path, &file);
        signature.build_id = elf::build_id_of(&file.file);
        // The mapping stays valid after the name is gone: the file is removed once fingerprinted.
        fingerprint_then_remove(file, signature.fingerprint.clone());
        let (module, libraries) = opened?;
        // The one plugin call made off the generation's threads: `name` returns a string literal (the
        // export macro writes it), so it can register nothing thread-local.
        let name = (module.name())().as_str().to_owned();
        let generation = Arc::new(Generation::new(
            name.clone(),
            number,
            path.clone(),
            module,
            Some(libraries),
            config_json,
        ));
        self.install(&generation, &path, Some(signature), name)?;
        Ok(Some(generation))
    }

    /// Loads a plugin linked into this program (its `__taskhost_root_module()`, which
    /// [`taskhost_abi::export_plugin!`] writes) as a new generation, without a library file: what a
    /// plugin's own unit tests use to run its tools on the real host in-process. The slot's path is
    /// `(linked)/<name>`; loading the same module again makes a new generation, as a reload does.
    ///
    /// # Errors
    /// [`LoadError::Init`] or [`LoadError::ToolClash`]; the previous generation keeps serving.
    pub fn load_linked(
        &self,
        module: taskhost_abi::PluginModRef,
        config_json: Option<String>,
    ) -> Result<Arc<Generation>, LoadError> {
        let _serial = self.load_lock.lock();
        let name = (module.name())().as_str().to_owned();
        let path = PathBuf::from(format!("(linked)/{name}"));
        let (number, config_json) = self
            .reserve_generation(&path, config_json, |_| false)
            .unwrap_or_default();
        let generation = Arc::new(Generation::new(
            name.clone(),
            number,
            path.clone(),
            module,
            None,
            config_json,
        ));
        self.install(&generation, &path, None, name)?;
        Ok(generation)
    }

    /// Runs a new generation's init, swaps it in and commits it as its plugin's active one.
    fn install(
        &self,
        generation: &Arc<Generation>,
        path: &Path,
        signature: Option<FileSignature>,
        name: String,
    ) -> Result<(), LoadError> {
        self.init(generation, path)?;
        self.swap(generation, path)?;
        self.commit(path, generation, signature, name);
        tracing::info!(plugin = %generation.plugin, generation = generation.number, path = %path.display(), "plugin generation serving");
        Ok(())
    }

    /// The held generation directory: made private (0700, ours) and opened at the first load.
    fn generation_dir(&self) -> Result<Arc<crate::rundir::HeldDir>, LoadError> {
        let mut held = self.generation_dir.lock();
        if let Some(dir) = held.as_ref() {
            return Ok(dir.clone());
        }
        let dir = crate::rundir::HeldDir::ensure(&self.options.generation_dir)
            .map_err(|e| LoadError::GenerationDir(e.to_string()))?;
        Ok(held.insert(Arc::new(dir)).clone())
    }

    /// Takes the next generation number of the plugin at `path` (its slot made on first use) and its
    /// config; `None` when `unchanged` says the file holds the build loaded last.
    fn reserve_generation(
        &self,
        path: &Path,
        config_json: Option<String>,
        unchanged: impl FnOnce(Option<&FileSignature>) -> bool,
    ) -> Option<(u64, String)> {
        let mut slots = self.slots.lock();
        let slot = slots.entry(path.to_owned()).or_insert_with(|| Slot {
            name: None,
            config_json: "{}".to_owned(),
            next_generation: 1,
            active: None,
            retiring: Vec::new(),
            last: None,
        });
        if unchanged(slot.last.as_ref()) {
            return None;
        }
        if let Some(c) = config_json {
            slot.config_json = c;
        }
        let n = slot.next_generation;
        slot.next_generation += 1;
        Some((n, slot.config_json.clone()))
    }

    /// Makes a swapped-in generation the plugin's active one, tells the tools-changed listeners, and
    /// retires the generation it replaced.
    fn commit(
        &self,
        path: &Path,
        generation: &Arc<Generation>,
        signature: Option<FileSignature>,
        name: String,
    ) {
        let mut slots = self.slots.lock();
        let old = slots.get_mut(path).and_then(|slot| {
            slot.last = signature;
            slot.name = Some(name);
            let old = slot.active.replace(generation.clone());
            if let Some(old) = &old {
                slot.retire(old);
            }
            old
        });
        drop(slots);
        // Told only now, so a client that reads the plugin table on the news sees the new generation.
        self.shared.fire_tools_changed();
        let items_changed = std::mem::take(&mut generation.state().items_changed);
        for kind in items_changed {
            self.shared.fire_list_changed(kind);
        }
        if let Some(old) = old {
            retire_state(&self.shared, &old);
            release_off_path(old);
        }
    }

    fn init(&self, generation: &Arc<Generation>, path: &Path) -> Result<(), LoadError> {
        let host = host_api::GenHost {
            generation: Arc::downgrade(generation),
            shared: self.shared.clone(),
        };
        let host = HostApi_TO::from_value(host, TD_Opaque);
        let init = generation.module.init();
        let result = generation
            .executor
            .call(move || match init(host).into_result() {
                Ok(instance) => Ok(instance),
                Err(e) => Err(e.as_str().to_owned()),
            });
        let fail = |message: String| {
            retire_state(&self.shared, generation);
            LoadError::Init {
                plugin: generation.plugin.clone(),
                path: path.to_owned(),
                message,
            }
        };
        match result {
            Some(Ok(instance)) => {
                generation.state().instance = Some(instance);
                Ok(())
            }
            Some(Err(message)) => Err(fail(message)),
            None => Err(fail("its thread could not be started".to_owned())),
        }
    }

    /// Puts `generation`'s staged tools in the table, replacing the tools of the plugin's previous generation,
    /// in one write. The caller tells the tools-changed listeners once the slot shows the generation.
    fn swap(&self, generation: &Arc<Generation>, path: &Path) -> Result<(), LoadError> {
        let mut state = generation.state();
        let staged = std::mem::take(&mut state.staged);
        if let Some((item, owner)) = self.shared.item_clash(generation, &state.staged_items) {
            drop(state);
            retire_state(&self.shared, generation);
            return Err(LoadError::ToolClash {
                plugin: generation.plugin.clone(),
                path: path.to_owned(),
                tool: item,
                owner,
            });
        }
        {
            let mut table = self.shared.tools_write();
            for t in &staged {
                if let Some(existing) = table.get(&t.name)
                    && existing.plugin() != generation.plugin
                {
                    let e = LoadError::ToolClash {
                        plugin: generation.plugin.clone(),
                        path: path.to_owned(),
                        tool: t.name.clone(),
                        owner: existing.plugin().to_owned(),
                    };
                    drop(table);
                    state.staged = staged;
                    drop(state);
                    retire_state(&self.shared, generation);
                    return Err(e);
                }
            }
            table.retain(|_, t| t.plugin() != generation.plugin);
            for t in staged {
                table.insert(t.name.clone(), t);
            }
            self.shared.swap_listeners(generation, &mut state);
            let items = std::mem::take(&mut state.staged_items);
            state.items_changed = self.shared.swap_items(generation, items);
            state.swapped_in = true;
        }
        Ok(())
    }

    /// Unloads a plugin: its tools go, its active generation is retired.
    pub fn unload(&self, path: &Path) {
        let _serial = self.load_lock.lock();
        let old = self.slots.lock().get_mut(path).and_then(|s| {
            let old = s.active.take();
            if let Some(o) = &old {
                s.retire(o);
            }
            s.last = None;
            old
        });
        if let Some(old) = old {
            let removed = {
                let mut table = self.shared.tools_write();
                let before = table.len();
                table.retain(|_, t| !Arc::ptr_eq(t.handler.generation(), &old));
                before != table.len()
            };
            let items_changed = self.shared.drop_items(&old);
            retire_state(&self.shared, &old);
            release_off_path(old);
            if removed {
                self.shared.fire_tools_changed();
            }
            for kind in items_changed {
                self.shared.fire_list_changed(kind);
            }
        }
    }

    /// Sets what the plugins' host handles answer `host_status_json` with.
    pub(crate) fn set_status_source(&self, source: super::table::StatusSource) {
        *self.shared.status.write() = Some(source);
    }

    /// The plugin table: each plugin with its mapped generations.
    pub fn info(&self) -> Vec<PluginInfo> {
        let mut slots = self.slots.lock();
        slots
            .iter_mut()
            .map(|(path, slot)| {
                slot.prune();
                let mut generations: Vec<GenerationInfo> = slot
                    .retiring
                    .iter()
                    .filter_map(Weak::upgrade)
                    .map(|g| GenerationInfo {
                        generation: g.number,
                        state: GenerationState::Retiring,
                        live_tasks: g.live_tasks(),
                        loaded_at_ms: g.loaded_at_ms,
                    })
                    .collect();
                if let Some(g) = &slot.active {
                    generations.push(GenerationInfo {
                        generation: g.number,
                        state: GenerationState::Active,
                        live_tasks: g.live_tasks(),
                        loaded_at_ms: g.loaded_at_ms,
                    });
                }
                generations.sort_by_key(|g| g.generation);
                let name = slot.name.clone().unwrap_or_else(|| {
                    path.file_stem()
                        .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
                });
                PluginInfo {
                    name,
                    path: path.clone(),
                    generations,
                }
            })
            .collect()
    }

    /// The prompt sections of the active generations, in plugin path order, empty ones left out.
    pub fn prompt_sections(&self) -> Vec<String> {
        let active: Vec<Arc<Generation>> = self
            .slots
            .lock()
            .values()
            .filter_map(|s| s.active.clone())
            .collect();
        active
            .into_iter()
            .filter_map(|g| {
                // Plugin code: asked on the generation's own threads.
                let g2 = g.clone();
                let text = g.executor.call(move || {
                    g2.state()
                        .instance
                        .as_ref()
                        .map(|i| i.prompt_section().as_str().to_owned())
                });
                text.flatten().filter(|t| !t.is_empty())
            })
            .collect()
    }

    /// The paths of the plugin files loaded (or tried).
    pub fn paths(&self) -> Vec<PathBuf> {
        self.slots.lock().keys().cloned().collect()
    }

    /// Retires every plugin (used at shutdown, after the registry is disposed).
    pub fn unload_all(&self) {
        for path in self.paths() {
            self.unload(&path);
        }
    }
}
