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

/// A changed build of the probe, staged where cargo would put it.
fn rebuilt(f: &Fixture, n: u8) -> std::path::PathBuf {
    let staged = f.dir.join(format!("deps-{n}.so"));
    std::fs::write(&staged, rebuilt_bytes("taskhost_test_probe", n.into())).unwrap();
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
fn a_file_of_the_same_build_does_not_reload() {
    let f = Fixture::new("watch-same");
    let path = f.load("taskhost_test_probe", "probe_watch_same");
    let _watch = f.host.watch(Duration::from_millis(100)).expect("watch");
    let same = f.dir.join("same.so");
    std::fs::copy(&path, &same).unwrap();
    cargo_style_replace(&same, &path);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(active_generation(&f), 1, "a copy of the same bytes");
    // Bytes appended past the end of the image (the build id unchanged): the same code.
    let padded = f.dir.join("padded.so");
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0; 64]);
    std::fs::write(&padded, &bytes).unwrap();
    set_mode(&padded, 0o755);
    cargo_style_replace(&padded, &path);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(active_generation(&f), 2, "another size is a change");
    let repadded = f.dir.join("repadded.so");
    *bytes.last_mut().unwrap() = 1;
    std::fs::write(&repadded, &bytes).unwrap();
    set_mode(&repadded, 0o755);
    cargo_style_replace(&repadded, &path);
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(
        active_generation(&f),
        2,
        "the same size and build id is the same build"
    );
}
