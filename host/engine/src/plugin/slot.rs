//! What the host keeps per plugin file, and how it reports it.

use std::path::PathBuf;
use std::sync::{Arc, Weak};

use super::Generation;
use super::signature::FileSignature;

/// What one plugin file slot holds.
pub(crate) struct Slot {
    pub(crate) name: Option<String>,
    pub(crate) config_json: String,
    pub(crate) next_generation: u64,
    pub(crate) active: Option<Arc<Generation>>,
    pub(crate) retiring: Vec<Weak<Generation>>,
    /// The file as it was at the last successful load.
    pub(crate) last: Option<FileSignature>,
}

impl Slot {
    /// Moves a replaced or unloaded generation to the retiring list, which keeps only the ones still
    /// mapped (so the list does not grow with reload history).
    pub(crate) fn retire(&mut self, old: &Arc<Generation>) {
        self.prune();
        self.retiring.push(Arc::downgrade(old));
    }

    /// Forgets retired generations that have unloaded.
    pub(crate) fn prune(&mut self) {
        self.retiring.retain(|w| w.strong_count() > 0);
    }
}

/// Where a loaded generation is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenerationState {
    /// Serving its plugin's tools.
    Active,
    /// Replaced or unloaded, kept mapped by its live tasks or calls in flight.
    Retiring,
}

impl GenerationState {
    /// `active` or `retiring`, as `taskhost://plugins` shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Retiring => "retiring",
        }
    }
}

impl std::fmt::Display for GenerationState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A generation as reported in `taskhost://plugins`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GenerationInfo {
    /// Its number.
    pub generation: u64,
    /// Serving or retiring.
    pub state: GenerationState,
    /// Its unsettled tasks.
    pub live_tasks: usize,
    /// When it was loaded, in ms since the Unix epoch.
    pub loaded_at_ms: u64,
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
