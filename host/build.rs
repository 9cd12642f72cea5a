//! Exports the binary's `pthread_create` to the dynamic linker, so plugins' calls bind to it (see
//! `src/plugin/own_threads.rs`), and records the commit the binary is built from
//! (`TASKHOST_COMMIT`, for `taskhost --version`).

use std::process::Command;

fn main() {
    println!("cargo:rustc-link-arg-bin=taskhost=-Wl,--export-dynamic-symbol=pthread_create");
    println!("cargo:rustc-env=TASKHOST_COMMIT={}", commit());
}

/// The short hash of HEAD (with `-dirty` when the tree has changes), or `TASKHOST_COMMIT` from the
/// environment (a build from a tarball), or `unknown`. Reruns when HEAD moves.
fn commit() -> String {
    println!("cargo:rerun-if-env-changed=TASKHOST_COMMIT");
    if let Ok(given) = std::env::var("TASKHOST_COMMIT") {
        return given;
    }
    for file in ["HEAD", "index"] {
        if let Some(path) = git(&["rev-parse", "--git-path", file]) {
            println!("cargo:rerun-if-changed={path}");
        }
    }
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"])
        && let Some(path) = git(&["rev-parse", "--git-path", &reference])
    {
        println!("cargo:rerun-if-changed={path}");
    }
    // Source changes (the `-dirty` mark) are seen through the files cargo tracks for the package.
    println!("cargo:rerun-if-changed=src");
    let Some(hash) = git(&["rev-parse", "--short=12", "HEAD"]) else {
        return "unknown".to_owned();
    };
    let dirty = Command::new("git")
        .args(["diff", "--quiet", "HEAD", "--"])
        .status()
        .is_ok_and(|s| s.code() == Some(1));
    if dirty { format!("{hash}-dirty") } else { hash }
}

/// `git ARGS`' first line, when it succeeds.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let line = text.lines().next()?.trim().to_owned();
    (out.status.success() && !line.is_empty()).then_some(line)
}
