//! The cgroup part: memory, processes and CPU of one task, on cgroup v2 where its controllers are
//! available, else on the v1 hierarchies.

use super::{Bounds, BoundsError, Mechanism, not_built};

pub(super) fn probe() -> Vec<Mechanism> {
    let none = || Err("not built yet".to_owned());
    vec![
        Mechanism {
            part: "memory_max",
            how: none(),
        },
        Mechanism {
            part: "pids_max",
            how: none(),
        },
        Mechanism {
            part: "cpu_max",
            how: none(),
        },
    ]
}

pub(super) fn check(bounds: &Bounds) -> Result<(), BoundsError> {
    if bounds.memory_max.is_some() {
        return Err(not_built(bounds, "memory_max"));
    }
    if bounds.pids_max.is_some() {
        return Err(not_built(bounds, "pids_max"));
    }
    if bounds.cpu_max_millis.is_some() {
        return Err(not_built(bounds, "cpu_max"));
    }
    Ok(())
}

/// Joins the task's cgroup (made while privileged).
pub(super) fn join(bounds: &Bounds) -> Result<(), BoundsError> {
    check(bounds)
}

pub(super) fn ended_by(_bounds: &Bounds, _exit: &crate::Exit) -> Option<String> {
    None
}
