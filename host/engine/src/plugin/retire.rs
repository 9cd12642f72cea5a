//! Retiring a replaced or unloaded generation, and unloading it off the swap path.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Generation;
use super::table::Shared;

/// Retires a generation: its surfaces detach, its listeners go, its instance is disposed and dropped
/// on its own threads. Whatever else holds it (tasks, in-flight calls, workers) keeps it loaded.
pub(crate) fn retire_state(shared: &Shared, generation: &Arc<Generation>) {
    generation.retired.store(true, Ordering::Relaxed);
    let (instance, surfaces, listeners) = {
        let mut s = generation.state();
        s.staged.clear();
        s.staged_items.clear();
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
pub(crate) fn release_off_path(generation: Arc<Generation>) {
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
