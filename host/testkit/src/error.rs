//! What can go wrong in a test host.

/// What went wrong in a test host.
#[derive(Debug, thiserror::Error)]
pub enum TestkitError {
    /// The runtime or the private directory could not be made.
    #[error("cannot set up the test host: {0}")]
    Setup(String),
    /// The plugin did not load (the previous generation, if any, keeps serving).
    #[error(transparent)]
    Load(#[from] taskhost_engine::LoadError),
    /// [`TestHost::reload`](crate::TestHost::reload) before any
    /// [`TestHost::load`](crate::TestHost::load).
    #[error("no plugin is loaded")]
    NothingLoaded,
    /// A tool call that was expected to start a task started none.
    #[error("{tool} started no task: {text}")]
    NoTaskStarted {
        /// The tool.
        tool: String,
        /// What it answered.
        text: String,
    },
    /// A registry call failed (unknown task, another session's task, ...).
    #[error(transparent)]
    Registry(#[from] taskhost_registry::RegistryError),
    /// Something did not happen in time.
    #[error("{0}")]
    Timeout(String),
}
