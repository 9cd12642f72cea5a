//! Processes that left their task's process group (`setsid`, a daemonizing double fork) and would
//! otherwise outlive the task.
//!
//! The host is a child subreaper, so such a process becomes the host's child when its parent dies.
//! Every spawned child carries [`MARKER`] naming the host and the process it belongs to, and
//! descendants inherit it. After a process settles, [`Escaped::sweep`] ends every adopted child whose
//! marker names a settled process of this host, and reaps it; killing one adopts its children in turn,
//! so the sweep repeats until a round finds nothing. A descendant that cleared its environment is not
//! recognised (only a cgroup could tell); it is reaped if it exits while adopted and known.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// The environment variable naming a child's host and process:
/// `<host pid>:<service number>:<process number>`.
pub const MARKER: &str = "TASKHOST_PROCESS";

/// The marker value for process number `n` of the service `service` of this host process (one
/// process can hold several services, as the integration tests do).
pub fn marker_value(service: u64, n: u64) -> String {
    format!("{}:{service}:{n}", std::process::id())
}

/// A process-wide unique number for each process service.
pub fn next_service() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// Makes this process the reaper of its orphaned descendants. Process-wide and idempotent; a refusal
/// (not Linux, or a seccomp policy) leaves escaped processes to init, and is logged.
pub fn become_subreaper() {
    if let Err(e) = nix::sys::prctl::set_child_subreaper(true) {
        tracing::warn!(error = %e, "cannot become a child subreaper; escaped daemons will outlive their tasks");
    }
}

/// What the sweep knows: adopted children with their process number, and the process groups that
/// are this host's (spawned groups and adopted daemons' groups) while any member of them exists.
pub struct Escaped {
    service: u64,
    state: Mutex<Known>,
}

impl Default for Escaped {
    fn default() -> Self {
        Self {
            service: next_service(),
            state: Mutex::default(),
        }
    }
}

#[derive(Default)]
struct Known {
    adopted: HashMap<i32, u64>,
    groups: HashSet<i32>,
}

/// Most rounds of one sweep: each round ends one more level of a daemon's descendants.
const MAX_ROUNDS: usize = 16;
/// Longest a sweep waits for the killed members of the settled group to die and be adopted.
const GROUP_WAIT: Duration = Duration::from_millis(500);

impl Escaped {
    /// The marker value for this service's process number `n`.
    pub fn marker(&self, n: u64) -> String {
        marker_value(self.service, n)
    }

    /// Records a spawned process group as this host's: an orphaned member that dies as the host's
    /// child is then reaped by the sweep.
    pub fn own_group(&self, pgid: i32) {
        self.lock().groups.insert(pgid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Known> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Ends and reaps every adopted child whose process is not in `live` (running process numbers),
    /// reaps this host's orphaned zombies, and first waits (bounded) until nothing is left of
    /// `settled`, groups just ended. `spawned` are the pids the runtime reaps itself; they are never
    /// touched. Returns the processes it ended. Blocking: run it off the async workers.
    pub fn sweep(&self, live: &HashSet<u64>, spawned: &HashSet<i32>, settled: &[i32]) -> usize {
        let mut known = self.lock();
        let deadline = Instant::now() + GROUP_WAIT;
        let mut ended = 0;
        for _ in 0..MAX_ROUNDS {
            let mut progressed = false;
            for pid in direct_children() {
                if spawned.contains(&pid) || known.adopted.contains_key(&pid) {
                    continue;
                }
                match stat(pid) {
                    Some((true, pgid)) if known.groups.contains(&pgid) => {
                        progressed |= reap(pid);
                    }
                    Some((false, _)) => {
                        if let Some(n) = own_marker(pid, self.service) {
                            known.adopted.insert(pid, n);
                        }
                    }
                    _ => {}
                }
            }
            let Known { adopted, groups } = &mut *known;
            adopted.retain(|&pid, n| {
                let zombie = stat(pid).is_none_or(|(z, _)| z);
                if live.contains(n) && !zombie {
                    return true;
                }
                if !zombie {
                    let p = Pid::from_raw(pid);
                    // After `setsid` the daemon leads its own group: end that group with it.
                    groups.insert(pid);
                    if killpg(p, Signal::SIGKILL).is_err() {
                        let _ = kill(p, Signal::SIGKILL);
                    }
                    ended += 1;
                }
                if !reap(pid) {
                    // Not dead yet (uninterruptible sleep): the next sweep tries again.
                    return true;
                }
                progressed = true;
                false
            });
            let settling = Instant::now() < deadline && settled.iter().any(|&g| group_exists(g));
            if settling {
                std::thread::sleep(Duration::from_millis(1));
            } else if !progressed {
                break;
            }
        }
        known
            .groups
            .retain(|&g| spawned.contains(&g) || group_exists(g));
        ended
    }

    /// Adopted children known and not yet reaped.
    pub fn adopted(&self) -> usize {
        self.lock().adopted.len()
    }
}

/// True while any process (a zombie included) is in group `pgid`.
fn group_exists(pgid: i32) -> bool {
    killpg(Pid::from_raw(pgid), None).is_ok()
}

/// Reaps the adopted child `pid`, waiting up to 100 ms for a kill to land; false if it is still alive.
fn reap(pid: i32) -> bool {
    let p = Pid::from_raw(pid);
    for _ in 0..100 {
        match waitpid(p, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) => std::thread::sleep(Duration::from_millis(1)),
            // Reaped, or not our child (any more): either way nothing is left to wait for.
            _ => return true,
        }
    }
    false
}

/// This process's children, from every thread's `children` list (an adopted orphan is attached to
/// whichever thread the kernel picked).
fn direct_children() -> Vec<i32> {
    let Ok(threads) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut pids = Vec::new();
    for t in threads.flatten() {
        if let Ok(list) = std::fs::read_to_string(t.path().join("children")) {
            pids.extend(
                list.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    pids
}

/// The process number in `pid`'s marker, when the marker names this host process and `service`.
fn own_marker(pid: i32, service: u64) -> Option<u64> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{MARKER}={}:{service}:", std::process::id());
    environ
        .split(|b| *b == 0)
        .find_map(|var| var.strip_prefix(prefix.as_bytes()))
        .and_then(|n| std::str::from_utf8(n).ok()?.parse().ok())
}

/// Whether `pid` is a zombie, and its process group; `None` once it is gone.
fn stat(pid: i32) -> Option<(bool, i32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name: state, ppid, pgrp.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace();
    let zombie = fields.next()? == "Z";
    let pgid = fields.nth(1)?.parse().ok()?;
    Some((zombie, pgid))
}
