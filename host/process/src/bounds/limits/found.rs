//! The cgroups of a process this host did not start (a predecessor's task it took over, whose hold
//! does not name them), found from the process itself: its host named them after its own number
//! for the process (`taskhost-<host pid>-<host start time>-<n>`), which the hold carries.

use std::path::PathBuf;

use super::dirs::{Dir, PARTS, PREFIX, Part, TaskCgroups, mounts};

impl TaskCgroups {
    /// The task cgroups that process `pid`, the leader of the `n`th process its host started, is
    /// in; `None` when it is in none (an unbounded task, one with no limit, one already gone).
    #[must_use]
    pub fn of_process(pid: i32, n: u64) -> Option<Self> {
        let lines = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        // (controllers, path) of each task cgroup: most handed-over tasks have none, and then the
        // mounts are not read.
        let named: Vec<(&str, &str)> = lines
            .lines()
            .filter_map(|line| {
                let mut fields = line.splitn(3, ':');
                let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
                named_for(path, n).then_some((controllers, path))
            })
            .collect();
        if named.is_empty() {
            return None;
        }
        let all = mounts();
        let mount_of = |v2: bool, controller: &str| -> Option<PathBuf> {
            all.iter()
                .find(|(kind, options, _)| match v2 {
                    true => kind == "cgroup2",
                    false => kind == "cgroup" && options.split(',').any(|c| c == controller),
                })
                .map(|(_, _, point)| point.clone())
        };
        let mut dirs = Vec::new();
        for (controllers, path) in named {
            let relative = path.trim_start_matches('/');
            let v2 = controllers.is_empty();
            for part in PARTS {
                let Some(root) = mount_of(v2, part.controller()) else {
                    continue;
                };
                let path = root.join(relative);
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

    /// The memory limit its memory cgroup holds, in bytes; `None` without one.
    #[must_use]
    pub fn memory_limit(&self) -> Option<u64> {
        let dir = self.dirs.iter().find(|d| d.part == Part::Memory)?;
        let text = std::fs::read_to_string(dir.path.join(Part::Memory.limit_file(dir.v2))).ok()?;
        // v1 says "no limit" with a huge number (the largest page-aligned `i64`).
        text.trim().parse().ok().filter(|n| *n < 1 << 62)
    }
}

/// Whether the cgroup at `path` is a task cgroup named for its host's `n`th process.
fn named_for(path: &str, n: u64) -> bool {
    let name = path.rsplit('/').next().unwrap_or_default();
    let Some(fields) = name.strip_prefix(PREFIX) else {
        return false;
    };
    let numbers: Vec<u64> = fields.split('-').filter_map(|f| f.parse().ok()).collect();
    matches!(numbers.as_slice(), &[_, _, m] if m == n) && fields.split('-').count() == 3
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_task_cgroup_is_known_by_the_number_its_host_gave_the_process() {
        assert!(super::named_for("/user.slice/taskhost-41-9000-7", 7));
        assert!(!super::named_for("/user.slice/taskhost-41-9000-7", 70));
        assert!(!super::named_for("/user.slice/taskhost-41-9000", 9000));
        assert!(!super::named_for("/user.slice/taskhost-41-x-9000-7", 7));
        assert!(!super::named_for("/taskhost-41-9000-7/other", 7));
    }
}
