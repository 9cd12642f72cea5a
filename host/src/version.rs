//! What `taskhost --version` prints: the version, the commit it was built from, and the plugin
//! ABI version a plugin must be built against to load.

/// The host's version (the workspace's).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The commit the binary was built from (`git rev-parse --short HEAD` at build time, with
/// `-dirty` for changes not committed), or `unknown` outside a git checkout.
pub const COMMIT: &str = env!("TASKHOST_COMMIT");

/// `0.1.0 (commit 4d46e8b, plugin ABI 8)`.
pub fn line() -> String {
    format!(
        "{VERSION} (commit {COMMIT}, plugin ABI {})",
        taskhost_abi::ABI_VERSION
    )
}
