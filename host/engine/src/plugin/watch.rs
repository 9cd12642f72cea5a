//! Watching plugin files: a watch on each plugin's *directory* (a watch on the file itself dies with
//! cargo's first rebuild, which replaces the file), and a reload when a watched file's content
//! changed.
//!
//! A complete file loads at once, with no waiting window: one closed after writing (`IN_CLOSE_WRITE`),
//! renamed into place, or created as a hard link of a finished file (cargo's pattern: remove, then
//! link the fresh build from `deps/`). A file still being written is never loaded on its own events:
//! its writes only arm a fallback deadline (`window` after the last event), for writers that never
//! close it; the loader's ELF check refuses a partial file even then. The content check skips events
//! that changed nothing, so one build gives exactly one reload.
//!
//! A plugin *directory* is watched as a whole: a library that appears in it is loaded, one removed
//! from it (and not back within the window) is unloaded (its tools go; its tasks live on).

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

/// What the watch covers: plugin files, and plugin directories (every `*.so` in them).
#[derive(Clone, Debug, Default)]
pub struct Targets {
    files: BTreeSet<PathBuf>,
    dirs: BTreeSet<PathBuf>,
}

impl Targets {
    /// The files `files` and every library in the directories `dirs`.
    pub fn new(files: &[PathBuf], dirs: &[PathBuf]) -> Self {
        Self {
            files: files.iter().cloned().collect(),
            dirs: dirs.iter().cloned().collect(),
        }
    }

    fn contains(&self, path: &Path) -> bool {
        self.files.contains(path) || self.in_dir(path)
    }

    /// True for a library in a watched plugin directory.
    fn in_dir(&self, path: &Path) -> bool {
        path.extension().is_some_and(|e| e == "so")
            && path.parent().is_some_and(|d| self.dirs.contains(d))
    }

    fn watched_dirs(&self) -> BTreeSet<PathBuf> {
        let parents = self.files.iter().map(|f| {
            f.parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf()
        });
        parents.chain(self.dirs.iter().cloned()).collect()
    }
}

/// The libraries in a plugin directory, sorted (what `serve --plugin-dir` loads at start).
pub fn libraries_in(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "so") && p.is_file())
        .collect();
    found.sort();
    Ok(found)
}

/// Watches the directories of `targets` and reloads a file (as a new generation) as soon as it is
/// complete (or `window` after its last event, for a writer that never closes it), when its content
/// changed. A failed reload is logged and leaves the serving generation in place; the next change
/// tries again.
///
/// # Errors
/// [`WatchError`] when the watcher cannot start, its thread cannot be spawned, or a directory cannot
/// be watched.
pub fn watch(
    plugins: Arc<Plugins>,
    targets: Targets,
    window: Duration,
) -> Result<Watch, WatchError> {
    let (tx, rx) = channel();
    let mut watcher = notify::recommended_watcher(move |event| {
        let _ = tx.send(event);
    })
    .map_err(|source| WatchError {
        path: PathBuf::new(),
        source,
    })?;
    for dir in targets.watched_dirs() {
        watcher
            .watch(&dir, RecursiveMode::NonRecursive)
            .map_err(|source| WatchError {
                path: dir.clone(),
                source,
            })?;
    }
    std::thread::Builder::new()
        .name("taskhost-watch".into())
        .spawn(move || {
            let in_dirs = targets.clone();
            debounce_loop(&rx, &targets, window, |path| {
                reload(&plugins, path, in_dirs.in_dir(path))
            })
        })
        .map_err(|e| WatchError {
            path: PathBuf::new(),
            source: notify::Error::io(e),
        })?;
    Ok(Watch { _watcher: watcher })
}

/// What an event says of a file.
#[derive(Debug, PartialEq, Eq)]
enum Seen {
    /// Nothing: opened or read.
    Nothing,
    /// The file is complete now: load it at once.
    Complete,
    /// It changed and may still be written: wait for it to complete (or the fallback window).
    Changing,
}

fn classify(event: &Event, path: &Path) -> Seen {
    use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RenameMode};
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => Seen::Complete,
        EventKind::Access(_) => Seen::Nothing,
        EventKind::Modify(ModifyKind::Name(RenameMode::To)) => Seen::Complete,
        // The pairing of a rename's two halves, sent after its `To` (always sent for the new name):
        // it can arrive late, while the next write of the file is under way, so it is no news.
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => Seen::Nothing,
        // A hard link of a finished file (cargo links its fresh build from deps/) is complete when
        // it appears; a file created empty is being written.
        EventKind::Create(CreateKind::File | CreateKind::Any) if linked(path) => Seen::Complete,
        _ => Seen::Changing,
    }
}

/// True when the file has more than one name: a hard link of a file written elsewhere.
fn linked(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file() && m.nlink() > 1)
}

/// Collects events for `targets` and calls `fire` for a file as soon as it is complete, or `window`
/// after its last event when it never completes; returns when the watcher (the sender) is gone.
fn debounce_loop(
    events: &Receiver<notify::Result<Event>>,
    targets: &Targets,
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
            Ok(Ok(event)) => {
                let now = Instant::now();
                for path in event.paths.iter().filter(|p| targets.contains(p)) {
                    match classify(&event, path) {
                        // Opening or reading a file changes nothing (and the host's own reads of a
                        // plugin file would otherwise schedule a needless check after every reload).
                        Seen::Nothing => {}
                        Seen::Complete => {
                            pending.remove(path);
                            fire(path);
                        }
                        Seen::Changing => {
                            pending.insert(path.clone(), now);
                        }
                    }
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

/// Loads a changed file; a library gone from a plugin directory is unloaded (a watched file that is
/// gone is left serving: its next file reloads it).
fn reload(plugins: &Plugins, path: &Path, in_plugin_dir: bool) {
    if !path.exists() {
        if in_plugin_dir && plugins.paths().iter().any(|p| p == path) {
            plugins.unload(path);
            tracing::info!(path = %path.display(), "unloaded: removed from the plugin directory");
        }
        return;
    }
    match plugins.load(path, None, true) {
        Ok(Some(g)) => {
            tracing::info!(plugin = %g.plugin(), generation = g.number(), "loaded after a change")
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
            &Targets::new(&[target], &[]),
            Duration::from_millis(10),
            |_| fired += 1,
        );
        let _ = sender.join();
        assert_eq!(fired, 0);
    }

    #[test]
    fn a_closed_or_renamed_file_fires_at_once_and_a_write_waits_for_it() {
        use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
        let (tx, rx) = channel();
        let target = PathBuf::from("/plugins/libbash.so");
        let targets = Targets::new(std::slice::from_ref(&target), &[]);
        let window = Duration::from_secs(5);
        let kinds = [
            EventKind::Modify(ModifyKind::Data(notify::event::DataChange::Any)),
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
        ];
        let sender = std::thread::spawn({
            let target = target.clone();
            move || {
                for kind in kinds {
                    let _ = tx.send(Ok(Event::new(kind).add_path(target.clone())));
                    std::thread::sleep(Duration::from_millis(30));
                }
            }
        });
        let started = Instant::now();
        let mut fired = Vec::new();
        debounce_loop(&rx, &targets, window, |_| fired.push(started.elapsed()));
        let _ = sender.join();
        assert_eq!(
            fired.len(),
            2,
            "the close and the rename, not the write: {fired:?}"
        );
        assert!(
            fired.iter().all(|t| *t < Duration::from_secs(1)),
            "complete files wait for no window: {fired:?}"
        );
    }

    #[test]
    fn a_library_in_a_plugin_directory_is_a_target_and_other_files_are_not() {
        let dir = PathBuf::from("/plugins");
        let targets = Targets::new(&[], std::slice::from_ref(&dir));
        assert!(targets.contains(&dir.join("libnew.so")));
        assert!(!targets.contains(&dir.join("notes.txt")));
        assert!(!targets.contains(Path::new("/elsewhere/libx.so")));
    }

    #[test]
    fn a_burst_of_events_fires_once_a_window_after_the_last_and_others_are_ignored() {
        let (tx, rx) = channel();
        let target = PathBuf::from("/plugins/libbash.so");
        let targets = Targets::new(std::slice::from_ref(&target), &[]);
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
