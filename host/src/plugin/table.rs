//! The state every generation's host handle reaches: the host's services, and the loader's own
//! tables (the live tools and the completion listeners), each changed for one generation at a time.

use parking_lot::{Mutex, RwLock};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::convert;
use super::generation::{GenState, Generation, ListenerEntry, ToolEntry};
use super::tools;
use crate::services::Services;

/// State every generation's host handle reaches.
pub(crate) struct Shared {
    pub(crate) services: Services,
    pub(crate) tools: RwLock<tools::Table>,
    pub(crate) listeners: Mutex<BTreeMap<u64, ListenerEntry>>,
    pub(crate) keys: AtomicU64,
    pub(crate) tools_changed: Mutex<Vec<Arc<dyn Fn() + Send + Sync>>>,
}

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

    pub(crate) fn remove_tool(&self, generation: &Arc<Generation>, name: &str) {
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
