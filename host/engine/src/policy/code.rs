//! The host's code kept out of every write root: its binary, the bounds wrapper, its plugins, its
//! plugin directories and their libraries, its config. A task that could change one would run its
//! code in the host (a plugin reloaded, a config read again at an upgrade) or before another task's
//! bounds (the wrapper).
//!
//! A path is writable by a task when it lies at or below a write root, when a symbolic link met on
//! the way to it lies in one (the task points the link elsewhere), or, for a directory the host
//! loads every library of, when a write root lies in it. Not seen: a hard link to the code inside
//! a write root, which someone other than a task must have made (Landlock refuses a task the link).

use std::path::{Path, PathBuf};

/// The first of `code` a task writing in `roots` could change, with the root it would write in.
pub(super) fn writable<'a>(code: &[PathBuf], roots: &'a [PathBuf]) -> Option<(PathBuf, &'a Path)> {
    code.iter().find_map(|path| {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.clone());
        let below = places(path)
            .into_iter()
            .chain([real.clone()])
            .find_map(|place| root_holding(&place, roots).map(|root| (place, root)));
        let holding = real
            .is_dir()
            .then(|| roots.iter().find(|root| root.starts_with(&real)))
            .flatten()
            .map(|root| (real.clone(), root.as_path()));
        below.or(holding)
    })
}

/// The root of `roots` that `path` lies at or below.
fn root_holding<'a>(path: &Path, roots: &'a [PathBuf]) -> Option<&'a Path> {
    roots
        .iter()
        .map(PathBuf::as_path)
        .find(|root| path.starts_with(root))
}

/// `path` and every symbolic link met while following it, each by where the link itself lies (at
/// most 40 links, as the kernel follows).
fn places(path: &Path) -> Vec<PathBuf> {
    let mut seen = vec![path.to_path_buf()];
    let mut next = path.to_path_buf();
    for _ in 0..40 {
        let Some((link, rest)) = first_link(&next) else {
            break;
        };
        let Ok(target) = std::fs::read_link(&link) else {
            break;
        };
        let base = link.parent().map(Path::to_path_buf).unwrap_or_default();
        next = base.join(target).join(rest);
        seen.push(link);
        seen.push(next.clone());
    }
    seen
}

/// The first component prefix of `path` that is a symbolic link, and what follows it.
fn first_link(path: &Path) -> Option<(PathBuf, PathBuf)> {
    let mut prefix = PathBuf::new();
    let mut parts = path.components();
    while let Some(part) = parts.next() {
        prefix.push(part);
        if prefix.symlink_metadata().is_ok_and(|m| m.is_symlink()) {
            return Some((prefix, parts.as_path().to_path_buf()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::writable;

    #[test]
    fn code_behind_a_link_in_a_write_root_or_a_root_in_a_plugin_directory_is_writable() {
        let dir = std::env::temp_dir().join(format!("taskhost-code-{}", std::process::id()));
        let (root, outside, plugins) = (dir.join("root"), dir.join("outside"), dir.join("plugins"));
        for d in [&root, &outside, &plugins] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(outside.join("p.so"), "").unwrap();
        std::os::unix::fs::symlink(outside.join("p.so"), root.join("link.so")).unwrap();
        std::os::unix::fs::symlink(root.join("link.so"), outside.join("chain.so")).unwrap();
        let roots = [root.clone()];
        let in_plugins = [plugins.join("evil.so")];
        let found = (
            writable(&[outside.join("p.so")], &roots),
            writable(&[root.join("link.so")], &roots).map(|(p, _)| p),
            writable(&[outside.join("chain.so")], &roots).map(|(p, _)| p),
            writable(std::slice::from_ref(&plugins), &in_plugins).is_some(),
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found.0, None);
        assert_eq!(found.1, Some(root.join("link.so")));
        assert_eq!(found.2, Some(root.join("link.so")));
        assert!(found.3);
    }
}
