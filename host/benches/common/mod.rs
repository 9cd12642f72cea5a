//! What the benchmark binaries share: where the release build they measure lives, scratch space.

// Each bench binary compiles this module and uses a part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The cargo profile directory holding the binaries and plugins (a bench runs from its `deps/`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("bench binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<bench>")
        .to_path_buf()
}

/// A fresh scratch directory for one benchmark run.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("taskhost-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("bench scratch dir");
    dir
}

/// `bytes` of a plugin as a rebuild numbered `n` would make them: the same code under another build
/// id (which the host uses to tell builds apart).
pub fn rebuilt(mut bytes: Vec<u8>, n: u32) -> Vec<u8> {
    // An ELF note header: name size 4, descriptor size 20, type NT_GNU_BUILD_ID, name "GNU".
    const NOTE: &[u8] = b"\x04\0\0\0\x14\0\0\0\x03\0\0\0GNU\0";
    let at = bytes
        .windows(NOTE.len())
        .take(4096)
        .position(|w| w == NOTE)
        .expect("the plugin has a GNU build id note in its first 4 KiB")
        + NOTE.len();
    bytes[at..at + 4].copy_from_slice(&n.to_le_bytes());
    bytes
}
