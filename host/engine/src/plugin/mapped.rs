//! Which generation files are loaded in this process: what tells a real unload from a library that
//! stayed loaded.
//!
//! Only executable mappings count. A file mapped read-only is not a loaded library: a Rust panic
//! printing a backtrace (`RUST_BACKTRACE`) maps every loaded object's file read-only to symbolize
//! it, and the panicking library's std keeps those maps cached for its own lifetime.

use std::path::{Path, PathBuf};

/// The generation files under `generation_dir` that this process has mapped executable now (a
/// removed file is listed by its old name), sorted, each once.
pub fn mapped_generations(generation_dir: &Path) -> Vec<PathBuf> {
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return Vec::new();
    };
    let dir = generation_dir.to_string_lossy();
    let mut files: Vec<PathBuf> = maps
        .lines()
        .filter(|line| {
            line.split_whitespace()
                .nth(1)
                .is_some_and(|perms| perms.contains('x'))
        })
        .map(|line| {
            line.split_whitespace()
                .skip(5)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .map(|p| p.trim_end_matches(" (deleted)").to_owned())
        .filter(|p| p.starts_with(dir.as_ref()))
        .map(PathBuf::from)
        .collect();
    files.sort();
    files.dedup();
    files
}
