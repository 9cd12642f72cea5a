//! Plugins from outside this repository: `taskhost new-plugin` writes a crate that builds, passes its
//! own reload tests with the testkit, and loads in a real host.

use std::time::Duration;

use crate::fixtures::*;
use crate::mcp::binary;

/// Proves: the crate `taskhost new-plugin` writes depends on the published `taskhost-abi` and
/// `taskhost-testkit` at this version, has no dead link in its README, and builds and passes its own
/// testkit tests outside the workspace against this checkout's crates put in their place by
/// `[patch.crates-io]` (nothing is fetched or uploaded).
#[test]
fn a_new_plugin_builds_and_passes_its_own_tests_outside_the_workspace() {
    let dir = scratch("new-plugin");
    new_plugin(dir.path(), &["made-here"]);
    let root = dir.join("made-here");
    for file in ["Cargo.toml", "src/lib.rs", "tests/reload.rs", "README.md"] {
        assert!(root.join(file).is_file(), "{file} missing");
    }
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(!readme.contains(".invalid"), "{readme}");
    let workspace = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let version = env!("CARGO_PKG_VERSION");
    for name in ["taskhost-abi", "taskhost-testkit"] {
        assert!(
            manifest.contains(&format!("{name} = \"{version}\"")),
            "{manifest}"
        );
    }
    let patch = format!(
        "\n[patch.crates-io]\ntaskhost-abi = {{ path = {:?} }}\ntaskhost-testkit = {{ path = {:?} }}\n",
        workspace.join("abi"),
        workspace.join("host/testkit")
    );
    std::fs::write(root.join("Cargo.toml"), manifest + &patch).unwrap();
    // The workspace's lock pins the versions already in the cargo cache, so the build needs no
    // network; the workspace's target directory reuses what was compiled.
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
    let built = target.join("debug/libmade_here.so");
    let (code, out) = check(
        &built,
        &[
            "--reloads",
            "5",
            "--call",
            "made_here_count",
            r#"{"to": 3, "interval_ms": 1}"#,
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    a_real_cargo_build_under_a_watching_host_gives_one_reload(&dir, &root, &target, &built);
}

/// A watching host serves the built plugin; an edit and a real `cargo build` reload it exactly once,
/// and the new code answers.
fn a_real_cargo_build_under_a_watching_host_gives_one_reload(
    dir: &std::path::Path,
    root: &std::path::Path,
    target: &std::path::Path,
    built: &std::path::Path,
) {
    let tasks = artifacts().join("libtaskhost_plugin_tasks.so");
    let mut host = crate::mcp::SocketHost::start(
        dir,
        &[
            "--plugin",
            tasks.to_str().unwrap(),
            "--plugin",
            built.to_str().unwrap(),
        ],
    );
    let connect = format!("unix:{}", host.socket.display());
    let greet = || {
        let out = output_within(
            std::process::Command::new(binary()).args([
                "call",
                "--connect",
                &connect,
                "made_here_greet",
                r#"{"name": "Ada"}"#,
            ]),
            Duration::from_secs(30),
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let generation = || {
        let out = output_within(
            std::process::Command::new(binary()).args(["plugins", "--connect", &connect]),
            Duration::from_secs(30),
        );
        let table = String::from_utf8_lossy(&out.stdout).into_owned();
        table
            .lines()
            .find(|l| l.starts_with("made-here") && l.contains(" active "))
            .and_then(|l| l.split_whitespace().nth(1).map(str::to_owned))
            .unwrap_or_else(|| panic!("no active made-here row in {table}"))
    };
    assert_eq!(greet(), "hello, Ada");
    assert_eq!(generation(), "1");
    let lib = root.join("src/lib.rs");
    let source = std::fs::read_to_string(&lib).unwrap();
    std::fs::write(&lib, source.replace("\"hello, {}\"", "\"hi, {}\"")).unwrap();
    let rebuilt = output_within(
        std::process::Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
            .args(["build", "--offline", "--quiet", "--lib"])
            .current_dir(root)
            .env("CARGO_TARGET_DIR", target),
        Duration::from_secs(10 * 60),
    );
    assert!(
        rebuilt.status.success(),
        "{}",
        String::from_utf8_lossy(&rebuilt.stderr)
    );
    assert!(
        eventually(Duration::from_secs(10), || greet() == "hi, Ada"),
        "the rebuilt code never answered: {}",
        greet()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(generation(), "2", "one build, one reload");
    host.stop();
}

/// Proves: a bad name and a taken path are refused with exit code 2 and a clear message, writing
/// nothing.
#[test]
fn new_plugin_refuses_a_bad_name_and_a_taken_path() {
    let dir = scratch("new-plugin-refusals");
    let run = |name: &str| new_plugin_output(dir.path(), &[name]);
    let bad = run("Bad Name");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("invalid plugin name \"Bad Name\""));
    std::fs::create_dir(dir.join("taken")).unwrap();
    let taken = run("taken");
    assert_eq!(taken.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&taken.stderr).contains("already exists"));
    assert_eq!(std::fs::read_dir(dir.join("taken")).unwrap().count(), 0);
}

/// Proves: `new-plugin --path-deps` writes a crate that depends on this checkout's `abi/` and
/// `host/testkit` by path, for work on taskhost itself.
#[test]
fn new_plugin_with_path_deps_depends_on_this_checkout_by_path() {
    let dir = scratch("new-plugin-path-deps");
    new_plugin(dir.path(), &["by-path", "--path-deps"]);
    let manifest = std::fs::read_to_string(dir.join("by-path/Cargo.toml")).unwrap();
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap();
    for (name, path) in [
        ("taskhost-abi", "abi"),
        ("taskhost-testkit", "host/testkit"),
    ] {
        let expected = format!(
            "{name} = {{ path = {:?} }}",
            checkout.join(path).display().to_string()
        );
        assert!(manifest.contains(&expected), "{expected} not in {manifest}");
    }
}

/// `taskhost check` of a plugin file with `args`: its exit code and what it printed.
fn check(plugin: &std::path::Path, args: &[&str]) -> (Option<i32>, String) {
    let out = output_within(
        std::process::Command::new(binary())
            .arg("check")
            .arg(plugin)
            .args(args),
        Duration::from_secs(120),
    );
    (
        out.status.code(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

/// Proves: `taskhost check` passes a plugin that unloads cleanly, reporting every reload's time and
/// the generations, threads and descriptors before and after.
#[test]
fn check_passes_a_plugin_that_unloads_and_reports_each_reload() {
    let (code, out) = check(
        &built("taskhost_test_probe"),
        &[
            "--reloads",
            "4",
            "--call",
            "probe_start",
            r#"{"lines": 5, "interval_ms": 1}"#,
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    for n in 1..=4 {
        assert!(
            out.contains(&format!("reload {n}: generation {} serving in ", n + 1)),
            "{out}"
        );
    }
    assert!(out.contains("0 after unloading"), "{out}");
    assert!(out.contains("descriptors: "), "{out}");
    assert!(
        out.ends_with("ok: every generation unloaded, nothing left\n"),
        "{out}"
    );
}

/// Proves: a thread a plugin starts on its own (as a C library it links would: `pthread_create`, no
/// Rust runtime on it, so glibc does not pin the library) keeps its generation's code mapped while it
/// runs across two reloads, and the generation unloads once it ends. Before the host held such
/// threads, the retired generation was closed under the sleeping thread and the host died of SIGSEGV.
#[test]
fn a_thread_a_plugin_started_itself_keeps_its_code_mapped_until_it_ends() {
    let (code, out) = check(
        &built("taskhost_test_probe"),
        &[
            "--reloads",
            "2",
            "--call",
            "probe_c_thread",
            r#"{"ms": 300}"#,
        ],
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("0 after unloading"), "{out}");
    assert!(
        out.contains("its generation stays loaded until the thread ends"),
        "{out}"
    );
}

/// Proves: each way a plugin can fail to unload is diagnosed by name, and the check exits 1: a
/// thread the plugin left running, a thread-local destructor registered on a thread that outlives
/// the generation, and `-z nodelete`.
#[test]
fn check_names_why_a_plugin_cannot_unload() {
    for (stem, cause) in [
        (
            "taskhost_test_leak_thread",
            "why: thread \"leaked-by-plugi\"",
        ),
        ("taskhost_test_leak_tls", "imports __cxa_thread_atexit_impl"),
        ("taskhost_test_nodelete", "DF_1_NODELETE"),
    ] {
        let (code, out) = check(&built(stem), &["--reloads", "2"]);
        assert_eq!(code, Some(1), "{stem}: {out}");
        assert!(
            out.contains(cause),
            "{stem} not diagnosed by {cause:?}: {out}"
        );
        assert!(
            out.contains("FAILED: something of the plugin was left"),
            "{out}"
        );
    }
    let (_, out) = check(&built("taskhost_test_nodelete"), &["--reloads", "1"]);
    assert!(
        !out.contains("__cxa_thread_atexit_impl"),
        "no thread, no TLS blame: {out}"
    );
}

/// Runs `taskhost new-plugin ARGS --dir DIR` and asserts it succeeded.
fn new_plugin(dir: &std::path::Path, args: &[&str]) {
    let out = new_plugin_output(dir, args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What `taskhost new-plugin ARGS --dir DIR` did.
fn new_plugin_output(dir: &std::path::Path, args: &[&str]) -> std::process::Output {
    output_within(
        std::process::Command::new(binary())
            .arg("new-plugin")
            .args(args)
            .arg("--dir")
            .arg(dir),
        Duration::from_secs(30),
    )
}
