//! Giving up capabilities: a bounded process keeps none, its bounding set included.
//!
//! A task of a root host without `run_as` stays uid 0 but cannot unmount what hides paths, load
//! modules, open raw devices past its rights, or regain any capability by executing a program (the
//! bounding set is empty). A process that is not root (after `run_as`, or of a non-root host) has
//! nothing left to give up but what the user namespace of its mounts gave it.

use caps::{CapSet, Capability};

use super::model::{Bounds, BoundsError, Mechanism, failed};

pub(super) fn probe() -> Vec<Mechanism> {
    vec![Mechanism {
        part: "capabilities",
        how: Ok("every capability dropped, bounding set included".to_owned()),
    }]
}

/// Drops every capability: the bounding set first (while `CAP_SETPCAP` allows it), then the
/// ambient, inheritable, effective and permitted sets.
pub(super) fn give_up(bounds: &Bounds) -> Result<(), BoundsError> {
    let fail =
        |e: caps::errors::CapsError| failed(bounds, "capabilities", std::io::Error::other(e));
    if caps::has_cap(None, CapSet::Effective, Capability::CAP_SETPCAP).map_err(fail)? {
        caps::clear(None, CapSet::Bounding).map_err(fail)?;
    }
    for set in [
        CapSet::Ambient,
        CapSet::Inheritable,
        CapSet::Effective,
        CapSet::Permitted,
    ] {
        caps::clear(None, set).map_err(fail)?;
    }
    Ok(())
}
