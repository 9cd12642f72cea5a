//! Whose bounds a process runs under: the host tells the service how to find an owner's
//! ([`OwnerBounds`]), and every start of every producer goes through [`crate::ProcessService::spawn`], so
//! none can leave them out ([`crate::ProcessService::with_owner_bounds`]). A spec that carries its own bounds keeps them (the host's only; no
//! plugin request carries any).

use std::sync::Arc;

use crate::bounds::Bounds;

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
