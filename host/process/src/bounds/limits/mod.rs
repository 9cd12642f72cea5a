//! The cgroup part: memory, processes and CPU of one task, on cgroup v2 where its controllers are
//! available, else on the v1 hierarchies.
//!
//! Each bounded process that has a limit gets cgroups of its own, named by the host before the
//! start (`taskhost-<host pid>-<host start time>-<n>`) so the host finds them after the exit: the
//! wrapper (still privileged) makes them, writes the limits and moves itself in; the host reads
//! what ended the process, ends whatever is left in them and removes them once it settled. On v1
//! they are children of the host's own cgroup of each hierarchy (the host's own limits still hold
//! over them); on v2 they sit beside the host's cgroup, in a parent whose `cgroup.subtree_control`
//! enables the controller (a cgroup that holds processes cannot enable controllers for children).
//! A host that starts sweeps away the empty task cgroups of hosts that are gone.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::model::{Bounds, BoundsError, Mechanism, denied};

mod dirs;
mod found;

pub use dirs::TaskCgroups;
use dirs::{Dir, PARTS, PREFIX, Part, place};

/// CFS period, in microseconds, for `cpu_max` (the kernel's default).
const CPU_PERIOD_US: u64 = 100_000;

pub(super) fn probe() -> Vec<Mechanism> {
    PARTS
        .iter()
        .map(|&part| Mechanism {
            part: part.name(),
            how: place(part).map(|p| {
                let version = if p.v2 { 2 } else { 1 };
                format!(
                    "cgroup v{version} {} ({})",
                    part.controller(),
                    p.parent.display()
                )
            }),
        })
        .collect()
}

pub(super) fn check(bounds: &Bounds) -> Result<(), BoundsError> {
    for part in PARTS.into_iter().filter(|p| p.wanted(bounds)) {
        place(part).map_err(|why| BoundsError::Unsupported {
            policy: bounds.policy.clone(),
            part: part.name(),
            why,
        })?;
    }
    Ok(())
}

impl TaskCgroups {
    /// The cgroups for the `n`th process this host starts under `bounds`; `None` when the bounds
    /// set no limit or a limit has no place here (the wrapper then refuses it, as [`super::check`]
    /// did at the start).
    #[must_use]
    pub fn for_spawn(bounds: &Bounds, n: u64) -> Option<Self> {
        let me = std::process::id();
        let name = format!("{PREFIX}{me}-{}-{n}", crate::cgroup::start_time(me)?);
        let dirs: Option<Vec<Dir>> = PARTS
            .into_iter()
            .filter(|p| p.wanted(bounds))
            .map(|part| {
                let place = place(part).ok()?;
                Some(Dir {
                    part,
                    v2: place.v2,
                    path: place.parent.join(&name),
                })
            })
            .collect();
        dirs.filter(|d| !d.is_empty()).map(|dirs| Self { dirs })
    }

    /// The distinct directories (on v2 every part shares one), for messages and tests.
    #[must_use]
    pub fn paths(&self) -> Vec<&Path> {
        let mut paths: Vec<&Path> = self.dirs.iter().map(|d| d.path.as_path()).collect();
        paths.dedup();
        paths
    }

    /// Ends every process left in the cgroups (a task's processes end with it) and removes them.
    /// True when all are gone.
    pub fn remove(&self) -> bool {
        self.paths().into_iter().all(kill_and_remove)
    }

    /// How many processes of the task the kernel's OOM killer ended for its memory limit.
    fn oom_kills(&self) -> u64 {
        let Some(dir) = self.dir(Part::Memory) else {
            return 0;
        };
        let file = if dir.v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        std::fs::read_to_string(dir.path.join(file))
            .ok()
            .and_then(|text| {
                text.lines()
                    .find_map(|l| l.strip_prefix("oom_kill "))
                    .and_then(|n| n.trim().parse().ok())
            })
            .unwrap_or(0)
    }
}

/// Makes the task's cgroups, writes its limits and moves this process into them (in the wrapper,
/// while privileged). A limit with no cgroup passed, or whose controller is denied (see
/// [`super::DENY_ENV`]), is refused.
pub(super) fn join(bounds: &Bounds, cgroups: Option<&TaskCgroups>) -> Result<(), BoundsError> {
    for part in PARTS.into_iter().filter(|p| p.wanted(bounds)) {
        let dir = cgroups.and_then(|c| c.dir(part));
        let Some(dir) = dir.filter(|_| !denied(part.controller())) else {
            check(bounds)?;
            return Err(BoundsError::Unsupported {
                policy: bounds.policy.clone(),
                part: part.name(),
                why: "the host named no cgroup for it".into(),
            });
        };
        let failed = |source| BoundsError::Failed {
            policy: bounds.policy.clone(),
            part: part.name(),
            source,
        };
        match std::fs::create_dir(&dir.path) {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(failed(e)),
            _ => {}
        }
        for (file, value) in limit_files(bounds, dir) {
            write(&dir.path.join(file), &value).map_err(failed)?;
        }
        write(
            &dir.path.join("cgroup.procs"),
            &std::process::id().to_string(),
        )
        .map_err(failed)?;
    }
    Ok(())
}

/// The files that set `dir`'s limit, in order, with their values. Swap counts toward the memory
/// limit where the kernel accounts it (v1 `memory.memsw.limit_in_bytes` at the same value, v2
/// `memory.swap.max` 0), so a task cannot outgrow it into swap.
fn limit_files(bounds: &Bounds, dir: &Dir) -> Vec<(&'static str, String)> {
    let exists = |file: &str| dir.path.join(file).exists();
    match (dir.part, dir.v2) {
        (Part::Memory, v2) => {
            let bytes = bounds.memory_max.unwrap_or(u64::MAX).to_string();
            let (swap, swap_value) = match v2 {
                false => ("memory.memsw.limit_in_bytes", &bytes),
                true => ("memory.swap.max", &"0".to_owned()),
            };
            let mut files = vec![(Part::Memory.limit_file(v2), bytes.clone())];
            if exists(swap) {
                files.push((swap, swap_value.clone()));
            }
            // v2 ends the whole task at its limit, not only the process that allocated last (v1
            // has no such switch: there the OOM killer ends the largest process alone).
            if v2 && exists("memory.oom.group") {
                files.push(("memory.oom.group", "1".to_owned()));
            }
            files
        }
        (Part::Pids, v2) => vec![(
            Part::Pids.limit_file(v2),
            bounds.pids_max.unwrap_or(0).to_string(),
        )],
        (Part::Cpu, v2) => {
            // The kernel's least quota is 1 ms per period.
            let quota = (bounds.cpu_max_millis.unwrap_or(0) * CPU_PERIOD_US / 1000).max(1000);
            match v2 {
                false => vec![
                    ("cpu.cfs_period_us", CPU_PERIOD_US.to_string()),
                    ("cpu.cfs_quota_us", quota.to_string()),
                ],
                true => vec![("cpu.max", format!("{quota} {CPU_PERIOD_US}"))],
            }
        }
    }
}

fn write(file: &Path, value: &str) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(file)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", file.display())))
}

/// Kills every process in `cgroup` until it is empty (v1 has no `cgroup.kill`; a fork racing the
/// kills is caught by the next round), then removes it; gives up after a second.
///
/// A pid read from `cgroup.procs` may be a process that ended and whose pid another, outside the
/// cgroup, has taken since: each is pinned with a pidfd and killed only when the cgroup still
/// lists it once pinned, so the signal reaches a member or no one.
fn kill_and_remove(cgroup: &Path) -> bool {
    let deadline = Instant::now() + Duration::from_secs(1);
    let members = || -> Vec<i32> {
        std::fs::read_to_string(cgroup.join("cgroup.procs"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    loop {
        let pinned: Vec<(i32, std::os::fd::OwnedFd)> = members()
            .into_iter()
            .filter_map(|pid| {
                let process = rustix::process::Pid::from_raw(pid)?;
                let fd = rustix::process::pidfd_open(process, rustix::process::PidfdFlags::empty());
                Some((pid, fd.ok()?))
            })
            .collect();
        let still = members();
        for (_, fd) in pinned.iter().filter(|(pid, _)| still.contains(pid)) {
            let _ = rustix::process::pidfd_send_signal(fd, rustix::process::Signal::KILL);
        }
        match std::fs::remove_dir(cgroup) {
            Ok(()) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => {
                tracing::warn!(cgroup = %cgroup.display(), error = %e, "a task cgroup stays");
                return false;
            }
        }
    }
}

/// Removes the empty task cgroups of hosts that are gone (one still in use, e.g. by a task a
/// successor took over, stays until it is empty and a later host starts).
pub fn sweep() {
    let mut parents: Vec<PathBuf> = PARTS
        .into_iter()
        .filter_map(|p| place(p).ok())
        .map(|p| p.parent)
        .collect();
    parents.dedup();
    for parent in parents {
        let Ok(entries) = std::fs::read_dir(&parent) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(fields) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
                continue;
            };
            let numbers: Vec<u64> = fields.split('-').filter_map(|f| f.parse().ok()).collect();
            let &[pid, started, _n] = numbers.as_slice() else {
                continue;
            };
            let alive = u32::try_from(pid)
                .ok()
                .and_then(crate::cgroup::start_time)
                .is_some_and(|s| s == started);
            if !alive && std::fs::remove_dir(entry.path()).is_ok() {
                tracing::info!(cgroup = %entry.path().display(), "removed a gone host's task cgroup");
            }
        }
    }
}

/// What a limit ended: the memory limit, when the kernel's OOM killer ended a process of the task
/// and the task's process died of `SIGKILL` (or, as a shell reports it, exited 137).
pub(super) fn ended_by(
    bounds: &Bounds,
    cgroups: Option<&TaskCgroups>,
    exit: &crate::Exit,
) -> Option<String> {
    let limit = bounds.memory_max?;
    let killed = matches!(exit, crate::Exit::Signal(9) | crate::Exit::Code(137));
    (killed && cgroups?.oom_kills() > 0).then(|| format!("memory limit {}", bytes(limit)))
}

/// `bytes` as people write it: `256 MiB`, `2 GiB`, `1536 KiB`, `1000 bytes`.
fn bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    UNITS
        .iter()
        .find(|(size, _)| n >= *size && n.is_multiple_of(*size))
        .map_or_else(
            || format!("{n} bytes"),
            |(size, unit)| format!("{} {unit}", n / size),
        )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_limit_in_whole_units_is_said_in_them() {
        assert_eq!(super::bytes(256 << 20), "256 MiB");
        assert_eq!(super::bytes(2 << 30), "2 GiB");
        assert_eq!(super::bytes(1000), "1000 bytes");
    }
}
