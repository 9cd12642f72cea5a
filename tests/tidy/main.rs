//! House rules kept by a test (rust-analyzer's `xtask/src/tidy.rs` is the model): sizes of files and
//! functions, which crate may depend on what, no threads of their own in plugins, a reason on every
//! `#[allow]`, no import circle inside a crate, and an ARCHITECTURE.md that names only what exists.
//!
//! Each check lists every offence it finds, with its file and line, so one run says what to fix.
//! `cargo test -p taskhost-tests --test tidy -- --nocapture import_graph` prints each crate's arrows.

mod docs;
mod imports;
mod source;

use std::fmt::Write as _;

use source::{Source, line_of};

/// A shipped (non-test) source file may have at most this many lines.
const MAX_FILE_LINES: usize = 450;
/// A function in shipped code may span at most this many lines, signature to closing brace.
const MAX_FN_LINES: usize = 80;
/// The library crates whose modules must form no circle and have no arrow to an ancestor.
const LIBRARIES: &[&str] = &[
    "registry",
    "abi",
    "common",
    "host",
    "host/process",
    "host/testkit",
    "host/store",
    "plugins/bash",
    "plugins/tasks",
    "plugins/subagent",
    "plugins/slurm",
];

fn shipped() -> Vec<Source> {
    source::all().into_iter().filter(|s| !s.is_test()).collect()
}

fn fail_if_any(what: &str, offences: Vec<String>) {
    if !offences.is_empty() {
        let mut message = format!("{what}: {} offence(s)\n", offences.len());
        for offence in offences {
            let _ = writeln!(message, "  {offence}");
        }
        panic!("{message}");
    }
}

#[test]
fn shipped_files_are_at_most_450_lines() {
    let offences = shipped()
        .iter()
        .filter_map(|s| {
            let lines = s.text.lines().count();
            (lines > MAX_FILE_LINES).then(|| format!("{}: {lines} lines", s.path))
        })
        .collect();
    fail_if_any(
        "files over 450 lines (split them by what they hold)",
        offences,
    );
}

#[test]
fn shipped_functions_are_at_most_80_lines() {
    let mut offences = Vec::new();
    for s in shipped() {
        for (name, line, lines) in functions(&s.code) {
            if lines > MAX_FN_LINES {
                offences.push(format!("{}:{line}: fn {name} is {lines} lines", s.path));
            }
        }
    }
    fail_if_any("functions over 80 lines", offences);
}

/// `(name, first line, line count)` of every function with a body in `code`.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    for (at, _) in code.match_indices("fn ") {
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        let Some(body) = code[at..].find(['{', ';']).map(|i| at + i) else {
            continue;
        };
        if bytes[body] == b';' {
            continue;
        }
        let mut depth = 0usize;
        let end = code[body..].char_indices().find_map(|(i, c)| {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(body + i);
                    }
                }
                _ => {}
            }
            None
        });
        if let Some(end) = end {
            let first = line_of(code, at);
            found.push((name, first, line_of(code, end) - first + 1));
        }
    }
    found
}

#[test]
fn crates_depend_only_on_what_their_room_allows() {
    let root = source::root();
    let mut offences = Vec::new();
    // The registry is pure Rust: no FFI, no host, no processes (the shared words and helpers, which
    // have none of those, it may use).
    let registry_may_not = [
        "abi_stable",
        "libloading",
        "libc",
        "nix",
        "rustix",
        "taskhost-abi",
    ];
    for dep in dependencies(&root.join("registry/Cargo.toml")) {
        if registry_may_not.contains(&dep.as_str())
            || (dep.starts_with("taskhost") && dep != "taskhost-common")
        {
            offences.push(format!("registry/Cargo.toml: depends on {dep}"));
        }
    }
    // What the host's crates share with the ABI carries no ABI: no abi_stable, no other crate of ours.
    for dep in dependencies(&root.join("common/Cargo.toml")) {
        if dep == "abi_stable" || dep.starts_with("taskhost") {
            offences.push(format!("common/Cargo.toml: depends on {dep}"));
        }
    }
    // The process service needs the words, not the plugin ABI.
    for dep in dependencies(&root.join("host/process/Cargo.toml")) {
        if dep == "taskhost-abi" || dep == "abi_stable" {
            offences.push(format!("host/process/Cargo.toml: depends on {dep}"));
        }
    }
    // A plugin reaches the host only through the ABI crate.
    for plugin in ["bash", "tasks", "subagent", "slurm"] {
        let manifest = root.join(format!("plugins/{plugin}/Cargo.toml"));
        for dep in dependencies(&manifest) {
            if dep != "taskhost-abi" {
                offences.push(format!("plugins/{plugin}/Cargo.toml: depends on {dep}"));
            }
        }
    }
    fail_if_any("dependencies a crate must not have", offences);
}

/// The names under `[dependencies]` of the manifest at `path`.
fn dependencies(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let manifest: toml::Table = text.parse().unwrap_or_default();
    manifest
        .get("dependencies")
        .and_then(toml::Value::as_table)
        .map(|deps| deps.keys().cloned().collect())
        .unwrap_or_default()
}

#[test]
fn plugins_start_no_threads_of_their_own() {
    let mut offences = Vec::new();
    for s in source::all()
        .iter()
        .filter(|s| s.path.starts_with("plugins/"))
    {
        for pattern in ["thread::spawn", "thread::Builder", "thread::scope"] {
            for (at, _) in s.code.match_indices(pattern) {
                offences.push(format!("{}:{}: {pattern}", s.path, line_of(&s.code, at)));
            }
        }
    }
    fail_if_any(
        "threads started in a plugin (the host's executor runs a plugin's work)",
        offences,
    );
}

#[test]
fn every_allow_says_why() {
    let mut offences = Vec::new();
    for s in source::all() {
        for (at, _) in s.code.match_indices("allow(") {
            let before = s.code[..at].trim_end();
            if !(before.ends_with("#[") || before.ends_with("#![")) {
                continue;
            }
            // The attribute runs to its closing `)]`, over lines if rustfmt split it.
            let attribute = s.code[at..].split(")]").next().unwrap_or_default();
            if !attribute.contains("reason") {
                let line = line_of(&s.code, at);
                let text = s.text.lines().nth(line - 1).unwrap_or_default().trim();
                offences.push(format!("{}:{line}: {text}", s.path));
            }
        }
    }
    fail_if_any(
        "#[allow] without a reason (write `reason = \"...\"`, or use #[expect])",
        offences,
    );
}

#[test]
fn every_crate_lints_unsafe_code() {
    let root = source::root();
    let text = std::fs::read_to_string(root.join("Cargo.toml")).unwrap_or_default();
    assert!(
        text.contains("unsafe_code = \"deny\""),
        "the workspace lints must deny unsafe_code (its sites say why with #[expect])"
    );
    let mut offences = Vec::new();
    for entry in std::fs::read_dir(root.join("plugins"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let manifest = entry.path().join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap_or_default();
        if !text.contains("[lints]\nworkspace = true") {
            offences.push(format!(
                "{}: does not take the workspace lints",
                manifest.display()
            ));
        }
    }
    for dir in LIBRARIES {
        let text = std::fs::read_to_string(root.join(dir).join("Cargo.toml")).unwrap_or_default();
        if !text.contains("[lints]\nworkspace = true") {
            offences.push(format!(
                "{dir}/Cargo.toml: does not take the workspace lints"
            ));
        }
    }
    fail_if_any("crates outside the workspace lints", offences);
}

#[test]
fn no_import_circle_inside_a_crate() {
    let sources = source::all();
    let mut offences = Vec::new();
    for dir in LIBRARIES {
        let krate = imports::Crate::library(dir, &sources);
        for circle in imports::circles(&krate.arrows()) {
            offences.push(format!("{}: {}", krate.dir, circle.join(" <-> ")));
        }
    }
    fail_if_any("import circles", offences);
}

#[test]
fn no_module_imports_from_its_ancestors() {
    let sources = source::all();
    let mut offences = Vec::new();
    for dir in LIBRARIES {
        let krate = imports::Crate::library(dir, &sources);
        for arrow in imports::upward(&krate.arrows()) {
            offences.push(format!("{}: {} -> {}", krate.dir, arrow.from, arrow.to));
        }
    }
    fail_if_any(
        "arrows back up (a module uses what its parent defines; move it down or aside)",
        offences,
    );
}

#[test]
fn import_graph() {
    let sources = source::all();
    for dir in LIBRARIES {
        let krate = imports::Crate::library(dir, &sources);
        let arrows = krate.arrows();
        println!("{dir}: {} arrows", arrows.len());
        for arrow in arrows {
            println!("  {} -> {}", arrow.from, arrow.to);
        }
    }
}

#[test]
fn architecture_names_only_what_exists() {
    fail_if_any(
        "ARCHITECTURE.md names what does not exist",
        docs::missing_names(&source::root().join("ARCHITECTURE.md"), &source::all()),
    );
}
