//! What a document (ARCHITECTURE.md, README.md, a `docs/` page) names in backticks, checked against
//! the tree: a path must exist, and a Rust item (a type, `Type::item`, `function()`, `macro!`) must be
//! defined somewhere in the workspace. Names from other crates the documents mention are listed in
//! [`EXTERNAL`].

use std::collections::BTreeSet;
use std::path::Path;

use crate::documents::Document;
use crate::source::Source;

/// Names from outside the workspace (std, tokio, abi_stable, rmcp, the kernel) the map may mention.
const EXTERNAL: &[&str] = &[
    "RootModule",
    "StableAbi",
    "RawLibrary",
    "JoinHandle",
    "Notify",
    "CancellationToken",
    "StreamableHttpService",
    "Mutex",
    "RwLock",
    "Arc",
    "Weak",
    "Vec",
    "String",
    "Option",
    "Result",
    "Box",
    "Drop",
    "Send",
    "Sync",
    "LocalKey",
    "RTLD_NODELETE",
    "SIGKILL",
    "SIGTERM",
    "SIGINT",
    "SIGHUP",
    "SCM_RIGHTS",
    "SO_PEERCRED",
    "O_PATH",
    "O_NOFOLLOW",
    "MCP",
    "ACP",
    "JSON",
    "ELF",
    "RString",
    "RVec",
    "ROption",
    "RResult",
    "RStr",
    "Ctrl",
    "Origin",
    "EventSource",
    "serde",
    "Deserialize",
    "schemars",
    "JsonSchema",
];

/// The top-level folders and files of the workspace a path in the map may start with.
const ROOTS: &[&str] = &[
    "registry/",
    "abi/",
    "host/",
    "plugins/",
    "tests/",
    "scripts/",
    ".ci/",
];

/// Every backticked name in `doc` that is a path not in the tree at `root` or an item not defined in
/// `sources`, as `path:line: name`.
pub fn missing_names(root: &Path, doc: &Document, sources: &[Source]) -> Vec<String> {
    let defined = definitions(sources);
    let mut missing = Vec::new();
    for (n, line) in doc.text.lines().enumerate() {
        for name in line.split('`').skip(1).step_by(2) {
            let problem = if is_path(name) {
                (!root.join(name).exists()).then_some("no such path")
            } else if let Some(segments) = item(name) {
                segments
                    .iter()
                    .any(|s| !defined.contains(s.as_str()) && !EXTERNAL.contains(&s.as_str()))
                    .then_some("no such item")
            } else {
                None
            };
            if let Some(problem) = problem {
                missing.push(format!("{}:{}: `{name}`: {problem}", doc.path, n + 1));
            }
        }
    }
    missing
}

fn is_path(name: &str) -> bool {
    !name.contains(' ') && (ROOTS.iter().any(|r| name.starts_with(r)) || name.ends_with(".rs"))
}

/// The segments of `name` to look up, if `name` is written as a Rust item: `Type`, `a::b::C`,
/// `function()`, `Type::method()`, `macro!`. A lowercase single word (a tool, a command) is not.
fn item(name: &str) -> Option<Vec<String>> {
    let bare = name.trim_end_matches("()").trim_end_matches('!');
    let word = |s: &str| {
        !s.is_empty()
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !s.starts_with(|c: char| c.is_ascii_digit())
    };
    let segments: Vec<&str> = bare.split("::").collect();
    if !segments.iter().all(|s| word(s)) {
        return None;
    }
    let explicit = name.ends_with("()") || name.ends_with('!') || segments.len() > 1;
    let type_like = segments.len() == 1
        && bare.starts_with(|c: char| c.is_ascii_uppercase())
        && bare.chars().any(|c| c.is_ascii_lowercase());
    if !(explicit || type_like) {
        return None;
    }
    // A crate path's leading crate name (`taskhost_abi::...`) is not an item.
    Some(
        segments
            .into_iter()
            .filter(|s| !s.starts_with("taskhost") && *s != "crate" && *s != "std")
            .map(str::to_string)
            .collect(),
    )
}

/// Every name the workspace's sources define: items after their keyword, enum variants and struct
/// fields at the start of a line, and macros.
fn definitions(sources: &[Source]) -> BTreeSet<String> {
    const KEYWORDS: &[&str] = &[
        "fn",
        "struct",
        "enum",
        "trait",
        "type",
        "mod",
        "const",
        "static",
        "macro_rules!",
        "union",
    ];
    let mut names = BTreeSet::new();
    for source in sources {
        for line in source.code.lines() {
            let words: Vec<&str> = line
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '!'))
                .filter(|w| !w.is_empty())
                .collect();
            for pair in words.windows(2) {
                if KEYWORDS.contains(&pair[0]) {
                    names.insert(pair[1].to_string());
                }
            }
            let trimmed = line.trim_start().trim_start_matches("pub ");
            let first: String = trimmed
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            let rest = &trimmed[first.len()..];
            if !first.is_empty() && [",", "(", " {", ":"].iter().any(|p| rest.starts_with(p)) {
                names.insert(first);
            }
        }
    }
    names
}
