//! Settings of the services, apart from how plugins are loaded.

use std::path::PathBuf;

/// How the host's services run their tasks' processes and sessions' calls.
#[derive(Clone, Debug)]
pub struct ServiceOptions {
    /// Where spill files of process output go; `None` puts them in `spill` beside the generation
    /// directory. Must be private, or spills are refused.
    pub spill_dir: Option<PathBuf>,
    /// What all spill files may hold together (`[tasks] spill_budget`).
    pub spill_budget: u64,
    /// The environment policy of every child process.
    pub env: crate::process::env::EnvPolicy,
    /// The `taskhost` binary, whose `keeper` command ends every task process if the host dies
    /// (see [`crate::process::keeper`]); `None` runs without one.
    pub keeper: Option<PathBuf>,
    /// Foreground commands one session may run at once (`[tasks] max_foreground_per_owner`).
    pub max_foreground_per_owner: usize,
    /// The host's durable state (`--state DIR`): task records and kept output; `None` keeps them in
    /// memory only.
    pub state: Option<std::sync::Arc<taskhost_store::Store>>,
    /// How long an owner whose connection was lost (without its bridge's goodbye) is kept for it to
    /// come back (`[host] owner_grace_ms`).
    pub owner_grace: std::time::Duration,
    /// Where each process's bounds come from, by its owner (the configured policies,
    /// [`crate::policy::Policies`]); `None`: every process runs unbounded.
    pub policies: Option<std::sync::Arc<crate::policy::Policies>>,
    /// Process tasks the host runs at once (`[tasks] max_running`); past it a start is queued.
    /// `None`: no host limit.
    pub max_running: Option<u64>,
}

impl Default for ServiceOptions {
    /// Spill files beside the generations, the default budget and environment policy, no keeper, the
    /// default foreground limit.
    fn default() -> Self {
        Self {
            spill_dir: None,
            spill_budget: crate::process::DEFAULT_SPILL_BUDGET,
            env: Default::default(),
            keeper: None,
            max_foreground_per_owner: crate::sessions::DEFAULT_MAX_FOREGROUND,
            state: None,
            owner_grace: crate::owners::DEFAULT_OWNER_GRACE,
            policies: None,
            max_running: None,
        }
    }
}
