//! Resolving `[policy.NAME]` tables into the [`Bounds`] of a host: the host's own paths hidden,
//! `run_as` looked up, and each part checked against this machine.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::process::bounds::{Bounds, BoundsError, RunAs, movable_in};

use super::table::{Network, PolicyTable};

/// Every configured policy's bounds, by name.
pub type Resolved = BTreeMap<String, Bounds>;

/// Why the configured policies cannot be used on this host.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// `run_as` names no user of this machine.
    #[error("policy '{policy}': run_as: no user named {user} on this machine")]
    UnknownUser {
        /// The policy.
        policy: String,
        /// The name.
        user: String,
    },
    /// `run_as` on a host not run by root.
    #[error(
        "policy '{policy}': run_as {user} needs a host run by root; this one runs as uid {uid}"
    )]
    NotRoot {
        /// The policy.
        policy: String,
        /// The name.
        user: String,
        /// This host's effective uid.
        uid: u32,
    },
    /// The user database could not be read.
    #[error("policy '{policy}': run_as: cannot look up {user}: {why}")]
    Lookup {
        /// The policy.
        policy: String,
        /// The name.
        user: String,
        /// The OS's error.
        why: String,
    },
    /// A write root holds the host's code (see [`HostPaths::code`]).
    #[error(
        "policy '{policy}': {code} is (or leads to) the host's code, and a task could change it \
         through the write root {root}, and so what the host runs, past every bound; keep the \
         host's binary, plugins, plugin directories and config, and the links to them, outside \
         the write roots, and no write root in a plugin directory"
    )]
    CodeBelowWrite {
        /// The policy.
        policy: String,
        /// The binary, plugin or plugin directory.
        code: String,
        /// The write root it lies in.
        root: String,
    },
    /// A write root holding a `.git` lies inside another write root, with `.git` read-only: a task
    /// could move the inner root aside and leave its repository unguarded, so every start would be
    /// refused; said when the config is read.
    #[error(
        "policy '{policy}': {git} is kept read-only but lies below the write root {root}, where a \
         task could move its root aside and leave the repository unguarded: name only one of the \
         two roots, or set git_writable = true"
    )]
    GitBelowWrite {
        /// The policy.
        policy: String,
        /// The inner root's `.git`.
        git: String,
        /// The outer write root.
        root: String,
    },
    /// A hidden path (the policy's or the host's own) lies deeper than directly in a write root: a
    /// task could rename the directory above it and uncover it at its next start.
    #[error(
        "policy '{policy}': {hidden} is hidden but lies below the write root {root}, where a task \
         could move the directory above it and uncover it: hide only paths directly in a write root \
         or outside the roots (for the host's own state, runtime and spill directories, choose ones \
         outside the write roots)"
    )]
    HiddenBelowWrite {
        /// The policy.
        policy: String,
        /// The hidden path.
        hidden: String,
        /// The write root it lies below.
        root: String,
    },
    /// A part cannot be enforced on this machine.
    #[error(transparent)]
    Bounds(#[from] BoundsError),
}

/// The host's own paths: those every bounded task is kept from reading or writing, and its code,
/// which no write root may hold.
#[derive(Clone, Debug, Default)]
pub struct HostPaths {
    /// Hidden from every bounded task (its state, runtime and spill directories, its sockets).
    pub hidden: Vec<PathBuf>,
    /// The host's code: its binary, the bounds wrapper, its plugins, plugin directories and their
    /// libraries, its config. A task that could change one would run its code in the host (or,
    /// through the wrapper, before another task's bounds), so a policy under which a task could is
    /// refused (see the `code` module).
    pub code: Vec<PathBuf>,
}

impl HostPaths {
    /// `paths` made absolute, without any that lies inside another (hiding the outer hides it).
    pub fn new(paths: impl IntoIterator<Item = PathBuf>) -> Self {
        let mut all: Vec<PathBuf> = paths
            .into_iter()
            .map(|p| std::path::absolute(&p).unwrap_or(p))
            .collect();
        all.sort();
        all.dedup();
        let kept: Vec<PathBuf> = all
            .iter()
            .filter(|p| !all.iter().any(|q| q != *p && p.starts_with(q)))
            .cloned()
            .collect();
        Self {
            hidden: kept,
            code: Vec::new(),
        }
    }

    /// These paths with `code` as the host's code.
    #[must_use]
    pub fn with_code(self, code: impl IntoIterator<Item = PathBuf>) -> Self {
        Self {
            code: code.into_iter().collect(),
            ..self
        }
    }
}

/// Resolves every configured policy: its table into [`Bounds`] with the host's paths hidden and its
/// `run_as` user looked up. Checks nothing of the kernel (see [`check_all`]).
///
/// # Errors
/// [`PolicyError`] for the first policy whose `run_as` cannot be used here.
pub fn resolve(
    tables: &BTreeMap<String, PolicyTable>,
    host: &HostPaths,
) -> Result<BTreeMap<String, Bounds>, PolicyError> {
    tables
        .iter()
        .map(|(name, table)| Ok((name.clone(), bounds_of(name, table, host)?)))
        .collect()
}

/// Checks that every part of every policy can be enforced on this machine.
///
/// # Errors
/// The first part that cannot, naming its policy.
pub fn check_all(resolved: &BTreeMap<String, Bounds>) -> Result<(), PolicyError> {
    for bounds in resolved.values() {
        crate::process::bounds::check(bounds)?;
    }
    Ok(())
}

/// What `serve` starts with: every policy resolved and checked ([`resolve`], [`check_all`]).
///
/// # Errors
/// As [`resolve`] and [`check_all`]: the host must not start.
pub fn for_serve(
    tables: &BTreeMap<String, PolicyTable>,
    host: &HostPaths,
) -> Result<BTreeMap<String, Bounds>, PolicyError> {
    let resolved = resolve(tables, host)?;
    check_all(&resolved)?;
    Ok(resolved)
}

/// One table's bounds.
fn bounds_of(name: &str, table: &PolicyTable, host: &HostPaths) -> Result<Bounds, PolicyError> {
    // Symbolic links resolved now: a task that may write where a link lies could point it
    // elsewhere, while the mount stays on what it named when the host started.
    let real = |p: &PathBuf| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone());
    let mut hide: Vec<PathBuf> = table.hide.iter().map(real).collect();
    for path in host.hidden.iter().map(real) {
        if !hide.contains(&path) {
            hide.push(path);
        }
    }
    let write: Vec<PathBuf> = table.write.iter().flatten().map(real).collect();
    for hidden in &hide {
        if let Some(root) = movable_in(hidden, &write) {
            return Err(PolicyError::HiddenBelowWrite {
                policy: name.to_owned(),
                hidden: hidden.display().to_string(),
                root: root.display().to_string(),
            });
        }
    }
    if table.write.is_some()
        && let Some((code, root)) = super::code::writable(&host.code, &write)
    {
        return Err(PolicyError::CodeBelowWrite {
            policy: name.to_owned(),
            code: code.display().to_string(),
            root: root.display().to_string(),
        });
    }
    if !table.git_writable {
        let guarded = write.iter().map(|root| root.join(".git"));
        if let Some((git, root)) = guarded
            .filter(|git| git.symlink_metadata().is_ok())
            .find_map(|git| movable_in(&git, &write).map(|root| (git.clone(), root)))
        {
            return Err(PolicyError::GitBelowWrite {
                policy: name.to_owned(),
                git: git.display().to_string(),
                root: root.display().to_string(),
            });
        }
    }
    Ok(Bounds {
        policy: name.to_owned(),
        write,
        hide,
        git_writable: table.git_writable,
        private_tmp: table.private_tmp,
        network: table.network == Network::All,
        memory_max: table.memory_max.map(|m| m.0),
        pids_max: table.pids_max,
        cpu_max_millis: table.cpu_max_millis(),
        run_as: table
            .run_as
            .as_deref()
            .map(|user| run_as(name, user))
            .transpose()?,
        filesystem: table.write.is_some(),
    })
}

/// `run_as`: the user, on a host run by root.
fn run_as(policy: &str, user: &str) -> Result<RunAs, PolicyError> {
    let uid = nix::unistd::geteuid();
    if !uid.is_root() {
        return Err(PolicyError::NotRoot {
            policy: policy.to_owned(),
            user: user.to_owned(),
            uid: uid.as_raw(),
        });
    }
    match nix::unistd::User::from_name(user) {
        Ok(Some(u)) => Ok(RunAs {
            name: u.name,
            uid: u.uid.as_raw(),
            gid: u.gid.as_raw(),
        }),
        Ok(None) => Err(PolicyError::UnknownUser {
            policy: policy.to_owned(),
            user: user.to_owned(),
        }),
        Err(e) => Err(PolicyError::Lookup {
            policy: policy.to_owned(),
            user: user.to_owned(),
            why: e.to_string(),
        }),
    }
}
