//! House rules kept by a test (rust-analyzer's `xtask/src/tidy.rs` is the model): sizes of files and
//! functions (none over 80 lines, and no more over 60 than [`LONG_FN_BUDGET`]), which crate may depend
//! on what (every folder under `plugins/` is a plugin; the engine and the testkit reach no edge
//! crate), no threads of their own in plugins, a reason on every `#[allow]`, no import circle inside
//! a crate, the `unsafe` sites each crate's invariant names, and documents sized for their readers:
//! README.md and ARCHITECTURE.md within their word budgets, every `docs/` page linked from the
//! README, every relative link reaching its file and heading, and backticked paths and items in
//! ARCHITECTURE.md, README.md and `docs/` that exist.
//!
//! Each check lists every offence it finds, with its file and line, so one run says what to fix.
//! `cargo test -p taskhost-tests --test tidy -- --nocapture import_graph` prints each crate's arrows.

mod docs;
mod documents;
mod edges;
mod functions;
mod imports;
mod source;
mod unsafe_sites;

use std::fmt::Write as _;

use source::{Source, line_of};

/// A shipped (non-test) source file may have at most this many lines.
const MAX_FILE_LINES: usize = 450;
/// A function in shipped code may span at most this many lines, signature to closing brace.
const MAX_FN_LINES: usize = 80;
/// README.md's word budget: the pitch, install, clients, a short configuration and links.
const README_WORDS: usize = 1500;
/// ARCHITECTURE.md's word budget: a map, not a manual.
const ARCHITECTURE_WORDS: usize = 2000;
/// A function over this many lines is reported; [`LONG_FN_BUDGET`] of them may remain.
const LONG_FN_LINES: usize = 60;
/// How many shipped functions may still run over [`LONG_FN_LINES`]: lower it when one is split.
const LONG_FN_BUDGET: usize = 23;
/// The library crates other than plugins whose modules must form no circle and have no arrow to an
/// ancestor; every plugin (each folder under `plugins/`) is one too.
const CRATES: &[&str] = &[
    "registry",
    "abi",
    "common",
    "host",
    "host/engine",
    "host/process",
    "host/testkit",
    "host/store",
];

/// The plugins: every folder under `plugins/` with a manifest, as `plugins/NAME`.
fn plugins() -> Vec<String> {
    let root = source::root();
    let mut plugins: Vec<String> = std::fs::read_dir(root.join("plugins"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| entry.path().join("Cargo.toml").exists())
        .map(|entry| format!("plugins/{}", entry.file_name().to_string_lossy()))
        .collect();
    plugins.sort();
    plugins
}

/// Every library crate the module rules cover: [`CRATES`] and the plugins.
fn libraries() -> Vec<String> {
    let mut all: Vec<String> = CRATES.iter().map(|c| c.to_string()).collect();
    all.extend(plugins());
    all
}

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
        for (name, line, lines) in functions::functions(&s.code) {
            if lines > MAX_FN_LINES {
                offences.push(format!("{}:{line}: fn {name} is {lines} lines", s.path));
            }
        }
    }
    fail_if_any("functions over 80 lines", offences);
}

#[test]
fn few_shipped_functions_run_over_60_lines() {
    let mut long = Vec::new();
    for s in shipped() {
        for (name, line, lines) in functions::functions(&s.code) {
            if lines > LONG_FN_LINES {
                long.push(format!("{}:{line}: fn {name} is {lines} lines", s.path));
            }
        }
    }
    println!("functions over {LONG_FN_LINES} lines: {}", long.len());
    for function in &long {
        println!("  {function}");
    }
    if long.len() > LONG_FN_BUDGET {
        fail_if_any(
            &format!(
                "more functions over {LONG_FN_LINES} lines than the budget of {LONG_FN_BUDGET} \
                 (split one where its meaning splits)"
            ),
            long,
        );
    }
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
    let plugins = plugins();
    if plugins.is_empty() {
        offences.push("no plugin found under plugins/".to_string());
    }
    for plugin in plugins {
        let manifest = root.join(format!("{plugin}/Cargo.toml"));
        for dep in dependencies(&manifest) {
            if dep != "taskhost-abi" {
                offences.push(format!("{plugin}/Cargo.toml: depends on {dep}"));
            }
        }
    }
    fail_if_any("dependencies a crate must not have", offences);
}

#[test]
fn the_engine_and_the_testkit_reach_no_edge_crate() {
    let root = source::root();
    let mut offences = Vec::new();
    for start in edges::ENGINE_SIDE {
        for (via, dep) in edges::reach(&root, start) {
            if edges::EDGE_CRATES.contains(&dep.as_str()) {
                offences.push(format!("{start}: {via}/Cargo.toml depends on {dep}"));
            }
        }
    }
    fail_if_any(
        "the engine's side reaches an edge (HTTP, TLS, MCP, the command line stay in host/)",
        offences,
    );
}

#[test]
fn the_testkit_compiles_no_sqlite() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let tree = std::process::Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-p",
            "taskhost-testkit",
            "-e",
            "normal",
        ])
        .args(["--prefix", "none", "--format", "{p}"])
        .current_dir(source::root())
        .output()
        .expect("cargo tree runs");
    assert!(
        tree.status.success(),
        "{}",
        String::from_utf8_lossy(&tree.stderr)
    );
    let tree = String::from_utf8_lossy(&tree.stdout);
    assert!(tree.contains("taskhost-store"), "{tree}");
    let sqlite: Vec<_> = tree
        .lines()
        .filter(|l| l.starts_with("rusqlite") || l.starts_with("libsqlite3-sys"))
        .collect();
    assert!(
        sqlite.is_empty(),
        "taskhost-testkit reaches {sqlite:?}: the engine's `store` feature must stay off for it"
    );
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
    for dir in libraries() {
        let text = std::fs::read_to_string(root.join(&dir).join("Cargo.toml")).unwrap_or_default();
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
    for dir in libraries() {
        let krate = imports::Crate::library(&dir, &sources);
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
    for dir in libraries() {
        let krate = imports::Crate::library(&dir, &sources);
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
    for dir in libraries() {
        let krate = imports::Crate::library(&dir, &sources);
        let arrows = krate.arrows();
        println!("{dir}: {} arrows", arrows.len());
        for arrow in arrows {
            println!("  {} -> {}", arrow.from, arrow.to);
        }
    }
}

#[test]
fn documents_name_only_what_exists() {
    let root = source::root();
    let sources = source::all();
    let mut offences = Vec::new();
    for document in documents::all(&root) {
        let checked = ["ARCHITECTURE.md", "README.md"].contains(&document.path.as_str())
            || document.path.starts_with("docs/");
        if checked {
            offences.extend(docs::missing_names(&root, &document, &sources));
        }
    }
    fail_if_any("documents name what does not exist", offences);
}

#[test]
fn documents_keep_their_word_budgets() {
    let root = source::root();
    let mut offences = Vec::new();
    for (path, budget) in [
        ("README.md", README_WORDS),
        ("ARCHITECTURE.md", ARCHITECTURE_WORDS),
    ] {
        let words = documents::words(&std::fs::read_to_string(root.join(path)).unwrap_or_default());
        println!("{path}: {words} words of {budget}");
        if words > budget {
            offences.push(format!(
                "{path}: {words} words (at most {budget}; move reference to docs/)"
            ));
        }
    }
    fail_if_any("documents over their word budget", offences);
}

#[test]
fn every_docs_page_is_linked_from_the_readme() {
    let root = source::root();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap_or_default();
    let linked: Vec<String> = documents::links(&readme)
        .into_iter()
        .map(|(_, target)| target.split('#').next().unwrap_or_default().to_string())
        .collect();
    let offences = documents::all(&root)
        .into_iter()
        .filter(|d| d.path.starts_with("docs/") && !linked.contains(&d.path))
        .map(|d| format!("{}: not linked from README.md", d.path))
        .collect();
    fail_if_any("docs/ pages no reader can find", offences);
}

#[test]
fn every_relative_link_reaches_its_file_and_heading() {
    let root = source::root();
    let mut offences = Vec::new();
    for document in documents::all(&root) {
        for (line, target) in documents::links(&document.text) {
            if let Some(problem) = documents::broken(&root, &document.path, &target) {
                offences.push(format!("{}:{line}: {problem}", document.path));
            }
        }
    }
    fail_if_any("links that lead nowhere", offences);
}

#[test]
fn the_unsafe_invariants_name_every_unsafe_site() {
    let root = source::root();
    let sources = source::all();
    let mut offences = Vec::new();
    for dir in libraries() {
        let sites = unsafe_sites::sites(&dir, &sources);
        let lib_rs =
            std::fs::read_to_string(root.join(&dir).join("src/lib.rs")).unwrap_or_default();
        let Some(named) = unsafe_sites::invariant_names(&lib_rs) else {
            if !sites.is_empty() {
                offences.push(format!(
                    "{dir}/src/lib.rs: no invariant names its unsafe sites {sites:?}"
                ));
            }
            continue;
        };
        for site in sites.difference(&named) {
            offences.push(format!(
                "{dir}: `{site}` allows unsafe_code; its invariant does not name it"
            ));
        }
        for name in named.difference(&sites) {
            offences.push(format!(
                "{dir}/src/lib.rs: its invariant names `{name}`, which allows no unsafe_code"
            ));
        }
    }
    fail_if_any(
        "unsafe sites and the invariants that name them disagree",
        offences,
    );
}
