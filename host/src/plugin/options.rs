//! How plugins are loaded and their processes run.

use std::path::PathBuf;

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
    /// What all spill files may hold together (`[tasks] spill_budget`).
    pub spill_budget: u64,
    /// The environment policy of every child process.
    pub env: crate::process::env::EnvPolicy,
    /// The `taskhost` binary, whose `keeper` command ends every task process if the host dies
    /// (see [`crate::process::keeper`]); `None` runs without one.
    pub keeper: Option<PathBuf>,
    /// Foreground commands one session may run at once (`[tasks] max_foreground_per_owner`,
    /// [`crate::sessions::DEFAULT_MAX_FOREGROUND`] by default).
    pub max_foreground_per_owner: usize,
}

impl LoadOptions {
    /// Options with generation files in `generation_dir`: the trust check on, spill files beside
    /// the generations, the default environment policy, no keeper, the default foreground limit.
    pub fn new(generation_dir: PathBuf) -> Self {
        Self {
            generation_dir,
            allow_untrusted: false,
            spill_dir: None,
            spill_budget: crate::process::DEFAULT_SPILL_BUDGET,
            env: Default::default(),
            keeper: None,
            max_foreground_per_owner: crate::sessions::DEFAULT_MAX_FOREGROUND,
        }
    }
}
