//! Watching plugin files: a watch on each plugin's *directory* (a watch on the file itself dies with
//! cargo's first rebuild, which replaces the file), debounced per file, and a reload when a watched
//! file's content changed. cargo's write pattern (remove, then hardlink) lands in one debounced batch,
//! and the content check skips batches that changed nothing, so one build gives exactly one reload.
//!
//! The debounce is a deadline, not a tick: a file reloads exactly one window after its last event
//! (a ticking debouncer adds up to a tick to every reload, 5 ms on average at a 10 ms tick, and wakes
//! an idle host a hundred times a second).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use notify::{Event, EventKind, RecommendedWatcher, RecursiveMode, Watcher};

use super::Plugins;

/// The debounce window: measured to give one batch per cargo build (see the hot-reload notes).
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_millis(150);

/// Why watching could not start.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch {}: {source}", path.display())]
pub struct WatchError {
    path: PathBuf,
    source: notify::Error,
}

/// Keeps the watch alive; dropping it stops watching (the debounce thread ends with the watcher).
pub struct Watch {
    _watcher: RecommendedWatcher,
}

/// Watches the directories of `files` and reloads a file (as a new generation) `debounce` after the
/// last change to it, when its content changed. A failed reload is logged and leaves the serving
/// generation in place; the next change tries again.
///
/// # Errors
/// [`WatchError`] when the watcher cannot start, its thread cannot be spawned, or a directory cannot
/// be watched.
pub fn watch(
    plugins: Arc<Plugins>,
    files: &[PathBuf],
    debounce: Duration,
) -> Result<Watch, WatchError> {
    let targets: BTreeSet<PathBuf> = files.iter().cloned().collect();
    let (tx, rx) = channel();
    let mut watcher = notify::recommended_watcher(move |event| {
        let _ = tx.send(event);
    })
    .map_err(|source| WatchError {
        path: PathBuf::new(),
        source,
    })?;
    let dirs: BTreeSet<PathBuf> = targets
        .iter()
        .map(|f| {
            f.parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf()
        })
        .collect();
    for dir in dirs {
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|source| WatchError {
                path: dir.clone(),
                source,
            })?;
    }
    std::thread::Builder::new()
        .name("taskhost-watch".into())
        .spawn(move || debounce_loop(&rx, &targets, debounce, |path| reload(&plugins, path)))
        .map_err(|e| WatchError {
            path: PathBuf::new(),
            source: notify::Error::io(e),
        })?;
    Ok(Watch { _watcher: watcher })
}

/// Collects events for `targets` and calls `fire` for each file once `window` has passed since its
/// last event; returns when the watcher (the sender) is gone.
fn debounce_loop(
    events: &Receiver<notify::Result<Event>>,
    targets: &BTreeSet<PathBuf>,
    window: Duration,
    mut fire: impl FnMut(&Path),
) {
    let mut pending: BTreeMap<PathBuf, Instant> = BTreeMap::new();
    loop {
        let next = pending.values().min().map(|&last| last + window);
        let received = match next {
            Some(deadline) => {
                events.recv_timeout(deadline.saturating_duration_since(Instant::now()))
            }
            None => events.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        match received {
            // Opening or reading a file changes nothing (and the host's own reads of a plugin file
            // would otherwise schedule a needless check after every reload).
            Ok(Ok(event)) if matches!(event.kind, EventKind::Access(_)) => {}
            Ok(Ok(event)) => {
                let now = Instant::now();
                for path in event.paths.into_iter().filter(|p| targets.contains(p)) {
                    pending.insert(path, now);
                }
            }
            Ok(Err(e)) => tracing::warn!(error = %e, "plugin watch error"),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let now = Instant::now();
        let due: Vec<PathBuf> = pending
            .iter()
            .filter(|&(_, &last)| now >= last + window)
            .map(|(p, _)| p.clone())
            .collect();
        for path in due {
            pending.remove(&path);
            fire(&path);
        }
    }
}

fn reload(plugins: &Plugins, path: &Path) {
    if !path.exists() {
        return; // removed: the next event (the new file) reloads it
    }
    match plugins.load(path, None, true) {
        Ok(Some(g)) => {
            tracing::info!(plugin = %g.plugin(), generation = g.number(), "reloaded after a change")
        }
        Ok(None) => tracing::debug!(path = %path.display(), "changed event without new content"),
        Err(e) => tracing::error!("{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(path: &Path) -> notify::Result<Event> {
        Ok(Event::new(notify::EventKind::Any).add_path(path.to_path_buf()))
    }

    #[test]
    fn opening_a_file_is_not_a_change() {
        let (tx, rx) = channel();
        let target = PathBuf::from("/plugins/libbash.so");
        let opened = Event::new(EventKind::Access(notify::event::AccessKind::Open(
            notify::event::AccessMode::Any,
        )))
        .add_path(target.clone());
        // The sender outlives the window, so an open taken for a change would fire.
        let sender = std::thread::spawn(move || {
            let _ = tx.send(Ok(opened));
            std::thread::sleep(Duration::from_millis(60));
        });
        let mut fired = 0;
        debounce_loop(
            &rx,
            &BTreeSet::from([target]),
            Duration::from_millis(10),
            |_| fired += 1,
        );
        let _ = sender.join();
        assert_eq!(fired, 0);
    }

    #[test]
    fn a_burst_of_events_fires_once_a_window_after_the_last_and_others_are_ignored() {
        let (tx, rx) = channel();
        let target = PathBuf::from("/plugins/libbash.so");
        let targets = BTreeSet::from([target.clone()]);
        let window = Duration::from_millis(40);
        let sender = std::thread::spawn({
            let target = target.clone();
            move || {
                let mut last = Instant::now();
                for _ in 0..3 {
                    last = Instant::now();
                    let _ = tx.send(event(&target));
                    let _ = tx.send(event(Path::new("/plugins/other.so")));
                    std::thread::sleep(Duration::from_millis(10));
                }
                std::thread::sleep(Duration::from_millis(120));
                last
            }
        });
        let mut fired = Vec::new();
        debounce_loop(&rx, &targets, window, |p| {
            fired.push((p.to_path_buf(), Instant::now()))
        });
        let last = sender.join().unwrap_or_else(|_| Instant::now());
        assert_eq!(fired.len(), 1, "{fired:?}");
        assert_eq!(fired[0].0, target);
        assert!(
            fired[0].1 >= last + window,
            "fired before the window closed"
        );
    }
}
