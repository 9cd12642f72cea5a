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

mod code;
mod resolve;
mod table;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::Mutex;

pub use resolve::{HostPaths, PolicyError, Resolved, check_all, for_serve, resolve};
pub use table::{MemorySize, Network, PolicyTable};

use crate::process::OwnerBounds;
use crate::process::bounds::Bounds;

/// The policy that bounds every owner that names no other.
pub const DEFAULT_POLICY: &str = "default";

/// Logs each live principal of `state` bound to a policy `resolved` lacks: its starts are refused.
fn warn_unconfigured(state: &taskhost_store::Store, resolved: &BTreeMap<String, Bounds>) {
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

/// Each owner's limit on its running process tasks (its policy's `max_running`), if any.
pub type OwnerLimit = Arc<dyn Fn(&str) -> Option<u64> + Send + Sync>;

/// The configured policies of a running host, and which principal is bound to which: the process
/// service's [`OwnerBounds`].
pub struct Policies {
    named: BTreeMap<String, Arc<Bounds>>,
    state: Option<Arc<taskhost_store::Store>>,
    /// Each principal owner's policy name as its record says (a principal's policy never changes).
    principals: Mutex<HashMap<String, Option<String>>>,
    /// Each policy's `max_running`, where it sets one.
    max_running: BTreeMap<String, u64>,
}

impl Policies {
    /// The policies `resolved`, principals' bindings read from `state` (a live principal bound to
    /// a policy `resolved` lacks is logged). A host installs them with no policy configured too:
    /// a principal bound to one is refused then, never run unbounded.
    pub fn new(
        resolved: BTreeMap<String, Bounds>,
        state: Option<Arc<taskhost_store::Store>>,
    ) -> Self {
        if let Some(store) = &state {
            warn_unconfigured(store, &resolved);
        }
        Self {
            named: resolved
                .into_iter()
                .map(|(name, b)| (name, Arc::new(b)))
                .collect(),
            state,
            principals: Mutex::default(),
            max_running: BTreeMap::new(),
        }
    }

    /// With each policy's `max_running` (issue 44): the running process tasks each of its
    /// owners may have; past it their starts are queued.
    #[must_use]
    pub fn with_max_running(mut self, limits: impl IntoIterator<Item = (String, u64)>) -> Self {
        self.max_running = limits.into_iter().collect();
        self
    }

    /// Each owner's `max_running`, its policy's; `None` when no policy sets one (nothing to count).
    pub fn owner_limit(self: &Arc<Self>) -> Option<OwnerLimit> {
        if self.max_running.is_empty() {
            return None;
        }
        let policies = self.clone();
        Some(Arc::new(move |owner: &str| policies.max_running_of(owner)))
    }

    /// `owner`'s `max_running`: its principal's policy's, else `[policy.default]`'s. An owner
    /// whose policy cannot be read has none here (its starts are refused anyway).
    pub fn max_running_of(&self, owner: &str) -> Option<u64> {
        let name = self.named_by(owner).ok()?;
        let name = name.as_deref().unwrap_or(DEFAULT_POLICY);
        self.max_running.get(name).copied()
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
