//! What a task cgroup is: the limits (parts) and their controllers, where this host makes them,
//! and the cgroups of one task as the host names them.

use std::path::{Path, PathBuf};

use super::super::model::{Bounds, denied};
use crate::cgroup::{mount_of, mounts, own_path};

/// The prefix of every task cgroup's name (the host's own cgroup v2 shares it, see `crate::cgroup`,
/// and its sweep ignores these: their names have one number more).
pub(super) const PREFIX: &str = "taskhost-";

/// One limit and the controller that enforces it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) enum Part {
    Memory,
    Pids,
    Cpu,
}

pub(super) const PARTS: [Part; 3] = [Part::Memory, Part::Pids, Part::Cpu];

impl Part {
    pub(super) fn name(self) -> &'static str {
        match self {
            Part::Memory => "memory_max",
            Part::Pids => "pids_max",
            Part::Cpu => "cpu_max",
        }
    }

    pub(super) fn controller(self) -> &'static str {
        match self {
            Part::Memory => "memory",
            Part::Pids => "pids",
            Part::Cpu => "cpu",
        }
    }

    /// The file of a cgroup of this part that holds its limit.
    pub(super) fn limit_file(self, v2: bool) -> &'static str {
        match (self, v2) {
            (Part::Memory, false) => "memory.limit_in_bytes",
            (Part::Memory, true) => "memory.max",
            (Part::Pids, _) => "pids.max",
            (Part::Cpu, false) => "cpu.cfs_quota_us",
            (Part::Cpu, true) => "cpu.max",
        }
    }

    pub(super) fn wanted(self, bounds: &Bounds) -> bool {
        match self {
            Part::Memory => bounds.memory_max.is_some(),
            Part::Pids => bounds.pids_max.is_some(),
            Part::Cpu => bounds.cpu_max_millis.is_some(),
        }
    }
}

/// One task cgroup: the part it limits, its hierarchy's version, its directory.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Dir {
    pub(super) part: Part,
    pub(super) v2: bool,
    pub(super) path: PathBuf,
}

/// The cgroups of one bounded process, named by the host that starts it: the wrapper makes and
/// joins them ([`super::super::wrap`] passes them on); the host reads what ended the process in them
/// ([`super::super::ended_by`]) and removes them ([`TaskCgroups::remove`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TaskCgroups {
    pub(super) dirs: Vec<Dir>,
}

impl TaskCgroups {
    /// The cgroup of `part`, if the task has one.
    pub(super) fn dir(&self, part: Part) -> Option<&Dir> {
        self.dirs.iter().find(|d| d.part == part)
    }
}

/// Where the task cgroups of one part are made.
pub(super) struct Place {
    pub(super) v2: bool,
    pub(super) parent: PathBuf,
}

/// Where `part`'s task cgroups go on this machine, or why nowhere.
pub(super) fn place(part: Part) -> Result<Place, String> {
    let controller = part.controller();
    if denied(controller) {
        return Err(format!(
            "cgroup {controller}: denied by TASKHOST_BOUNDS_DENY"
        ));
    }
    let all = mounts();
    if let Some(root) = mount_of(&all, true, controller)
        && let Some(own) = own_path(str::is_empty)
    {
        let own = root.join(own);
        let parent = match own == *root {
            true => own,
            false => own.parent().map_or_else(|| root.clone(), Path::to_path_buf),
        };
        let enabled = std::fs::read_to_string(parent.join("cgroup.subtree_control"))
            .is_ok_and(|c| c.split_whitespace().any(|c| c == controller));
        if enabled {
            return writable(controller, 2, parent);
        }
    }
    let has = |list: &str| list.split(',').any(|c| c == controller);
    let Some(root) = mount_of(&all, false, controller) else {
        return Err(format!(
            "no cgroup {controller} controller: neither enabled for the host's cgroup v2 nor \
             mounted as a v1 hierarchy"
        ));
    };
    let own = own_path(has).unwrap_or_default();
    writable(controller, 1, root.join(own))
}

/// `parent` as a place, when this process may make cgroups in it.
fn writable(controller: &str, version: u8, parent: PathBuf) -> Result<Place, String> {
    match nix::unistd::access(&parent, nix::unistd::AccessFlags::W_OK) {
        Ok(()) => Ok(Place {
            v2: version == 2,
            parent,
        }),
        Err(e) => Err(format!(
            "cgroup v{version} {controller}: {} is not writable by this user ({e})",
            parent.display()
        )),
    }
}
