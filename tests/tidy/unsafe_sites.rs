//! Where `unsafe` is allowed, against what each crate's "Architecture invariant" says.
//!
//! The workspace denies `unsafe_code`; a site opts out with `#[expect(unsafe_code, ...)]` (or an
//! `#[allow(unsafe_code, ...)]` a macro must emit). A site on `mod name` is that module; any other
//! site is the module of its file (`main` for the binary's `main.rs`). A crate root's invariant
//! paragraph that speaks of `unsafe` names its sites in backticks as module paths from the crate
//! root, and must name every site and nothing else.

use std::collections::BTreeSet;

use crate::imports::module_of;
use crate::source::Source;

/// The modules of the crate at `dir` that hold an `unsafe_code` opt-out, as paths from its root.
pub fn sites(dir: &str, sources: &[Source]) -> BTreeSet<String> {
    let src = format!("{dir}/src/");
    let mut sites = BTreeSet::new();
    for source in sources.iter().filter(|s| !s.is_test()) {
        let Some(rel) = source.path.strip_prefix(&src) else {
            continue;
        };
        let module = module_of(rel);
        for marker in ["expect(", "allow("] {
            for (at, _) in source.code.match_indices(marker) {
                let attribute = source.code[at..].split(")]").next().unwrap_or_default();
                let opens = source.code[..at].trim_end();
                if !(opens.ends_with("#[") || opens.ends_with("#![")) {
                    continue;
                }
                if !attribute[marker.len()..]
                    .trim_start()
                    .starts_with("unsafe_code")
                {
                    continue;
                }
                let after = source.code[at + attribute.len()..].trim_start_matches(")]");
                sites.insert(match item_module(after) {
                    Some(child) => join(&module, &child),
                    None => module.clone(),
                });
            }
        }
    }
    sites
}

/// The name of the module the attribute before `after` applies to, if it is a `mod` item (other
/// attributes and a visibility may come between).
fn item_module(after: &str) -> Option<String> {
    let mut rest = after.trim_start();
    while rest.starts_with("#[") {
        rest = rest.split_once(']')?.1.trim_start();
    }
    for visibility in ["pub(crate) ", "pub(super) ", "pub "] {
        rest = rest.strip_prefix(visibility).unwrap_or(rest);
    }
    let name = rest.strip_prefix("mod ")?;
    Some(
        name.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect(),
    )
}

fn join(module: &str, child: &str) -> String {
    if module == "crate" {
        child.to_string()
    } else {
        format!("{module}::{child}")
    }
}

/// The names in backticks of the crate root's "Architecture invariant" paragraphs that speak of
/// `unsafe` (the `unsafe` itself and attribute or macro spellings left out); `None` if none does.
pub fn invariant_names(lib_rs: &str) -> Option<BTreeSet<String>> {
    let mut names = None::<BTreeSet<String>>;
    let mut paragraph = String::new();
    let lines = lib_rs
        .lines()
        .filter_map(|l| l.strip_prefix("//!"))
        .chain([""]);
    for line in lines {
        if !line.trim().is_empty() {
            paragraph.push_str(line);
            paragraph.push('\n');
            continue;
        }
        if paragraph.contains("Architecture invariant") && paragraph.contains("`unsafe`") {
            let found = paragraph.split('`').skip(1).step_by(2).filter(|name| {
                *name != "unsafe"
                    && name
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == ':')
            });
            names
                .get_or_insert_with(BTreeSet::new)
                .extend(found.map(str::to_string));
        }
        paragraph.clear();
    }
    names
}
