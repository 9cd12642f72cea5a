//! A cgroup v2 of the host's task processes, where the kernel lets this user make one (root, or a
//! delegated subtree): every process the keeper spawns, and everything they start, stays in it
//! whatever it does to its group, session or environment, and `cgroup.kill` ends them all at once.
//!
//! The keeper joins the cgroup before it spawns anything (its children are born in it) and, when
//! its host is gone, kills the cgroup after its own rounds and removes it. Should the keeper and the
//! host both be killed, the next host started by a user who may write there ends what a dead host's
//! cgroup still holds: the cgroup is named after its host's pid and start time, so a dead host's is
//! told from a live one's without a guess. A dead host's cgroup whose keeper still runs is left to
//! it: the keeper holds the tasks for a successor (or serves one) and ends the cgroup itself.
//!
//! The readers of where cgroups are mounted and which a process is in serve the bounds' task
//! cgroups too.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The prefix of every host's cgroup name.
const PREFIX: &str = "taskhost-";

/// The cgroup v2 directory this process belongs to: the unified hierarchy's mount point joined with
/// its path there.
fn own_cgroup() -> Option<PathBuf> {
    Some(mount_of(&mounts(), true, "")?.join(own_path(str::is_empty)?))
}

/// The cgroup mounts of this process's view: (file system type, super options, mount point).
pub(crate) fn mounts() -> Vec<(String, String, PathBuf)> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    info.lines()
        .filter_map(|line| {
            let (fields, fs) = line.split_once(" - ")?;
            let point = fields.split_whitespace().nth(4)?;
            let mut fs = fs.split_whitespace();
            let (kind, _source, options) = (fs.next()?, fs.next()?, fs.next()?);
            kind.starts_with("cgroup")
                .then(|| (kind.to_owned(), options.to_owned(), PathBuf::from(point)))
        })
        .collect()
}

/// The mount point of the v2 hierarchy (`v2`), else of the v1 hierarchy that has `controller`,
/// among `mounts` (as [`mounts`] reads them).
pub(crate) fn mount_of<'a>(
    mounts: &'a [(String, String, PathBuf)],
    v2: bool,
    controller: &str,
) -> Option<&'a PathBuf> {
    mounts
        .iter()
        .find(|(kind, options, _)| match v2 {
            true => kind == "cgroup2",
            false => kind == "cgroup" && options.split(',').any(|c| c == controller),
        })
        .map(|(_, _, point)| point)
}

/// The (controllers, path) of each hierarchy process `process` (a pid, or `self`) is in, as its
/// `/proc/PROCESS/cgroup` says (`""` controllers: the v2 hierarchy); `None` when it cannot be read
/// (no such process).
pub(crate) fn memberships(process: &str) -> Option<Vec<(String, String)>> {
    let lines = std::fs::read_to_string(format!("/proc/{process}/cgroup")).ok()?;
    let memberships = lines
        .lines()
        .filter_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            Some((controllers.to_owned(), path.to_owned()))
        })
        .collect();
    Some(memberships)
}

/// This process's cgroup in the hierarchy whose controller list satisfies `wanted` (`""` is the
/// v2 hierarchy).
pub(crate) fn own_path(wanted: impl Fn(&str) -> bool) -> Option<String> {
    memberships("self")?
        .into_iter()
        .find(|(controllers, _)| wanted(controllers))
        .map(|(_, path)| path.trim_start_matches('/').to_owned())
}

/// A process's start time (clock ticks since boot), which tells it from a later one with its pid.
pub(crate) fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields follow the last `)`.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Makes this host's cgroup next to the cgroups of other hosts, after ending what the cgroups of
/// dead hosts still hold. `None` where there is no cgroup v2 or this user may not make one there.
pub(crate) fn create() -> Option<PathBuf> {
    let parent = own_cgroup()?;
    sweep_dead(&parent);
    let me = std::process::id();
    let path = parent.join(format!("{PREFIX}{me}-{}", start_time(me)?));
    match std::fs::create_dir(&path) {
        Ok(()) => Some(path),
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "no cgroup for the task processes");
            None
        }
    }
}

/// Ends and removes the cgroups of hosts that are gone.
fn sweep_dead(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some((pid, started)) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|n| n.split_once('-'))
            .and_then(|(p, s)| Some((p.parse::<u32>().ok()?, s.parse::<u64>().ok()?)))
        else {
            continue;
        };
        // A dead host's keeper that still runs holds its tasks for a successor (or serves one):
        // its cgroup is the keeper's to end.
        if start_time(pid) != Some(started) && !holds_a_keeper(&entry.path()) {
            let ended = kill_and_remove(&entry.path());
            tracing::info!(cgroup = %entry.path().display(), ended, "ended what a dead host's cgroup held");
        }
    }
}

/// True when a keeper process (`taskhost keeper ...`) is a member of `cgroup`. A process under
/// `no_new_privs` is none, whatever its arguments, when this host is not under it: every bounded
/// task has it and a keeper has what its host had, so a bounded task cannot pass for a keeper and
/// keep a dead host's cgroup from being ended. (A host started under `no_new_privs` cannot tell
/// them apart by it, and goes by the arguments alone.)
fn holds_a_keeper(cgroup: &Path) -> bool {
    let Ok(procs) = std::fs::read_to_string(cgroup.join("cgroup.procs")) else {
        return false;
    };
    let bounded = |process: &str| {
        std::fs::read_to_string(format!("/proc/{process}/status"))
            .is_ok_and(|status| status.lines().any(|l| l == "NoNewPrivs:\t1"))
    };
    let telling = !bounded("self");
    procs.split_whitespace().any(|pid| {
        let named = std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|cmdline| cmdline.split(|b| *b == 0).nth(1) == Some(b"keeper"));
        named && !(telling && bounded(pid))
    })
}

/// Moves the calling process into `cgroup`, so every process it starts from now on is born there.
pub(crate) fn join(cgroup: &Path) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(cgroup.join("cgroup.procs"))?
        .write_all(b"0")
}

/// Ends every process in `cgroup` (`cgroup.kill`), waits up to a second for it to empty, and removes
/// it. The calling process first moves out to the parent, if it is a member. True when it is gone.
pub(crate) fn kill_and_remove(cgroup: &Path) -> bool {
    if let Some(parent) = cgroup.parent() {
        let me = std::process::id().to_string();
        let member = std::fs::read_to_string(cgroup.join("cgroup.procs"))
            .is_ok_and(|procs| procs.lines().any(|l| l == me));
        if member {
            let _ = std::fs::OpenOptions::new()
                .write(true)
                .open(parent.join("cgroup.procs"))
                .and_then(|mut f| f.write_all(me.as_bytes()));
        }
    }
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .open(cgroup.join("cgroup.kill"))
        .and_then(|mut f| f.write_all(b"1"));
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        match std::fs::remove_dir(cgroup) {
            Ok(()) => return true,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return true,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
            Err(_) => return false,
        }
    }
}
