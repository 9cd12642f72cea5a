//! The network part: `network = "none"` leaves a bounded process only Unix sockets.

use super::{Bounds, BoundsError, Mechanism, not_built};

pub(super) fn probe() -> Vec<Mechanism> {
    vec![Mechanism {
        part: "network",
        how: Err("not built yet".to_owned()),
    }]
}

pub(super) fn check(bounds: &Bounds) -> Result<(), BoundsError> {
    if !bounds.network {
        return Err(not_built(bounds, "network"));
    }
    Ok(())
}

pub(super) fn restrict(bounds: &Bounds) -> Result<(), BoundsError> {
    check(bounds)
}
