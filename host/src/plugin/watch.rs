//! Watching plugin files: a debounced watch on each plugin's *directory* (a watch on the file itself
//! dies with cargo's first rebuild, which replaces the file), and a reload when a watched file's
//! content changed. cargo's write pattern (remove, then hardlink) lands in one debounced batch, and
//! the content hash skips batches that changed nothing, so one build gives exactly one reload.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify_debouncer_full::notify::{RecommendedWatcher, RecursiveMode};
use notify_debouncer_full::{DebounceEventResult, Debouncer, RecommendedCache, new_debouncer};

use super::Plugins;

/// The debounce window: measured to give one batch per cargo build (see the hot-reload notes).
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(150);

/// How often the debouncer checks for a quiet window. Its default (a quarter of the window) adds up
/// to 37 ms to every reload; a sleeping thread waking 100 times a second costs next to nothing.
const TICK: Duration = Duration::from_millis(10);

/// Why watching could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch {path}: {source}")]
pub struct WatchError {
    path: PathBuf,
    source: notify_debouncer_full::notify::Error,
}

/// Keeps the watch alive; dropping it stops watching.
pub struct Watch {
    _debouncer: Debouncer<RecommendedWatcher, RecommendedCache>,
}

/// Watches the directories of `files` and reloads a file (as a new generation) when its content
/// changes. A failed reload is logged and leaves the serving generation in place; the next change
/// tries again.
///
/// # Errors
/// [`WatchError`] when a directory cannot be watched.
pub fn watch(
    plugins: Arc<Plugins>,
    files: &[PathBuf],
    debounce: Duration,
) -> Result<Watch, WatchError> {
    let watched: BTreeSet<PathBuf> = files.iter().cloned().collect();
    let targets = watched.clone();
    let handler = move |result: DebounceEventResult| {
        let events = match result {
            Ok(events) => events,
            Err(errors) => {
                for e in errors {
                    tracing::warn!(error = %e, "plugin watch error");
                }
                return;
            }
        };
        let touched: BTreeSet<&PathBuf> = events
            .iter()
            .flat_map(|e| e.event.paths.iter())
            .filter(|p| targets.contains(*p))
            .collect();
        for path in touched {
            if !path.exists() {
                continue; // removed: the next event (the new file) reloads it
            }
            match plugins.load(path, None, true) {
                Ok(Some(g)) => {
                    tracing::info!(plugin = %g.plugin(), generation = g.number(), "reloaded after a change")
                }
                Ok(None) => {
                    tracing::debug!(path = %path.display(), "changed event without new content")
                }
                Err(e) => tracing::error!("{e}"),
            }
        }
    };
    let mut debouncer =
        new_debouncer(debounce, Some(TICK.min(debounce)), handler).map_err(|source| {
            WatchError {
                path: PathBuf::new(),
                source,
            }
        })?;
    let dirs: BTreeSet<PathBuf> = watched
        .iter()
        .map(|f| {
            f.parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf()
        })
        .collect();
    for dir in dirs {
        debouncer
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|source| WatchError {
                path: dir.clone(),
                source,
            })?;
    }
    Ok(Watch {
        _debouncer: debouncer,
    })
}
