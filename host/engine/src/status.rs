//! The host as people watch it: its plugins with their generations and live tasks, and its health
//! (live tasks, threads, descriptors, memory, keeper, store), as plugins read it through
//! [`taskhost_abi::HostApi::host_status_json`].

use std::sync::Weak;

use serde_json::{Value, json};

use crate::plugin::Plugins;
use crate::services::Services;

/// When the process started, for its uptime.
static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Installs the status source of `plugins`' host handles; call once the host is built.
pub(crate) fn install(plugins: &std::sync::Arc<Plugins>, services: Services) {
    STARTED.get_or_init(std::time::Instant::now);
    let weak: Weak<Plugins> = std::sync::Arc::downgrade(plugins);
    plugins.set_status_source(std::sync::Arc::new(move || {
        let mut plugins = weak
            .upgrade()
            .map_or_else(|| json!({"plugins": []}), |p| plugins_json(&p, true));
        count_live(&mut plugins, &services.registry.live_by_kind());
        json!({"plugins": plugins["plugins"], "health": health(&services)})
    }));
}

/// The plugin table as `taskhost://plugins` serves it: each plugin's name and generations, and,
/// with `paths`, the file it was loaded from (the host's own layout, for its local users alone).
pub fn plugins_json(plugins: &crate::plugin::Plugins, paths: bool) -> Value {
    let plugins: Vec<Value> = plugins
        .info()
        .into_iter()
        .map(|p| {
            let generations: Vec<Value> = p
                .generations
                .iter()
                .map(|g| json!({"generation": g.generation, "state": g.state.as_str(), "live_tasks": g.live_tasks, "loaded_at_ms": g.loaded_at_ms}))
                .collect();
            let mut plugin = json!({"name": p.name, "generations": generations});
            if paths {
                plugin["path"] = json!(p.path.display().to_string());
            }
            plugin
        })
        .collect();
    json!({"plugins": plugins})
}

/// Gives each plugin of `plugins` (as [`plugins_json`] makes them) its `live_tasks`: the unsettled
/// tasks of its kind (a producer declares its tasks with its name as their kind: `bash`, `slurm`,
/// `subagent`), or, when more, those its generations hold. A generation holds only the tasks
/// whose hooks are its own: the host runs a process, subagent or external task itself (so it
/// never keeps a plugin loaded), and its producer's generations count none of them.
fn count_live(plugins: &mut Value, by_kind: &std::collections::BTreeMap<String, usize>) {
    let Some(list) = plugins["plugins"].as_array_mut() else {
        return;
    };
    for plugin in list {
        let held: u64 = plugin["generations"].as_array().map_or(0, |g| {
            g.iter().filter_map(|g| g["live_tasks"].as_u64()).sum()
        });
        let of_kind = plugin["name"]
            .as_str()
            .and_then(|name| by_kind.get(name))
            .map_or(0, |n| *n as u64);
        plugin["live_tasks"] = json!(held.max(of_kind));
    }
}

/// Live tasks, threads, descriptors, resident memory, the keeper's pid, the store's size and, once
/// its database was removed under it, why (`store_lost`).
fn health(services: &Services) -> Value {
    let count = |dir: &str| std::fs::read_dir(dir).map_or(0, Iterator::count);
    let rss_bytes = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096);
    let store_bytes = services.state.as_ref().map_or(0, |s| {
        std::fs::read_dir(s.held_dir().through())
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().starts_with("tasks.db"))
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum::<u64>()
            })
            .unwrap_or(0)
    });
    let uptime_ms = STARTED.get().map_or(0, |s| {
        u64::try_from(s.elapsed().as_millis()).unwrap_or(u64::MAX)
    });
    json!({
        "tasks_live": services.registry.stats().live,
        "threads": count("/proc/self/task"),
        "descriptors": count("/proc/self/fd"),
        "rss_bytes": rss_bytes,
        "keeper_pid": services.processes.keeper_pid(),
        "store_bytes": store_bytes,
        "store_lost": services.state.as_ref().and_then(|s| s.lost()),
        "uptime_ms": uptime_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plugins_live_tasks_count_those_the_host_runs_for_it() {
        let mut plugins = json!({"plugins": [
            {"name": "bash", "generations": [{"generation": 1, "live_tasks": 0}]},
            {"name": "probe", "generations": [{"live_tasks": 2}, {"live_tasks": 1}]},
            {"name": "web", "generations": [{"live_tasks": 0}]},
        ]});
        let by_kind = std::collections::BTreeMap::from([
            ("bash".to_owned(), 3),
            ("probe-kind".to_owned(), 3),
        ]);
        count_live(&mut plugins, &by_kind);
        let live: Vec<&Value> = plugins["plugins"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| &p["live_tasks"])
            .collect();
        assert_eq!(live, [&json!(3), &json!(3), &json!(0)]);
    }
}
