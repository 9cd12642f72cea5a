//! Reload figures for `scripts/bench`: from the rename of a complete plugin file into a watched
//! directory to the new generation serving, end to end (a complete file waits for no window), and a
//! direct load+swap, each against a bare `dlopen` + `dlsym` of the same file in the same run. Needs
//! the release probe plugin (`scripts/bench` builds it). Prints one JSON line per figure.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use taskhost::Taskhost;

/// The watcher's fallback window (for writers that never close a file); a rename does not wait for it.
const WINDOW: Duration = Duration::from_millis(150);

/// (median, min) of the samples.
fn stats(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[v.len() / 2], v[0])
}

fn staged(src: &[u8], dir: &Path, n: u32) -> PathBuf {
    let p = dir.join(format!("staged-{n}.so"));
    std::fs::write(&p, taskhost_tests::with_build_id(src.to_vec(), n)).expect("stage");
    p
}

fn active(host: &Taskhost) -> u64 {
    host.plugins().info()[0]
        .generations
        .iter()
        .find(|g| g.state == taskhost::plugin::GenerationState::Active)
        .map_or(0, |g| g.generation)
}

/// Bare `dlopen` + `dlsym` of a fresh file each time (a new inode, so nothing is reused), in ms.
#[expect(
    unsafe_code,
    reason = "the baseline is a bare dlopen, outside the loader"
)]
fn bare_dlopen(src: &[u8], staging: &std::path::Path) -> Vec<f64> {
    let mut bare = Vec::new();
    for n in 0..20 {
        let f = staged(src, staging, 1000 + n);
        let t = Instant::now();
        // SAFETY: the benchmark's own test plugin; its initializers are ours.
        let lib = unsafe { libloading::Library::new(&f) }.expect("dlopen");
        // SAFETY: looked up only, never called.
        let sym = unsafe { lib.get::<*const u8>(b"_1as_0lib_1header_0root_bmodule_bloader\0") }
            .expect("dlsym");
        let _ = *sym;
        bare.push(t.elapsed().as_secs_f64() * 1e3);
        drop(lib);
        let _ = std::fs::remove_file(f);
    }
    bare
}

fn main() {
    let profile = common::profile_dir();
    let plugin = profile.join("libtaskhost_test_probe.so");
    let src = std::fs::read(&plugin)
        .unwrap_or_else(|_| panic!("{} missing: run scripts/bench", plugin.display()));
    let dir = common::scratch("reload");
    // New files are written outside the watched directory and renamed in, so the only event the
    // watcher sees is the rename (a file written beside the plugin starts the debounce clock early).
    let staging = dir.join("staging");
    std::fs::create_dir_all(&staging).expect("staging dir");
    let path = dir.join("libprobe_bench.so");
    std::fs::write(&path, &src).expect("plugin");

    let (rt, host) = common::bare_host(&dir);
    host.plugins().load(&path, None, false).expect("first load");

    let bare = bare_dlopen(&src, &staging);
    let (bare, _) = stats(bare);

    let mut direct = Vec::new();
    for n in 0..20 {
        let f = staged(&src, &staging, 2000 + n);
        std::fs::rename(&f, &path).expect("rename");
        let t = Instant::now();
        host.plugins().load(&path, None, false).expect("reload");
        direct.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (direct, direct_min) = stats(direct);

    let _watch = host.watch(WINDOW).expect("watch");
    let mut watched = Vec::new();
    for n in 0..20 {
        let before = active(&host);
        let f = staged(&src, &staging, 3000 + n);
        let t = Instant::now();
        std::fs::rename(&f, &path).expect("rename");
        while active(&host) == before {
            assert!(t.elapsed() < Duration::from_secs(10), "no reload");
            std::thread::sleep(Duration::from_micros(200));
        }
        watched.push(t.elapsed().as_secs_f64() * 1e3);
        std::thread::sleep(WINDOW * 2);
    }
    let (watched, watched_min) = stats(watched);
    println!(
        "{{\"name\":\"reload: load + swap (no watcher)\",\"unit\":\"ms\",\"value\":{direct:.3},\"min\":{direct_min:.3},\"baseline_name\":\"bare dlopen+dlsym\",\"baseline\":{bare:.3},\"ratio\":{:.2}}}",
        direct / bare
    );
    println!(
        "{{\"name\":\"reload: rename to serving, end to end\",\"unit\":\"ms\",\"value\":{watched:.3},\"min\":{watched_min:.3},\"baseline_name\":\"bare dlopen+dlsym\",\"baseline\":{bare:.3},\"ratio\":{:.2},\"target\":\"median <= 5 ms\"}}",
        watched / bare
    );
    drop(_watch);
    rt.block_on(host.shutdown());
}
