//! The cgroups of a process this host did not start (a predecessor's task it took over, whose hold
//! does not name them). Its host named them `taskhost-<host pid>-<host start time>-<n>`, after
//! itself and its own number for the process, which the hold carries; the host is one of those
//! whose tasks the keeper held. The task's leader, while it runs, says where they are; a leader
//! that ended while no host ran (the keeper reaped it) leaves the names alone, looked up where this
//! host makes task cgroups. A pid reused since names a process whose cgroups carry no such name.

use std::path::PathBuf;

use super::dirs::{Dir, PARTS, PREFIX, Part, TaskCgroups, place};
use crate::cgroup::{memberships, mount_of, mounts};

impl TaskCgroups {
    /// The task cgroups of the handed-over process numbered `n` by one of the hosts `hosts`,
    /// whose leader was `pgid`; `None` when it has none (an unbounded task, one with no limit).
    /// A leader that runs is looked up in its own cgroups only; the names are searched only for a
    /// leader that is gone.
    #[must_use]
    pub fn of_handed(pgid: i32, n: u64, hosts: &[u32]) -> Option<Self> {
        match memberships(&pgid.to_string()) {
            Some(memberships) => Self::of_process(memberships, n, hosts),
            None => Self::by_name(n, hosts),
        }
    }

    /// The task cgroups named for `n` and one of `hosts` among a process's `memberships`.
    fn of_process(memberships: Vec<(String, String)>, n: u64, hosts: &[u32]) -> Option<Self> {
        // Most handed-over tasks are in none, and then the mounts are not read.
        let named: Vec<(String, String)> = memberships
            .into_iter()
            .filter(|(_, path)| named_for(path, n, hosts))
            .collect();
        if named.is_empty() {
            return None;
        }
        let all = mounts();
        let mut dirs = Vec::new();
        for (controllers, path) in named {
            let v2 = controllers.is_empty();
            for part in PARTS {
                let Some(root) = mount_of(&all, v2, part.controller()) else {
                    continue;
                };
                let path = root.join(path.trim_start_matches('/'));
                let here = match v2 {
                    // One directory for every part; a part its parent did not enable has no file.
                    true => path.join(part.limit_file(true)).exists(),
                    false => controllers.split(',').any(|c| c == part.controller()),
                };
                if here {
                    dirs.push(Dir { part, v2, path });
                }
            }
        }
        (!dirs.is_empty()).then_some(Self { dirs })
    }

    /// The task cgroups named for `n` and one of `hosts` where this host makes its own: one name
    /// a part, else none of that part (two would be a guess).
    fn by_name(n: u64, hosts: &[u32]) -> Option<Self> {
        let mut dirs = Vec::new();
        for part in PARTS {
            let Ok(place) = place(part) else {
                continue;
            };
            let Ok(entries) = std::fs::read_dir(&place.parent) else {
                continue;
            };
            let found: Vec<PathBuf> = entries
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_str()
                        .is_some_and(|f| named_for(f, n, hosts))
                })
                .map(|e| e.path())
                .filter(|p| p.join(part.limit_file(place.v2)).exists())
                .collect();
            if let [path] = found.as_slice() {
                dirs.push(Dir {
                    part,
                    v2: place.v2,
                    path: path.clone(),
                });
            }
        }
        (!dirs.is_empty()).then_some(Self { dirs })
    }

    /// The memory limit its memory cgroup holds, in bytes; `None` without one.
    #[must_use]
    pub fn memory_limit(&self) -> Option<u64> {
        let dir = self.dir(Part::Memory)?;
        let file = Part::Memory.limit_file(dir.v2);
        let text = std::fs::read_to_string(dir.path.join(file)).ok()?;
        // v1 says "no limit" with a huge number (the largest page-aligned `i64`).
        text.trim().parse().ok().filter(|n| *n < 1 << 62)
    }
}

/// Whether the cgroup at `path` (or named `path`) is a task cgroup one of `hosts` named for its
/// `n`th process.
fn named_for(path: &str, n: u64, hosts: &[u32]) -> bool {
    let name = path.rsplit('/').next().unwrap_or_default();
    let Some(fields) = name.strip_prefix(PREFIX) else {
        return false;
    };
    let numbers: Option<Vec<u64>> = fields.split('-').map(|f| f.parse().ok()).collect();
    let ours = |host: u64| hosts.iter().any(|h| u64::from(*h) == host);
    matches!(numbers.as_deref(), Some(&[host, _, m]) if m == n && ours(host))
}

#[cfg(test)]
mod tests {
    use super::super::dirs::{PREFIX, Part, place};
    use super::TaskCgroups;

    #[test]
    fn a_running_leader_is_looked_up_in_its_own_cgroups_and_only_a_gone_one_by_name() {
        let Ok(place) = place(Part::Memory) else {
            eprintln!("skipped: no memory cgroup this user may make");
            return;
        };
        // A host pid no process has, so the cgroup can be nobody's.
        let host = 4_000_000_000_u32;
        let dir = place.parent.join(format!("{PREFIX}{host}-1-7"));
        std::fs::create_dir(&dir).expect("a task cgroup named for process 7");
        let running = TaskCgroups::of_handed(std::process::id().cast_signed(), 7, &[host]);
        let gone = TaskCgroups::of_handed(i32::MAX, 7, &[host]);
        std::fs::remove_dir(&dir).expect("remove it");
        assert_eq!(running, None, "a running leader not in it");
        let found = gone.map(|c| c.dirs.into_iter().map(|d| d.path).collect::<Vec<_>>());
        assert_eq!(found, Some(vec![dir]), "a gone leader's, by name");
    }

    #[test]
    fn a_task_cgroup_is_known_by_its_host_and_the_number_its_host_gave_the_process() {
        let named_for = super::named_for;
        assert!(named_for("/user.slice/taskhost-41-9000-7", 7, &[41]));
        assert!(named_for("taskhost-41-9000-7", 7, &[12, 41]));
        assert!(!named_for("/user.slice/taskhost-41-9000-7", 70, &[41]));
        assert!(!named_for("/user.slice/taskhost-41-9000-7", 7, &[42]));
        assert!(!named_for("/user.slice/taskhost-41-9000", 9000, &[41]));
        assert!(!named_for("/user.slice/taskhost-41-x-9000-7", 7, &[41]));
        assert!(!named_for("/taskhost-41-9000-7/other", 7, &[41]));
    }
}
