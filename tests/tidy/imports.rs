//! The import graph between the modules of one crate, built from `crate::`, `super::` and `self::`
//! paths in shipped code, and its circles.
//!
//! A path to an item is an arrow to the module that defines the item: a path through a `pub use` is
//! followed to where the item lives, so a re-export is not itself a circle. The `pub use` is an arrow
//! from the re-exporting module to the defining one.

use std::collections::{BTreeMap, BTreeSet};

use crate::source::Source;

/// One crate's modules: each module's path (`a::b`, the root is `crate`) and its shipped code.
pub struct Crate {
    /// The crate's folder from the workspace root, e.g. `host`.
    pub dir: String,
    modules: BTreeMap<String, String>,
}

/// An arrow from one module to another, with the path that made it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Arrow {
    /// The importing module.
    pub from: String,
    /// The module defining what is imported.
    pub to: String,
}

impl Crate {
    /// The library crate whose root is `<dir>/src/lib.rs`, from the workspace's sources.
    pub fn library(dir: &str, sources: &[Source]) -> Crate {
        let src = format!("{dir}/src/");
        let mut modules = BTreeMap::new();
        for source in sources {
            let Some(rel) = source.path.strip_prefix(&src) else {
                continue;
            };
            if source.is_test() || rel == "main.rs" || rel.starts_with("bin/") {
                continue;
            }
            modules.insert(module_of(rel), source.code.clone());
        }
        Crate {
            dir: dir.to_string(),
            modules,
        }
    }

    /// Every arrow between two different modules, each once.
    pub fn arrows(&self) -> BTreeSet<Arrow> {
        let mut arrows = BTreeSet::new();
        for (module, code) in &self.modules {
            for path in paths_in(code) {
                let Some(absolute) = self.absolute(module, &path) else {
                    continue;
                };
                if let Some(to) = self.definer(&absolute, 0)
                    && to != *module
                {
                    if std::env::var_os("TIDY_DEBUG").is_some() {
                        eprintln!("{module} -> {to}: {}", path.join("::"));
                    }
                    arrows.insert(Arrow {
                        from: module.clone(),
                        to,
                    });
                }
            }
        }
        arrows
    }

    /// The module defining the item at `path` (segments from the root), following `pub use`s.
    fn definer(&self, path: &[String], depth: usize) -> Option<String> {
        let (module, rest) = (0..=path.len()).rev().find_map(|n| {
            let name = if n == 0 {
                "crate".to_string()
            } else {
                path[..n].join("::")
            };
            self.modules.contains_key(&name).then(|| (name, &path[n..]))
        })?;
        let Some(item) = rest.first() else {
            return Some(module);
        };
        match self.reexport(&module, item) {
            // Another crate's item under a local name: no arrow inside this crate.
            Some(None) => None,
            Some(Some(mut next)) if depth < 8 => {
                next.extend(rest[1..].iter().cloned());
                self.definer(&next, depth + 1).or(Some(module))
            }
            _ => Some(module),
        }
    }

    /// Where `module` re-exports `item` from (`pub use x::item;`, `pub use x::{y as item}`): `None` if
    /// it does not, `Some(None)` if from another crate. At the root, an exported macro is "re-exported"
    /// from the module that defines it.
    fn reexport(&self, module: &str, item: &str) -> Option<Option<Vec<String>>> {
        if module == "crate"
            && let Some(definer) = self.exported_macro(item)
        {
            return Some(Some(split(&definer)));
        }
        let code = self.modules.get(module)?;
        let path = use_statements(code)
            .filter(|(public, _)| *public)
            .flat_map(|(_, tree)| expand_named(&tree))
            .find(|(_, name)| name == item)
            .map(|(path, _)| path)?;
        Some(self.absolute(module, &path))
    }

    /// `path` from the crate root as `module` sees it: `crate::`, `self::`, `super::` or a child
    /// module's name first; `None` for a path into another crate.
    fn absolute(&self, module: &str, path: &[String]) -> Option<Vec<String>> {
        if let Some(first) = path.first()
            && !["crate", "self", "super"].contains(&first.as_str())
        {
            let child = if module == "crate" {
                first.clone()
            } else {
                format!("{module}::{first}")
            };
            if !self.modules.contains_key(&child) {
                return None;
            }
            let mut relative = vec!["self".to_string()];
            relative.extend(path.iter().cloned());
            return absolute(module, &relative);
        }
        absolute(module, path)
    }
}

impl Crate {
    /// The module defining the `#[macro_export]` macro `name` (it lives at the crate's root).
    fn exported_macro(&self, name: &str) -> Option<String> {
        let definition = format!("macro_rules! {name}");
        self.modules
            .iter()
            .find(|(_, code)| code.contains(&definition))
            .map(|(module, _)| module.clone())
            .filter(|module| module != "crate")
    }
}

/// Module path of a file under `src/`: `lib.rs` is `crate`, `main.rs` is `main`, `a/mod.rs` and
/// `a.rs` are `a`.
pub(crate) fn module_of(rel: &str) -> String {
    let rel = rel.trim_end_matches(".rs");
    let rel = rel.strip_suffix("/mod").unwrap_or(rel);
    if rel == "lib" {
        "crate".to_string()
    } else {
        rel.replace('/', "::")
    }
}

/// Every path in `code` that starts with `crate`, `super` or `self`, use trees expanded.
fn paths_in(code: &str) -> Vec<Vec<String>> {
    let mut paths: Vec<Vec<String>> = use_statements(code)
        .flat_map(|(_, tree)| expand(&tree))
        .collect();
    let bytes = code.as_bytes();
    for keyword in ["crate::", "super::"] {
        for (at, _) in code.match_indices(keyword) {
            // `$crate::` in a macro names the crate the macro is used in, not a module of this one.
            let boundary = at == 0
                || !(bytes[at - 1].is_ascii_alphanumeric() || matches!(bytes[at - 1], b'_' | b'$'));
            let after_use = code[..at].trim_end().ends_with("use");
            if !boundary || after_use || code[..at].ends_with("::") {
                continue;
            }
            let tail: String = code[at..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            paths.push(split(&tail));
        }
    }
    paths
}

/// `(is pub, tree)` of every `use` statement in `code`.
fn use_statements(code: &str) -> impl Iterator<Item = (bool, String)> + '_ {
    code.match_indices("use ").filter_map(move |(at, _)| {
        let before = code[..at].trim_end();
        let starts = before.is_empty()
            || before.ends_with(';')
            || before.ends_with('{')
            || before.ends_with('}')
            || before.ends_with(']')
            || before.ends_with("pub")
            || before.ends_with(')');
        if !starts || code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            return None;
        }
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        let end = code[at..].find(';')? + at;
        let tree = code[at + 4..end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        Some((public, tree))
    })
}

fn split(path: &str) -> Vec<String> {
    path.split("::")
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The paths a use tree names with the name each is bound to: `a::{b, c as d}` is `(a::b, b)` and
/// `(a::c, d)`.
fn expand_named(tree: &str) -> Vec<(Vec<String>, String)> {
    let aliases: Vec<(String, String)> = tree
        .split(['{', '}', ','])
        .filter_map(|part| {
            let (path, alias) = part.split_once(" as ")?;
            let original = path.rsplit("::").next()?.trim().to_string();
            Some((original, alias.trim().to_string()))
        })
        .collect();
    expand(tree)
        .into_iter()
        .map(|path| {
            let last = path.last().cloned().unwrap_or_default();
            let name = aliases
                .iter()
                .find(|(original, _)| *original == last)
                .map_or(last, |(_, alias)| alias.clone());
            (path, name)
        })
        .collect()
}

/// The paths a use tree names: `a::{b, c::{d, e as f}}` is `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<Vec<String>> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let name = tree.split(" as ").next().unwrap_or(tree);
        return vec![split(name)];
    };
    let prefix = split(&tree[..open]);
    let inner = tree[open + 1..].trim_end_matches('}');
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.extend(join(&prefix, &inner[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    out.extend(join(&prefix, &inner[start..]));
    out
}

fn join(prefix: &[String], part: &str) -> Vec<Vec<String>> {
    if part.trim().is_empty() {
        return Vec::new();
    }
    expand(part)
        .into_iter()
        .map(|rest| {
            let rest: Vec<String> = rest.into_iter().filter(|s| s != "self").collect();
            prefix.iter().cloned().chain(rest).collect()
        })
        .collect()
}

/// `path` as segments from the crate root, seen from `module`; `None` for a path into another crate.
fn absolute(module: &str, path: &[String]) -> Option<Vec<String>> {
    let mut here: Vec<String> = if module == "crate" {
        Vec::new()
    } else {
        split(module)
    };
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            here.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().is_some_and(|s| s == "super") {
                here.pop()?;
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    here.extend(rest.iter().filter(|s| *s != "*").cloned());
    Some(here)
}

/// The circles among `arrows`: every strongly connected set of more than one module.
pub fn circles(arrows: &BTreeSet<Arrow>) -> Vec<Vec<String>> {
    let mut graph: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for arrow in arrows {
        graph.entry(&arrow.from).or_default().push(&arrow.to);
        graph.entry(&arrow.to).or_default();
    }
    let reach = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![start];
        while let Some(node) = stack.pop() {
            for next in graph.get(node).into_iter().flatten() {
                if seen.insert(*next) {
                    stack.push(next);
                }
            }
        }
        seen
    };
    let reaches: BTreeMap<&str, BTreeSet<&str>> = graph.keys().map(|n| (*n, reach(n))).collect();
    let mut circles: BTreeSet<Vec<String>> = BTreeSet::new();
    for (node, reached) in &reaches {
        let circle: Vec<String> = reached
            .iter()
            .filter(|other| reaches[*other].contains(node))
            .map(|s| s.to_string())
            .collect();
        if circle.len() > 1 {
            circles.insert(circle);
        }
    }
    circles.into_iter().collect()
}

/// The arrows from a module to one of its ancestors (`a::b` to `a` or to the root).
pub fn upward(arrows: &BTreeSet<Arrow>) -> Vec<&Arrow> {
    arrows
        .iter()
        .filter(|arrow| arrow.to == "crate" || arrow.from.starts_with(&format!("{}::", arrow.to)))
        .collect()
}
