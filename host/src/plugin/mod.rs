//! Plugins: loading, generations, the atomic swap, retiring and unloading.
//!
//! A load of a plugin file makes a new [`Generation`] from a private copy of the file. Its `init` runs
//! with the tools it registers staged; only if it succeeds are they swapped in, under one write of the
//! tool table, so the tool set changes atomically; its completion listeners replace the old
//! generation's in the same way, so each settlement reaches exactly one of them. The old generation
//! is then retired: its surfaces detach (after the new one attached its own, so the fence never
//! flaps), its instance is disposed. Calls already in flight finish on it; tasks it started keep it loaded until
//! they settle; then it unloads for real.

mod call_scope;
mod convert;
mod executor;
mod generation;
mod host_api;
#[allow(unsafe_code)]
mod loader;
mod tools;
pub mod watch;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};

use taskhost_abi::abi_stable::sabi_trait::TD_Opaque;
use taskhost_abi::{HostApi_TO, ListenerBox};
use taskhost_registry::{Registration, Registry};
use tokio::runtime::Handle;

pub use call_scope::Progress;
pub use generation::Generation;
pub use loader::LoadError;
pub use tools::{CallError, CallOutput, ToolEntry};

use crate::sessions::Sessions;
use generation::{GenBox, GenState};

/// State every generation's host handle reaches.
pub(crate) struct Shared {
    pub(crate) registry: Registry,
    pub(crate) processes: Arc<crate::process::ProcessService>,
    pub(crate) sessions: Sessions,
    pub(crate) runtime: Handle,
    tools: RwLock<tools::Table>,
    listeners: Mutex<BTreeMap<u64, ListenerEntry>>,
    keys: AtomicU64,
    tools_changed: Mutex<Vec<Arc<dyn Fn() + Send + Sync>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    pub(crate) fn next_key(&self) -> u64 {
        self.keys.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn tools_read(&self) -> std::sync::RwLockReadGuard<'_, tools::Table> {
        self.tools.read().unwrap_or_else(|p| p.into_inner())
    }

    fn tools_write(&self) -> std::sync::RwLockWriteGuard<'_, tools::Table> {
        self.tools.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Registers a tool for `generation`: staged until its swap, live after.
    fn add_tool(&self, generation: &Arc<Generation>, entry: ToolEntry) -> Result<(), String> {
        let mut state = generation.state();
        if !state.swapped_in {
            if state.staged.iter().any(|t| t.name == entry.name) {
                return Err(format!("tool {} registered twice", entry.name));
            }
            state.staged.push(entry);
            return Ok(());
        }
        let mut table = self.tools_write();
        if let Some(existing) = table.get(&entry.name)
            && existing.plugin() != generation.plugin
        {
            return Err(format!(
                "tool {} is already served by plugin {}",
                entry.name,
                existing.plugin()
            ));
        }
        table.insert(entry.name.clone(), entry);
        drop(table);
        drop(state);
        self.fire_tools_changed();
        Ok(())
    }

    fn remove_tool(&self, generation: &Arc<Generation>, name: &str) {
        let mut state = generation.state();
        state.staged.retain(|t| t.name != name);
        let removed = {
            let mut table = self.tools_write();
            let ours = table
                .get(name)
                .is_some_and(|t| Arc::ptr_eq(t.handler.generation(), generation));
            ours && table.remove(name).is_some()
        };
        drop(state);
        if removed {
            self.fire_tools_changed();
        }
    }

    /// Registers a generation's completion listener: in force at once if the generation serves,
    /// otherwise staged for its swap.
    fn add_listener(&self, key: u64, listener: ListenerEntry) {
        let generation = listener.generation().clone();
        let mut state = generation.state();
        state.listeners.push(key);
        if state.swapped_in {
            lock(&self.listeners).insert(key, listener);
        } else {
            state.staged_listeners.push((key, listener));
        }
    }

    /// Puts `generation`'s staged listeners in force and takes every other generation's listeners of
    /// the same plugin out, in one step (the caller holds `generation`'s state).
    fn swap_listeners(&self, generation: &Generation, state: &mut GenState) {
        let staged = std::mem::take(&mut state.staged_listeners);
        let mut listeners = lock(&self.listeners);
        listeners.retain(|_, l| l.generation().plugin != generation.plugin);
        listeners.extend(staged);
    }

    fn remove_listener(&self, key: u64) {
        lock(&self.listeners).remove(&key);
    }

    fn fire_tools_changed(&self) {
        let callbacks = lock(&self.tools_changed).clone();
        for c in callbacks {
            c();
        }
    }

    /// Hands a settlement to every plugin listener, each on its own generation's threads, without
    /// waiting (a slow listener never holds up settlement).
    fn fan_out(&self, snapshot: &taskhost_registry::TaskSnapshot) {
        let listeners: Vec<_> = lock(&self.listeners).values().cloned().collect();
        for l in listeners {
            let snap = convert::snapshot(snapshot);
            let generation = l.generation().clone();
            generation.executor.submit(move || l.get().task_done(snap));
        }
    }
}

/// What one plugin file slot holds.
struct Slot {
    name: Option<String>,
    config_json: String,
    next_generation: u64,
    active: Option<Arc<Generation>>,
    retiring: Vec<Weak<Generation>>,
    /// The file as it was at the last successful load.
    last: Option<FileSignature>,
}

impl Slot {
    /// Moves a replaced or unloaded generation to the retiring list, which keeps only the ones still
    /// mapped (so the list does not grow with reload history).
    fn retire(&mut self, old: &Arc<Generation>) {
        self.prune();
        self.retiring.push(Arc::downgrade(old));
    }

    /// Forgets retired generations that have unloaded.
    fn prune(&mut self) {
        self.retiring.retain(|w| w.strong_count() > 0);
    }
}

/// A generation as reported in `taskhost://plugins`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerationInfo {
    /// Its number.
    pub generation: u64,
    /// `active` or `retiring`.
    pub state: &'static str,
    /// Its unsettled tasks.
    pub live_tasks: usize,
}

/// A plugin as reported in `taskhost://plugins`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PluginInfo {
    /// The plugin's name (the file stem until a generation loaded).
    pub name: String,
    /// The plugin file.
    pub path: PathBuf,
    /// Its mapped generations, oldest first.
    pub generations: Vec<GenerationInfo>,
}

/// Options for loading plugins and running their processes.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Where generation files go: a directory private to this user (created 0700 if missing; a load
    /// into a directory others can write or enter is refused). [`crate::rundir::RunDir`] makes one.
    pub generation_dir: PathBuf,
    /// Skip the trust check.
    pub allow_untrusted: bool,
    /// Where spill files of process output go; `None` puts them in `spill` beside `generation_dir`.
    /// Must be private like `generation_dir`, or spills are refused.
    pub spill_dir: Option<PathBuf>,
    /// The environment policy of every child process.
    pub env: crate::process::env::EnvPolicy,
    /// The `taskhost` binary, whose `keeper` command ends every task process if the host dies
    /// (see [`crate::process::keeper`]); `None` runs without one.
    pub keeper: Option<PathBuf>,
    /// Foreground commands one session may run at once (`[tasks] max_foreground_per_owner`,
    /// [`crate::sessions::DEFAULT_MAX_FOREGROUND`] by default).
    pub max_foreground_per_owner: usize,
}

/// A plugin's completion listener, holding its generation.
pub(crate) type ListenerEntry = Arc<GenBox<ListenerBox>>;

/// The loaded plugins and the tool table they feed.
pub struct Plugins {
    shared: Arc<Shared>,
    options: LoadOptions,
    slots: Mutex<BTreeMap<PathBuf, Slot>>,
    /// Serializes loads: one swap at a time.
    load_lock: Mutex<()>,
    _fan_out: Registration,
}

impl Plugins {
    pub(crate) fn new(registry: Registry, runtime: Handle, options: LoadOptions) -> Self {
        let spill_dir = options.spill_dir.clone().unwrap_or_else(|| {
            options
                .generation_dir
                .parent()
                .map_or_else(|| options.generation_dir.join("spill"), |p| p.join("spill"))
        });
        let shared = Arc::new(Shared {
            processes: Arc::new(crate::process::ProcessService::new(
                runtime.clone(),
                spill_dir,
                &options.env,
                options.keeper.as_deref(),
            )),
            sessions: Sessions::new(registry.clone(), options.max_foreground_per_owner),
            registry: registry.clone(),
            runtime,
            tools: RwLock::new(BTreeMap::new()),
            listeners: Mutex::new(BTreeMap::new()),
            keys: AtomicU64::new(0),
            tools_changed: Mutex::new(Vec::new()),
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
            _fan_out: fan_out,
        }
    }

    pub(crate) fn sessions(&self) -> &Sessions {
        &self.shared.sessions
    }

    pub(crate) fn processes(&self) -> &crate::process::ProcessService {
        &self.shared.processes
    }

    /// Calls `f` after every change of the tool set.
    pub fn on_tools_changed(&self, f: impl Fn() + Send + Sync + 'static) {
        lock(&self.shared.tools_changed).push(Arc::new(f));
    }

    /// The tools served now, by name.
    pub fn tools(&self) -> Vec<ToolEntry> {
        self.shared.tools_read().values().cloned().collect()
    }

    /// Calls a tool for `session` (empty for none).
    ///
    /// # Errors
    /// [`CallError`] when no plugin serves the tool, the arguments are not an object, or the serving
    /// generation went away.
    ///
    /// # Cancel safety
    /// Dropping the future cancels the call: a foreground command it started is ended as a kill ends
    /// it (SIGTERM, the grace, SIGKILL), and the plugin's answer is dropped. The session's end does
    /// the same to every call of the session.
    pub async fn call_tool(
        &self,
        name: &str,
        session: &str,
        arguments: &serde_json::Value,
    ) -> Result<CallOutput, CallError> {
        self.call_tool_with_progress(name, session, arguments, None)
            .await
    }

    /// [`Plugins::call_tool`], with `progress` told how a foreground command the call runs is doing
    /// (at most ten times a second, only when its output grew).
    ///
    /// # Errors
    /// As [`Plugins::call_tool`].
    ///
    /// # Cancel safety
    /// As [`Plugins::call_tool`].
    pub async fn call_tool_with_progress(
        &self,
        name: &str,
        session: &str,
        arguments: &serde_json::Value,
        progress: Option<Progress>,
    ) -> Result<CallOutput, CallError> {
        let entry = self.shared.tools_read().get(name).cloned();
        let entry = entry.ok_or_else(|| CallError::UnknownTool(name.to_owned()))?;
        let cancel = self.shared.sessions.call_token(session);
        let _cancel_on_drop = cancel.clone().drop_guard();
        let context = call_scope::CallContext { cancel, progress };
        entry.call(session, arguments, context).await
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
        let _serial = lock(&self.load_lock);
        // Absolute, so the watcher's event paths match it.
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        if !self.options.allow_untrusted {
            loader::check_trust(&path)?;
        }
        let mut signature = signature(&path).map_err(|source| LoadError::Io {
            path: path.clone(),
            source,
        })?;
        let (number, config_json, link) = {
            let mut slots = lock(&self.slots);
            let slot = slots.entry(path.clone()).or_insert_with(|| Slot {
                name: None,
                config_json: "{}".to_owned(),
                next_generation: 1,
                active: None,
                retiring: Vec::new(),
                last: None,
            });
            if only_if_changed
                && slot
                    .last
                    .as_ref()
                    .is_some_and(|l| l.same_content(&signature, &path))
            {
                return Ok(None);
            }
            if let Some(c) = config_json {
                slot.config_json = c;
            }
            let n = slot.next_generation;
            slot.next_generation += 1;
            let mapped = slot
                .active
                .iter()
                .cloned()
                .chain(slot.retiring.iter().filter_map(Weak::upgrade));
            let link = mapped.into_iter().all(|g| g.source_id != signature.id);
            (n, slot.config_json.clone(), link)
        };
        let file = loader::private_copy(&path, &self.options.generation_dir, number, link)?;
        let opened = loader::open(&path, &file);
        signature.build_id = loader::build_id_of(&file.file);
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
            signature.id,
            module,
            libraries,
            config_json,
        ));
        self.init(&generation, &path)?;
        self.swap(&generation, &path)?;
        let mut slots = lock(&self.slots);
        let old = slots.get_mut(&path).and_then(|slot| {
            slot.last = Some(signature);
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
        if let Some(old) = old {
            retire_state(&self.shared, &old);
            release_off_path(old);
        }
        tracing::info!(plugin = %generation.plugin, generation = generation.number, path = %path.display(), "plugin generation serving");
        Ok(Some(generation))
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
            state.swapped_in = true;
        }
        Ok(())
    }

    /// Unloads a plugin: its tools go, its active generation is retired.
    pub fn unload(&self, path: &Path) {
        let _serial = lock(&self.load_lock);
        let old = lock(&self.slots).get_mut(path).and_then(|s| {
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
            retire_state(&self.shared, &old);
            release_off_path(old);
            if removed {
                self.shared.fire_tools_changed();
            }
        }
    }

    /// The plugin table: each plugin with its mapped generations.
    pub fn info(&self) -> Vec<PluginInfo> {
        let mut slots = lock(&self.slots);
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
                        state: "retiring",
                        live_tasks: g.live_tasks(),
                    })
                    .collect();
                if let Some(g) = &slot.active {
                    generations.push(GenerationInfo {
                        generation: g.number,
                        state: "active",
                        live_tasks: g.live_tasks(),
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
        let active: Vec<Arc<Generation>> = lock(&self.slots)
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
        lock(&self.slots).keys().cloned().collect()
    }

    /// Retires every plugin (used at shutdown, after the registry is disposed).
    pub fn unload_all(&self) {
        for path in self.paths() {
            self.unload(&path);
        }
    }
}

/// Retires a generation: its surfaces detach, its listeners go, its instance is disposed and dropped
/// on its own threads. Whatever else holds it (tasks, in-flight calls, workers) keeps it loaded.
fn retire_state(shared: &Shared, generation: &Arc<Generation>) {
    generation.retired.store(true, Ordering::Relaxed);
    let (instance, surfaces, listeners) = {
        let mut s = generation.state();
        s.staged.clear();
        s.staged_listeners.clear();
        (
            s.instance.take(),
            std::mem::take(&mut s.surfaces),
            std::mem::take(&mut s.listeners),
        )
    };
    drop(surfaces);
    for key in listeners {
        shared.remove_listener(key);
    }
    if let Some(instance) = instance {
        generation.executor.call(move || {
            instance.dispose();
            drop(instance);
        });
    }
    tracing::info!(plugin = %generation.plugin, generation = generation.number, live_tasks = generation.live_tasks(), "plugin generation retired");
}

/// Drops a retired generation's handle on a helper thread: if it was the last one, the unload (thread
/// joins, `dlclose`) happens there instead of on the swap path.
fn release_off_path(generation: Arc<Generation>) {
    if Arc::strong_count(&generation) > 1 {
        return; // tasks or calls still hold it; the last of them unloads it
    }
    let spawned = std::thread::Builder::new()
        .name("taskhost-unload".into())
        .spawn(move || drop(generation));
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "cannot start the unload thread; unloading inline");
    }
}

/// What identifies a plugin file's content cheaply: its inode and metadata, the build id of the bytes
/// that were loaded, and their fingerprint (computed off the swap path, from the generation's private
/// file).
struct FileSignature {
    /// (device, inode): how glibc tells loaded objects apart.
    id: (u64, u64),
    len: u64,
    modified: Option<std::time::SystemTime>,
    build_id: Option<Vec<u8>>,
    fingerprint: Arc<std::sync::OnceLock<Option<u64>>>,
}

fn signature(path: &Path) -> std::io::Result<FileSignature> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path)?;
    Ok(FileSignature {
        id: (m.dev(), m.ino()),
        len: m.len(),
        modified: m.modified().ok(),
        build_id: None,
        fingerprint: Arc::new(std::sync::OnceLock::new()),
    })
}

impl FileSignature {
    /// True when the file at `path`, whose signature is `now`, holds the build this signature was
    /// taken of. Same inode, size and mtime: unchanged. Another size: changed. Same size: the same
    /// build id (the linker's hash of its output) when both have one, which costs one 4 KiB read;
    /// otherwise compared by fingerprint (the whole file is read only in that case: ~1.3 ms for a
    /// 7 MB plugin, on the reload's critical path).
    fn same_content(&self, now: &FileSignature, path: &Path) -> bool {
        if self.len != now.len {
            return false;
        }
        if self.id == now.id && self.modified == now.modified {
            return true;
        }
        if let (Some(old), Some(new)) = (&self.build_id, loader::build_id(path)) {
            return *old == new;
        }
        let Some(old) = *self.fingerprint.wait() else {
            return false;
        };
        fingerprint(path).is_ok_and(|f| f == old)
    }
}

/// Fingerprints a generation's private file (the loaded bytes) into `slot`, then removes the file;
/// on a helper thread, so the swap does not wait for a full read.
fn fingerprint_then_remove(file: loader::PrivateFile, slot: Arc<std::sync::OnceLock<Option<u64>>>) {
    fn fill(file: &loader::PrivateFile, slot: &std::sync::OnceLock<Option<u64>>) {
        let _ = slot.set(fingerprint_of(&file.file).ok());
        let _ = std::fs::remove_file(&file.path);
    }
    let file = Arc::new(file);
    let (f, s) = (file.clone(), slot.clone());
    let spawned = std::thread::Builder::new()
        .name("taskhost-fingerprint".into())
        .spawn(move || fill(&f, &s));
    if spawned.is_err() {
        fill(&file, &slot);
    }
}

/// A fast content fingerprint of the file at `path` (word-wise multiply-rotate over its bytes, then
/// its length), so a rebuild with identical bytes does not reload. Read in 64 KiB pieces: a load never
/// holds a whole library in memory (a multi-megabyte buffer freed on a fresh thread stays cached in
/// that thread's malloc arena, which the soak test measured as RSS growing with every load). Change
/// detection only: not a cryptographic hash.
fn fingerprint(path: &Path) -> std::io::Result<u64> {
    fingerprint_of(&std::fs::File::open(path)?)
}

/// [`fingerprint`] of an open file, read from its start (its offset is not used).
fn fingerprint_of(file: &std::fs::File) -> std::io::Result<u64> {
    use std::os::unix::fs::FileExt;
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    // Four independent lanes over 32-byte blocks, so the multiplies overlap instead of waiting on
    // each other (a single chain hashed a 7 MB plugin in ~1.5 ms, on the reload's critical path).
    fn mix(h: u64, w: u64) -> u64 {
        (h.rotate_left(23) ^ w).wrapping_mul(K)
    }
    let mut buf = vec![0u8; 64 * 1024];
    let mut lanes = [K, K.rotate_left(16), K.rotate_left(32), K.rotate_left(48)];
    let mut len = 0u64;
    loop {
        let mut filled = 0;
        while filled < buf.len() {
            match file.read_at(&mut buf[filled..], len + filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        len += filled as u64;
        // Only the last piece is short, so blocks never straddle pieces.
        let word = |c: &[u8]| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let mut blocks = buf[..filled].chunks_exact(32);
        for b in &mut blocks {
            for (lane, c) in lanes.iter_mut().zip(b.chunks_exact(8)) {
                *lane = mix(*lane, word(c));
            }
        }
        let mut words = blocks.remainder().chunks_exact(8);
        for c in &mut words {
            lanes[0] = mix(lanes[0], word(c));
        }
        for &b in words.remainder() {
            lanes[0] = mix(lanes[0], u64::from(b));
        }
        if filled < buf.len() {
            return Ok(lanes.iter().fold(mix(K, len), |h, &l| mix(h, l)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fingerprint;

    #[test]
    fn the_fingerprint_tells_files_apart_by_any_byte_and_by_length() {
        let dir = std::env::temp_dir().join(format!("taskhost-fp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.join(name);
            std::fs::write(&p, bytes).expect("write");
            fingerprint(&p).expect("fingerprint")
        };
        // Past one 64 KiB piece, with a tail that is not a whole word.
        let mut bytes: Vec<u8> = (0..200_003u32).map(|i| (i * 7 % 251) as u8).collect();
        let base = write("a", &bytes);
        assert_eq!(write("same", &bytes), base);
        bytes[150_000] ^= 1;
        assert_ne!(write("byte", &bytes), base);
        bytes[150_000] ^= 1;
        bytes.push(0);
        assert_ne!(write("longer", &bytes), base);
        assert_ne!(write("empty", &[]), write("zero", &[0]));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
