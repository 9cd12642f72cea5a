//! Whose bounds a process runs under: the host tells the service how to find an owner's
//! ([`OwnerBounds`]), and every start of every producer goes through [`ProcessService::spawn`], so
//! none can leave them out. A spec that carries its own bounds keeps them (the host's only; no
//! plugin request carries any).

use std::sync::Arc;

use crate::bounds::Bounds;
use crate::keeper::Launch;
use crate::service::ProcessService;
use crate::spec::{ProcessSpec, SpawnError};

/// The host's answer to "what bounds do this owner's processes run under".
pub trait OwnerBounds: Send + Sync {
    /// The bounds of `owner`'s processes (`""` for work no session owns): `Ok(None)` runs them
    /// unbounded.
    ///
    /// # Errors
    /// Why no process of `owner` may start (its policy is not configured, its record cannot be
    /// read): the start is refused, never run unbounded.
    fn bounds_of(&self, owner: &str) -> Result<Option<Arc<Bounds>>, String>;
}

impl ProcessService {
    /// Resolves every start's bounds by its owner through `resolver` (see [`OwnerBounds`]).
    #[must_use]
    pub fn with_owner_bounds(mut self, resolver: Arc<dyn OwnerBounds>) -> Self {
        self.owner_bounds = Some(resolver);
        self
    }

    /// `launch` as it starts for `owner`, with the bounds it runs under: through the bounds wrapper
    /// when the spec or the owner has bounds, as it is otherwise.
    pub(crate) fn bounded(
        &self,
        spec: &ProcessSpec,
        owner: &str,
        launch: Launch,
    ) -> Result<(Launch, Option<Arc<Bounds>>), SpawnError> {
        let bounds = match (&spec.bounds, &self.owner_bounds) {
            (Some(bounds), _) => Some(bounds.clone()),
            (None, Some(resolver)) => resolver.bounds_of(owner).map_err(SpawnError)?,
            (None, None) => None,
        };
        let Some(bounds) = bounds else {
            return Ok((launch, None));
        };
        let Some(exe) = &self.wrapper else {
            return Err(SpawnError(format!(
                "policy '{}': this host has no bounds wrapper (no keeper program): the process \
                 was not started",
                bounds.policy
            )));
        };
        let wrapped =
            crate::bounds::wrap(exe, &launch, &bounds).map_err(|e| SpawnError(e.to_string()))?;
        Ok((wrapped, Some(bounds)))
    }
}
