//! The engine's side of the house (`host/engine`, and the testkit a plugin author's tests build on)
//! reaches none of the edges' crates: HTTP, TLS, MCP and the command line belong to `host/` (the
//! `taskhost` crate), so a new plugin's first `cargo test` compiles none of them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The crates only the edges may depend on, and the edges' own crate.
pub const EDGE_CRATES: &[&str] = &[
    "taskhost",
    "axum",
    "hyper",
    "hyper-util",
    "tokio-rustls",
    "rustls",
    "rustls-pki-types",
    "clap",
    "rmcp",
];

/// The crates kept on the engine's side, as folders from the workspace root.
pub const ENGINE_SIDE: &[&str] = &["host/engine", "host/testkit"];

/// Every `[dependencies]` name reachable from the crate at `start` through the workspace's own
/// crates (those `[workspace.dependencies]` names with a path), each with the folder of the crate
/// whose manifest names it.
pub fn reach(root: &Path, start: &str) -> Vec<(String, String)> {
    let paths = own_crates(root);
    let mut seen = BTreeSet::new();
    let mut stack = vec![start.to_string()];
    let mut found = Vec::new();
    while let Some(dir) = stack.pop() {
        if !seen.insert(dir.clone()) {
            continue;
        }
        for dep in crate::dependencies(&root.join(&dir).join("Cargo.toml")) {
            if let Some(path) = paths.get(&dep) {
                stack.push(path.clone());
            }
            found.push((dir.clone(), dep));
        }
    }
    found
}

/// The workspace's own crates: name to folder, from `[workspace.dependencies]`.
fn own_crates(root: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    let manifest: toml::Table = text.parse().unwrap_or_default();
    manifest
        .get("workspace")
        .and_then(|w| w.get("dependencies"))
        .and_then(toml::Value::as_table)
        .into_iter()
        .flatten()
        .filter_map(|(name, value)| {
            let path = value.get("path")?.as_str()?;
            Some((name.clone(), path.to_string()))
        })
        .collect()
}
