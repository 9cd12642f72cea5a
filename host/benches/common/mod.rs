//! What the benchmark binaries share: where the release build they measure lives, scratch space.

// Each bench binary compiles this module and uses a part of it.
#![allow(dead_code)]

use std::path::PathBuf;

pub use taskhost_tests::profile_dir;

/// A fresh scratch directory for one benchmark run.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("taskhost-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bench scratch dir");
    dir
}
