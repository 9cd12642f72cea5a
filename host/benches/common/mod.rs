//! What the benchmark binaries share: where the release build they measure lives, scratch space.

// Each bench binary compiles this module and uses a part of it.
#![allow(dead_code)]

pub use taskhost_tests::{Scratch, profile_dir};

/// A fresh scratch directory for one benchmark run, removed when dropped.
pub fn scratch(name: &str) -> Scratch {
    Scratch::new("taskhost-bench", name)
}
