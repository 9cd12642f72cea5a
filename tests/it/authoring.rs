//! Plugins from outside this repository: `taskhost new-plugin` writes a crate that builds, passes its
//! own reload tests with the testkit, and loads in a real host.

use std::time::Duration;

use crate::fixtures::*;
use crate::mcp::binary;

/// Proves: the crate `taskhost new-plugin` writes builds and passes its own testkit tests outside
/// the workspace (with only this checkout's `abi/` and `host/testkit` as path dependencies).
#[test]
fn a_new_plugin_builds_and_passes_its_own_tests_outside_the_workspace() {
    let dir = scratch("new-plugin");
    let out = output_within(
        std::process::Command::new(binary())
            .args(["new-plugin", "made-here", "--dir"])
            .arg(dir.path()),
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = dir.join("made-here");
    for file in ["Cargo.toml", "src/lib.rs", "tests/reload.rs", "README.md"] {
        assert!(root.join(file).is_file(), "{file} missing");
    }
    // The workspace's lock pins the versions already in the cargo cache, so the build needs no
    // network; the workspace's target directory reuses what was compiled.
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::copy(workspace.join("Cargo.lock"), root.join("Cargo.lock")).unwrap();
    let target = artifacts().parent().unwrap().to_path_buf();
    let tested = output_within(
        std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["test", "--offline", "--quiet"])
            .current_dir(&root)
            .env("CARGO_TARGET_DIR", &target),
        Duration::from_secs(20 * 60),
    );
    let stdout = String::from_utf8_lossy(&tested.stdout);
    assert!(
        tested.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&tested.stderr)
    );
    assert!(stdout.contains("2 passed"), "{stdout}");
}

/// Proves: a bad name and a taken path are refused with exit code 2 and a clear message, writing
/// nothing.
#[test]
fn new_plugin_refuses_a_bad_name_and_a_taken_path() {
    let dir = scratch("new-plugin-refusals");
    let run = |name: &str| {
        output_within(
            std::process::Command::new(binary())
                .args(["new-plugin", name, "--dir"])
                .arg(dir.path()),
            Duration::from_secs(30),
        )
    };
    let bad = run("Bad Name");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid plugin name \"Bad Name\""));
    std::fs::create_dir(dir.join("taken")).unwrap();
    let taken = run("taken");
    assert_eq!(taken.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&taken.stderr).contains("already exists"));
    assert_eq!(std::fs::read_dir(dir.join("taken")).unwrap().count(), 0);
}
