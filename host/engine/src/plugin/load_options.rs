//! How plugin files are loaded.

use std::path::PathBuf;

/// Options for loading plugins; how their tasks run is [`crate::services::ServiceOptions`].
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Where generation files go: a directory private to this user (created 0700 if missing; a load
    /// into a directory others can write or enter is refused). [`crate::rundir::RunDir`] makes one.
    pub generation_dir: PathBuf,
    /// Skip the trust check.
    pub allow_untrusted: bool,
}

impl LoadOptions {
    /// Options with generation files in `generation_dir` and the trust check on.
    pub fn new(generation_dir: PathBuf) -> Self {
        Self {
            generation_dir,
            allow_untrusted: false,
        }
    }
}
