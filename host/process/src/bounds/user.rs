//! The user part: `run_as`, for a host run by root.

use super::{Bounds, BoundsError, Mechanism, not_built};

pub(super) fn probe() -> Vec<Mechanism> {
    vec![Mechanism {
        part: "run_as",
        how: Err("not built yet".to_owned()),
    }]
}

pub(super) fn check(bounds: &Bounds) -> Result<(), BoundsError> {
    if bounds.run_as.is_some() {
        return Err(not_built(bounds, "run_as"));
    }
    Ok(())
}

/// Switches to the user (groups, gid, uid), after the privileged parts.
pub(super) fn switch(bounds: &Bounds) -> Result<(), BoundsError> {
    check(bounds)
}
