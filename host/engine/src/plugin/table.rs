//! The state every generation's host handle reaches: the host's services, and the loader's own
//! tables (the live tools and the completion listeners), each changed for one generation at a time.

use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use taskhost_abi::McpItemKind;

use super::convert;
use super::generation::{GenState, Generation, ItemEntry, ListenerEntry, ToolEntry};
use super::registered::{register, unregister};
use super::{items, tools};
use crate::services::Services;

/// State every generation's host handle reaches.
pub(crate) struct Shared {
    pub(crate) services: Services,
    pub(crate) tools: RwLock<tools::Table>,
    pub(crate) listeners: Mutex<BTreeMap<u64, ListenerEntry>>,
    pub(crate) keys: AtomicU64,
    pub(crate) tools_changed: Mutex<Vec<Arc<dyn Fn() + Send + Sync>>>,
    pub(crate) items: RwLock<items::Table>,
    pub(crate) list_changed: Mutex<Vec<ListChanged>>,
    pub(crate) resource_updated: Mutex<Vec<ResourceUpdated>>,
    /// What `host_status_json` answers, set once the host is built.
    pub(crate) status: RwLock<Option<StatusSource>>,
}

/// The host's status as people watch it (plugins and health), as JSON.
pub(crate) type StatusSource = Arc<dyn Fn() -> serde_json::Value + Send + Sync>;

/// Called when the list of prompts, resources or templates changed.
pub(crate) type ListChanged = Arc<dyn Fn(taskhost_abi::McpItemKind) + Send + Sync>;

/// Called when a resource changed.
pub(crate) type ResourceUpdated = Arc<dyn Fn(&str) + Send + Sync>;

impl Shared {
    pub(crate) fn next_key(&self) -> u64 {
        self.keys.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn tools_read(&self) -> parking_lot::RwLockReadGuard<'_, tools::Table> {
        self.tools.read()
    }

    pub(crate) fn tools_write(&self) -> parking_lot::RwLockWriteGuard<'_, tools::Table> {
        self.tools.write()
    }

    /// Registers a tool for `generation`: staged until its swap, live after.
    pub(crate) fn add_tool(
        &self,
        generation: &Arc<Generation>,
        entry: ToolEntry,
    ) -> Result<(), String> {
        let mut state = generation.state();
        let swapped_in = state.swapped_in;
        let changed = register(
            generation,
            swapped_in,
            &mut state.staged,
            &self.tools,
            entry,
        )?;
        drop(state);
        if changed {
            self.fire_tools_changed();
        }
        Ok(())
    }

    pub(crate) fn remove_tool(&self, generation: &Arc<Generation>, name: &str) {
        let mut state = generation.state();
        let removed = unregister(generation, &mut state.staged, &self.tools, &name.to_owned());
        drop(state);
        if removed {
            self.fire_tools_changed();
        }
    }

    /// Registers a generation's completion listener: in force at once if the generation serves,
    /// otherwise staged for its swap.
    pub(crate) fn add_listener(&self, key: u64, listener: ListenerEntry) {
        let generation = listener.generation().clone();
        let mut state = generation.state();
        state.listeners.push(key);
        if state.swapped_in {
            self.listeners.lock().insert(key, listener);
        } else {
            state.staged_listeners.push((key, listener));
        }
    }

    /// Puts `generation`'s staged listeners in force and takes every other generation's listeners of
    /// the same plugin out, in one step (the caller holds `generation`'s state).
    pub(crate) fn swap_listeners(&self, generation: &Generation, state: &mut GenState) {
        let staged = std::mem::take(&mut state.staged_listeners);
        let mut listeners = self.listeners.lock();
        listeners.retain(|_, l| l.generation().plugin != generation.plugin);
        listeners.extend(staged);
    }

    pub(crate) fn remove_listener(&self, key: u64) {
        self.listeners.lock().remove(&key);
    }

    pub(crate) fn fire_tools_changed(&self) {
        let callbacks = self.tools_changed.lock().clone();
        for c in callbacks {
            c();
        }
    }

    /// Hands a settlement to every plugin listener, each on its own generation's threads, without
    /// waiting (a slow listener never holds up settlement).
    pub(crate) fn fan_out(&self, snapshot: &taskhost_registry::TaskSnapshot) {
        let listeners: Vec<_> = self.listeners.lock().values().cloned().collect();
        for l in listeners {
            let snap = convert::snapshot(snapshot);
            let generation = l.generation().clone();
            generation.executor.submit(move || l.get().task_done(snap));
        }
    }
}

/// The prompts, resources and templates in force, changed for one generation at a time.
impl Shared {
    /// Registers an item for `generation`: staged until its swap, in force after.
    pub(crate) fn add_item(
        &self,
        generation: &Arc<Generation>,
        entry: ItemEntry,
    ) -> Result<(), String> {
        let kind = entry.kind;
        let mut state = generation.state();
        let swapped_in = state.swapped_in;
        let changed = register(
            generation,
            swapped_in,
            &mut state.staged_items,
            &self.items,
            entry,
        )?;
        drop(state);
        if changed {
            self.fire_list_changed(kind);
        }
        Ok(())
    }

    /// Unregisters one of `generation`'s items.
    pub(crate) fn remove_item(&self, generation: &Arc<Generation>, kind: McpItemKind, key: &str) {
        let mut state = generation.state();
        let id = (kind, key.to_owned());
        let removed = unregister(generation, &mut state.staged_items, &self.items, &id);
        drop(state);
        if removed {
            self.fire_list_changed(kind);
        }
    }

    /// The first item `generation`'s staged ones would take from another plugin, if any.
    pub(crate) fn item_clash(
        &self,
        generation: &Generation,
        staged: &[ItemEntry],
    ) -> Option<(String, String)> {
        let table = self.items.read();
        staged.iter().find_map(|e| {
            table
                .get(&(e.kind, e.key.clone()))
                .filter(|existing| existing.plugin() != generation.plugin)
                .map(|existing| {
                    (
                        format!("{} {}", e.kind.as_str(), e.key),
                        existing.plugin().to_owned(),
                    )
                })
        })
    }

    /// Puts `staged` in force in place of every item of `generation`'s plugin; the kinds that changed.
    pub(crate) fn swap_items(
        &self,
        generation: &Generation,
        staged: Vec<ItemEntry>,
    ) -> Vec<McpItemKind> {
        let mut table = self.items.write();
        let mut changed: Vec<McpItemKind> = table
            .values()
            .filter(|e| e.plugin() == generation.plugin)
            .map(|e| e.kind)
            .chain(staged.iter().map(|e| e.kind))
            .collect();
        table.retain(|_, e| e.plugin() != generation.plugin);
        for e in staged {
            table.insert((e.kind, e.key.clone()), e);
        }
        changed.sort();
        changed.dedup();
        changed
    }

    /// Takes every item of the retired `generation` out; the kinds that changed.
    pub(crate) fn drop_items(&self, generation: &Arc<Generation>) -> Vec<McpItemKind> {
        let mut table = self.items.write();
        let mut changed: Vec<McpItemKind> = table
            .values()
            .filter(|e| Arc::ptr_eq(e.handler.generation(), generation))
            .map(|e| e.kind)
            .collect();
        table.retain(|_, e| !Arc::ptr_eq(e.handler.generation(), generation));
        changed.sort();
        changed.dedup();
        changed
    }

    /// Tells the list listeners that the list of `kind` changed.
    pub(crate) fn fire_list_changed(&self, kind: McpItemKind) {
        if kind == McpItemKind::Tool {
            self.fire_tools_changed();
            return;
        }
        if kind == McpItemKind::HttpRoute {
            return;
        }
        let callbacks = self.list_changed.lock().clone();
        for c in callbacks {
            c(kind);
        }
    }

    /// Tells the resource listeners that `uri` changed.
    pub(crate) fn fire_resource_updated(&self, uri: &str) {
        let callbacks = self.resource_updated.lock().clone();
        for c in callbacks {
            c(uri);
        }
    }
}
