//! Resolving `[policy.NAME]` tables into the [`Bounds`] of a host: the host's own paths hidden,
//! `run_as` looked up, and each part checked against this machine.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::process::bounds::{Bounds, BoundsError, RunAs};

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
    /// A part cannot be enforced on this machine.
    #[error(transparent)]
    Bounds(#[from] BoundsError),
}

/// The host's own paths, which every bounded task is kept from reading or writing.
#[derive(Clone, Debug, Default)]
pub struct HostPaths(pub Vec<PathBuf>);

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
        Self(kept)
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
    let mut hide = table.hide.clone();
    for path in &host.0 {
        if !hide.contains(path) {
            hide.push(path.clone());
        }
    }
    Ok(Bounds {
        policy: name.to_owned(),
        write: table.write.clone().unwrap_or_default(),
        hide,
        git_writable: table.git_writable,
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
