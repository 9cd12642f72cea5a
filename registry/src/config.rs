//! Registry settings.

use std::time::Duration;

use crate::error::{ConfigError, MAX_SAFE_INTEGER};

/// Settings for a [`crate::Registry`]. Built through [`RegistryConfig::new`] and its checked setters,
/// so a value in hand is always valid.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryConfig {
    max_tasks_per_owner: u64,
    teardown_grace: Duration,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl RegistryConfig {
    /// Default per-owner limit on live (running or stopping) tasks.
    pub const DEFAULT_MAX_TASKS_PER_OWNER: u64 = 10;
    /// Default time a teardown waits for a cancelled producer to settle before force-failing it.
    pub const DEFAULT_TEARDOWN_GRACE: Duration = Duration::from_secs(10);

    /// The defaults: 10 live tasks per owner, 10 s teardown grace.
    pub fn new() -> Self {
        Self {
            max_tasks_per_owner: Self::DEFAULT_MAX_TASKS_PER_OWNER,
            teardown_grace: Self::DEFAULT_TEARDOWN_GRACE,
        }
    }

    /// Sets the per-owner limit on live tasks (unowned tasks share one bucket).
    ///
    /// # Errors
    /// [`ConfigError::TaskLimit`] unless `1 <= limit <= 2^53-1`.
    pub fn with_max_tasks_per_owner(mut self, limit: u64) -> Result<Self, ConfigError> {
        if limit == 0 || limit > MAX_SAFE_INTEGER {
            return Err(ConfigError::TaskLimit(limit));
        }
        self.max_tasks_per_owner = limit;
        Ok(self)
    }

    /// Sets how long a teardown waits, after a cancel returned, for the producer to settle.
    ///
    /// # Errors
    /// [`ConfigError::TeardownGrace`] for a zero duration.
    pub fn with_teardown_grace(mut self, grace: Duration) -> Result<Self, ConfigError> {
        if grace.is_zero() {
            return Err(ConfigError::TeardownGrace);
        }
        self.teardown_grace = grace;
        Ok(self)
    }

    /// The per-owner limit on live tasks.
    pub fn max_tasks_per_owner(&self) -> u64 {
        self.max_tasks_per_owner
    }

    /// The teardown grace.
    pub fn teardown_grace(&self) -> Duration {
        self.teardown_grace
    }
}
