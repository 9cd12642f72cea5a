//! Policies (SPEC 9.2): the `[policy.NAME]` tables of the config, resolved into the [`Bounds`] the
//! process service starts an owner's processes under.
//!
//! Resolution is the host's alone: an owner's policy is the one its principal was made with
//! (`taskhost token create NAME --policy POLICY`, read from the state's records), else
//! `[policy.default]`, else none (unbounded, as before policies). No plugin names a policy or a
//! bound. A principal bound to a policy this host's config lacks has every start refused, never
//! run unbounded. Every policy also hides the host's own paths ([`HostPaths`]): its state directory
//! (task records, the token store, kept output of every owner), its runtime directory (sockets) and
//! its spill directory. The host refuses to start when any configured policy cannot be enforced on
//! this machine ([`resolve`], then [`crate::process::bounds::check`]).

mod check_cli;
mod table;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

pub use check_cli::policy_check;
pub use table::{MemorySize, Network, PolicyTable};

use crate::process::OwnerBounds;
use crate::process::bounds::{Bounds, BoundsError, RunAs};

/// The policy that bounds every owner that names no other.
pub const DEFAULT_POLICY: &str = "default";

/// Every configured policy's bounds, by name.
pub type Resolved = BTreeMap<String, Bounds>;

/// The hidden variable that lets a host start although a configured policy cannot be enforced
/// here (each bounded start is still refused by the wrapper, which fails closed): for tests of the
/// plumbing on a build whose mechanisms are not all built (docs/testing.md).
pub const UNCHECKED_VARIABLE: &str = "TASKHOST_BOUNDS_UNCHECKED";

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

/// What `serve` starts with: every policy resolved and checked ([`resolve`], [`check_all`]). With
/// [`UNCHECKED_VARIABLE`] set, a part this machine cannot enforce is logged instead of refusing
/// the start (the wrapper still refuses every start under it).
///
/// # Errors
/// As [`resolve`] and [`check_all`]: the host must not start.
pub fn for_serve(
    tables: &BTreeMap<String, PolicyTable>,
    host: &HostPaths,
) -> Result<BTreeMap<String, Bounds>, PolicyError> {
    let resolved = resolve(tables, host)?;
    match check_all(&resolved) {
        Err(e) if std::env::var_os(UNCHECKED_VARIABLE).is_some_and(|v| !v.is_empty()) => {
            tracing::warn!(error = %e, "{UNCHECKED_VARIABLE} is set: serving; each start under it is refused");
        }
        checked => checked?,
    }
    Ok(resolved)
}

/// Logs each live principal of `state` bound to a policy `resolved` lacks: its starts are refused.
pub fn warn_unconfigured(state: &taskhost_store::Store, resolved: &BTreeMap<String, Bounds>) {
    let Ok(principals) = state.principals() else {
        return;
    };
    for p in principals.iter().filter(|p| p.revoked_at_ms.is_none()) {
        if let Some(policy) = p.policy.as_ref().filter(|n| !resolved.contains_key(*n)) {
            tracing::warn!(
                principal = %p.name,
                %policy,
                "a principal is bound to a policy this config does not have: its commands are refused"
            );
        }
    }
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

/// The configured policies of a running host, and which principal is bound to which: the process
/// service's [`OwnerBounds`].
pub struct Policies {
    named: BTreeMap<String, Arc<Bounds>>,
    state: Option<Arc<taskhost_store::Store>>,
    /// Each principal owner's policy name as its record says (a principal's policy never changes).
    principals: Mutex<HashMap<String, Option<String>>>,
}

impl Policies {
    /// The policies `resolved`, principals' bindings read from `state`.
    pub fn new(
        resolved: BTreeMap<String, Bounds>,
        state: Option<Arc<taskhost_store::Store>>,
    ) -> Self {
        Self {
            named: resolved
                .into_iter()
                .map(|(name, b)| (name, Arc::new(b)))
                .collect(),
            state,
            principals: Mutex::default(),
        }
    }

    /// The policy `owner` names of its own: its principal's, `None` for any other owner.
    fn named_by(&self, owner: &str) -> Result<Option<String>, String> {
        if !owner.starts_with("principal-") {
            return Ok(None);
        }
        if let Some(known) = self.principals.lock().get(owner) {
            return Ok(known.clone());
        }
        let Some(state) = &self.state else {
            return Ok(None);
        };
        let policy = state.policy_of_principal(owner).map_err(|e| {
            format!("the policy of {owner} cannot be read ({e}): nothing of it is started")
        })?;
        self.principals
            .lock()
            .insert(owner.to_owned(), policy.clone());
        Ok(policy)
    }
}

impl std::fmt::Debug for Policies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Policies")
            .field("named", &self.named.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl OwnerBounds for Policies {
    fn bounds_of(&self, owner: &str) -> Result<Option<Arc<Bounds>>, String> {
        match self.named_by(owner)? {
            Some(name) => self.named.get(&name).cloned().map(Some).ok_or_else(|| {
                format!(
                    "{owner} is bound to policy '{name}', which this host's config does not \
                     have: its commands are refused (add [policy.{name}] to the config)"
                )
            }),
            None => Ok(self.named.get(DEFAULT_POLICY).cloned()),
        }
    }
}

#[cfg(test)]
mod tests;
