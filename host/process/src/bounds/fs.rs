//! The filesystem part: writable roots, hidden paths, read-only `.git`, and the scopes that keep a
//! bounded process from signalling or reaching processes outside its bounds.

use super::{Bounds, BoundsError, Mechanism, not_built};

pub(super) fn probe() -> Vec<Mechanism> {
    let none = || Err("not built yet".to_owned());
    vec![
        Mechanism {
            part: "write",
            how: none(),
        },
        Mechanism {
            part: "hide",
            how: none(),
        },
        Mechanism {
            part: "signals",
            how: none(),
        },
    ]
}

pub(super) fn check(bounds: &Bounds) -> Result<(), BoundsError> {
    if bounds.filesystem || !bounds.hide.is_empty() {
        return Err(not_built(bounds, "write"));
    }
    Ok(())
}

/// The mounts (made while privileged): hidden paths, read-only `.git`.
pub(super) fn mount(bounds: &Bounds) -> Result<(), BoundsError> {
    check(bounds)
}

/// Landlock, last before the exec.
pub(super) fn restrict(bounds: &Bounds) -> Result<(), BoundsError> {
    check(bounds)
}
