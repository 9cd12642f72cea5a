//! The directory watch: a cargo-style rebuild gives exactly one reload; a same-content event none.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::fixtures::*;

/// Replaces `dest` the way cargo does: remove it, then hardlink the new artifact into place.
fn cargo_style_replace(new_artifact: &Path, dest: &Path) {
    std::fs::remove_file(dest).unwrap();
    std::fs::hard_link(new_artifact, dest).unwrap();
}

/// A changed build of the probe: the same library with bytes appended (ignored by the loader).
fn rebuilt(f: &Fixture, n: u8) -> std::path::PathBuf {
    let staged = f.dir.join(format!("deps-{n}.so"));
    let mut bytes = std::fs::read(built("taskhost_test_probe")).unwrap();
    bytes.extend_from_slice(&[n; 64]);
    std::fs::write(&staged, bytes).unwrap();
    set_mode(&staged, 0o755);
    staged
}

fn active_generation(f: &Fixture) -> u64 {
    f.host.plugins().info()[0]
        .generations
        .iter()
        .find(|g| g.state == "active")
        .map_or(0, |g| g.generation)
}

#[test]
fn a_cargo_style_rebuild_under_the_directory_watch_gives_exactly_one_reload() {
    let f = Fixture::new("watch");
    let path = f.load("taskhost_test_probe", "probe_watch");
    let _watch = f.host.watch(Duration::from_millis(100)).expect("watch");
    for (round, expected) in [(1u8, 2u64), (2, 3)] {
        let staged = rebuilt(&f, round);
        cargo_style_replace(&staged, &path);
        assert!(
            eventually(Duration::from_secs(5), || active_generation(&f) == expected),
            "round {round}"
        );
        std::thread::sleep(Duration::from_millis(400));
        assert_eq!(
            active_generation(&f),
            expected,
            "exactly one reload for round {round}"
        );
        assert_eq!(f.call("probe_calls", "", json!({})), "0");
    }
}

#[test]
fn a_touch_without_new_content_does_not_reload() {
    let f = Fixture::new("watch-same");
    let path = f.load("taskhost_test_probe", "probe_watch_same");
    let _watch = f.host.watch(Duration::from_millis(100)).expect("watch");
    let same = f.dir.join("same.so");
    std::fs::copy(&path, &same).unwrap();
    cargo_style_replace(&same, &path);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(active_generation(&f), 1);
}
