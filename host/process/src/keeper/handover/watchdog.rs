//! The keeper's watchdog while it waits for a successor: a second small process that ends the
//! held tasks should the keeper itself be killed before it handed them over or ended them. Then
//! the host and the keeper are both gone, and nothing else would end the tasks (the stage-2
//! promise: no task outlives its host and its keeper).
//!
//! The keeper starts it (`taskhost keeper --watchdog`) with a pipe as its stdin and writes what to
//! end: the groups, the marker prefixes and the cgroup. It keeps the pipe open while it waits and
//! writes [`STAND_DOWN`] when the tasks are handed over or ended. The pipe's end without that line
//! is the keeper's death: the watchdog ends everything it was told of, then exits.

use std::collections::HashSet;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The line that tells the watchdog the keeper is done with the wait.
const STAND_DOWN: &str = "stand down";

/// A running watchdog (the keeper's side).
pub(crate) struct Watchdog {
    child: Child,
    stdin: std::fs::File,
}

impl Watchdog {
    /// Starts a watchdog over `groups`, the processes marked with `markers` and `cgroup`; `None`
    /// when it cannot be started (the keeper then waits without one).
    pub(crate) fn start(
        groups: &HashSet<i32>,
        markers: &[String],
        cgroup: Option<&Path>,
    ) -> Option<Self> {
        use std::os::unix::process::CommandExt;
        let groups: Vec<String> = groups.iter().map(i32::to_string).collect();
        let cgroup = cgroup.map(|c| c.display().to_string()).unwrap_or_default();
        let told = format!(
            "groups {}\nmarkers {}\ncgroup {cgroup}\n",
            groups.join(" "),
            markers.join(" ")
        );
        // What to end is in the pipe before the watchdog exists, so a keeper killed the instant
        // its watchdog appeared has told it everything (a list larger than the pipe can be made
        // to hold goes after the start, as it must).
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).ok()?;
        let capacity = told
            .len()
            .saturating_add(4096)
            .try_into()
            .unwrap_or(i32::MAX);
        let _ = nix::fcntl::fcntl(&write, nix::fcntl::FcntlArg::F_SETPIPE_SZ(capacity));
        let holds = nix::fcntl::fcntl(&write, nix::fcntl::FcntlArg::F_GETPIPE_SZ)
            .is_ok_and(|size| usize::try_from(size).is_ok_and(|size| size > told.len()));
        let mut stdin = std::fs::File::from(write);
        if holds && stdin.write_all(told.as_bytes()).is_err() {
            return None;
        }
        let mut child = Command::new("/proc/self/exe")
            .args(["keeper", "--marker", "-", "--watchdog"])
            .env_clear()
            .stdin(Stdio::from(read))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .ok()?;
        if !holds && stdin.write_all(told.as_bytes()).is_err() {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        Some(Self { child, stdin })
    }

    /// The wait is over (handed over, or ended by the keeper): the watchdog exits, and is reaped.
    pub(crate) fn stand_down(mut self) {
        let _ = writeln!(self.stdin, "{STAND_DOWN}");
        drop(self.stdin);
        let _ = self.child.wait();
    }
}

/// The watchdog process: reads what to end from `input`, then waits for the keeper's word; the
/// input's end without it ends everything it was told of.
pub fn watch(input: impl std::io::Read) {
    let mut groups = HashSet::new();
    let mut markers = Vec::new();
    let mut cgroup: Option<PathBuf> = None;
    for line in std::io::BufReader::new(input).lines() {
        let Ok(line) = line else { break };
        if line == STAND_DOWN {
            return;
        }
        if let Some(list) = line.strip_prefix("groups ") {
            groups.extend(
                list.split_whitespace()
                    .filter_map(|g| g.parse::<i32>().ok()),
            );
        } else if let Some(list) = line.strip_prefix("markers ") {
            markers.extend(list.split_whitespace().map(str::to_owned));
        } else if let Some(path) = line.strip_prefix("cgroup ") {
            cgroup = (!path.is_empty()).then(|| PathBuf::from(path));
        }
    }
    crate::keeper::ending::end_everything(&groups, &markers, Duration::from_secs(1));
    if let Some(c) = cgroup {
        crate::cgroup::kill_and_remove(&c);
    }
}
