//! `taskhost new-plugin NAME`: a plugin crate outside any workspace, ready to build, test and load.
//!
//! The crate depends on `taskhost-abi` (the only crate a plugin needs) and, for its tests, on
//! `taskhost-testkit`, at this binary's version from crates.io; with `--path-deps`, on this
//! checkout's `abi/` and `host/testkit` by path instead (for work on taskhost itself: the checkout
//! this binary was built from).

use std::path::{Path, PathBuf};

/// Why no crate was written.
#[derive(Debug, thiserror::Error)]
pub enum NewPluginError {
    /// The name cannot be a crate and library name.
    #[error(
        "invalid plugin name {0:?}: use a lower-case letter, then letters, digits, '-' or '_' (at most 64)"
    )]
    InvalidName(String),
    /// Something is already at the crate's path.
    #[error("{} already exists; choose another name or --dir", .0.display())]
    Exists(PathBuf),
    /// The checkout this binary was built from (its `abi/`) is not where it was.
    #[error("the taskhost checkout this binary was built from is not at {}: rebuild taskhost from a checkout", .0.display())]
    NoCheckout(PathBuf),
    /// Writing failed.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Where the new crate's taskhost dependencies come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dependencies {
    /// The published crates, at this binary's version.
    Published,
    /// The checkout this binary was built from, by path.
    Checkout,
}

/// The files of a new plugin, with `{{...}}` placeholders.
const FILES: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("template/Cargo.toml.in")),
    ("src/lib.rs", include_str!("template/lib.rs.in")),
    ("tests/reload.rs", include_str!("template/reload.rs.in")),
    ("README.md", include_str!("template/README.md.in")),
    (".gitignore", "/target\n"),
];

/// The checkout this binary was built from.
fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn valid(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// The `taskhost-abi` and `taskhost-testkit` dependency values for `Cargo.toml`.
///
/// # Errors
/// [`NewPluginError::NoCheckout`] for [`Dependencies::Checkout`] when the checkout is gone.
fn dependency_values(deps: Dependencies) -> Result<(String, String), NewPluginError> {
    if deps == Dependencies::Published {
        let version = format!("\"{}\"", env!("CARGO_PKG_VERSION"));
        return Ok((version.clone(), version));
    }
    let checkout = checkout();
    let abi = checkout.join("abi");
    if !abi.join("Cargo.toml").is_file() {
        return Err(NewPluginError::NoCheckout(checkout));
    }
    let path = |p: &Path| format!("{{ path = {:?} }}", p.display().to_string());
    Ok((path(&abi), path(&checkout.join("host/testkit"))))
}

/// Writes the crate `NAME` into `dir/NAME` and returns its path.
///
/// # Errors
/// [`NewPluginError`]: a bad name, a path already taken, no checkout (with
/// [`Dependencies::Checkout`]), a write that failed. Nothing is left half-written at a taken path
/// (the directory is created exclusively).
pub fn new_plugin(name: &str, dir: &Path, deps: Dependencies) -> Result<PathBuf, NewPluginError> {
    if !valid(name) {
        return Err(NewPluginError::InvalidName(name.to_owned()));
    }
    let (abi, testkit) = dependency_values(deps)?;
    let root = dir.join(name);
    let write_err = |path: &Path| {
        let path = path.to_path_buf();
        move |source| NewPluginError::Write { path, source }
    };
    match std::fs::create_dir(&root) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(NewPluginError::Exists(root));
        }
        Err(e) => return Err(write_err(&root)(e)),
    }
    let stem = name.replace('-', "_");
    let tasks = crate::serve::default_plugins::paths()
        .into_iter()
        .next()
        .unwrap_or_else(|| PathBuf::from("libtaskhost_plugin_tasks.so"));
    let fill = |text: &str| {
        text.replace("{{name}}", name)
            .replace("{{stem}}", &stem)
            .replace("{{tool}}", &stem)
            .replace("{{abi}}", &abi)
            .replace("{{testkit}}", &testkit)
            .replace("{{tasks}}", &tasks.display().to_string())
    };
    for (file, text) in FILES {
        let path = root.join(file);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(write_err(parent))?;
        }
        std::fs::write(&path, fill(text)).map_err(write_err(&path))?;
    }
    Ok(root)
}

#[cfg(test)]
mod tests {
    use super::valid;

    #[test]
    fn a_plugin_name_must_be_a_crate_name() {
        assert!(valid("my-plugin") && valid("p2_x"));
        assert!(!valid("") && !valid("My") && !valid("9lives") && !valid("a/b") && !valid("a b"));
        assert!(!valid(&"a".repeat(65)));
    }
}
