//! The directory watch: a cargo-style rebuild gives exactly one reload; a same-content event none.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use taskhost::plugin::GenerationState;

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
        .find(|g| g.state == GenerationState::Active)
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
    assert!(
        eventually(Duration::from_secs(10), || active_generation(&f) == 2),
        "another size is a change"
    );
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

/// Proves: a complete file loads at once, with no waiting window (the fallback window here is 30 s):
/// a hard link made the way cargo does, a file renamed into place, and a file written in place and
/// closed.
#[test]
fn a_complete_file_loads_at_once_without_a_window() {
    let f = Fixture::new("watch-instant");
    let path = f.load("taskhost_test_probe", "probe_watch_instant");
    let _watch = f.host.watch(Duration::from_secs(30)).expect("watch");
    let within = Duration::from_secs(3);
    cargo_style_replace(&rebuilt(&f, 1), &path);
    assert!(
        eventually(within, || active_generation(&f) == 2),
        "a hard link"
    );
    let staged = rebuilt(&f, 2);
    std::fs::rename(&staged, &path).unwrap();
    assert!(
        eventually(within, || active_generation(&f) == 3),
        "a rename"
    );
    std::fs::write(&path, rebuilt_bytes("taskhost_test_probe", 3)).unwrap();
    assert!(
        eventually(within, || active_generation(&f) == 4),
        "a write, closed"
    );
}

/// Proves: a file still being written (open, half of it there) is never loaded, however long the
/// writer pauses within the window; it loads once, when the writer closes it. The file is the loaded
/// plugin itself, truncated and rewritten in place: the serving generation is a copy of its own, so
/// its code is untouched (while the loader hard-linked generations, this crashed the host).
#[test]
fn a_file_still_being_written_is_never_loaded() {
    use std::io::Write;
    let f = Fixture::new("watch-partial");
    let path = f.load("taskhost_test_probe", "probe_watch_partial");
    let _watch = f.host.watch(Duration::from_secs(30)).expect("watch");
    let bytes = rebuilt_bytes("taskhost_test_probe", 7);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    file.write_all(&bytes[..bytes.len() / 2]).unwrap();
    file.flush().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(active_generation(&f), 1, "half a file was loaded");
    assert_eq!(f.host.plugins().info()[0].generations.len(), 1);
    file.write_all(&bytes[bytes.len() / 2..]).unwrap();
    drop(file);
    assert!(eventually(Duration::from_secs(3), || active_generation(&f) == 2));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(active_generation(&f), 2, "one reload for one write");
}

/// Proves: in a watched plugin directory, a library that appears is loaded, and one removed is
/// unloaded (its tools go) while a task it started lives on, readable and settling.
#[test]
fn a_plugin_directory_loads_what_appears_and_unloads_what_is_removed() {
    let f = Fixture::new("plugin-dir");
    f.load("taskhost_test_surface", "surface_plugin_dir");
    f.host.sessions().open("s");
    let dir = f.dir.join("plugins");
    std::fs::create_dir(&dir).unwrap();
    set_mode(&dir, 0o700);
    let _watch = f
        .host
        .watch_with_dirs(Duration::from_millis(200), std::slice::from_ref(&dir))
        .expect("watch");
    let tools = || -> Vec<String> {
        f.host
            .plugins()
            .tools()
            .into_iter()
            .map(|t| t.name)
            .collect()
    };
    assert!(!tools().contains(&"probe_start".to_owned()));
    let staged = f.dir.join("staged.so");
    std::fs::copy(built("taskhost_test_probe"), &staged).unwrap();
    set_mode(&staged, 0o755);
    let placed = dir.join("libprobe_in_dir.so");
    std::fs::rename(&staged, &placed).unwrap();
    assert!(
        eventually(Duration::from_secs(3), || tools()
            .contains(&"probe_start".to_owned())),
        "the new library was not loaded"
    );
    let id = f.start_probe("s", json!({"lines": 100, "interval_ms": 10}));
    std::fs::remove_file(&placed).unwrap();
    assert!(
        eventually(Duration::from_secs(3), || !tools()
            .contains(&"probe_start".to_owned())),
        "the removed library still serves"
    );
    let (output, status) = f.drain("s", &id);
    assert_eq!(output, probe_lines(100));
    assert_eq!(status, "[status: completed, exit code: 0]");
}
