//! Processes that left their task's process group (`setsid`, a daemonizing double fork) and would
//! otherwise outlive the task.
//!
//! The host is a child subreaper, so such a process becomes the host's child when its parent dies.
//! Every spawned child carries [`MARKER`] naming the host and the process it belongs to, and
//! descendants inherit it. After a process settles, [`Escaped::sweep`] ends every adopted child whose
//! marker names a settled process of this host, and reaps it; killing one adopts its children in turn,
//! so the sweep repeats until a round finds nothing. A descendant that cleared its environment is not
//! recognised (only a cgroup could tell): it lives on after its task, is reaped if it exits, and is
//! ended with the host when the binary exits ([`end_all_children`]).

use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

/// The environment variable naming a child's host and process:
/// `<host pid>:<service number>:<process number>`.
pub const MARKER: &str = taskhost_common::PROCESS_MARKER;

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

/// The live processes of a service: process number to process group (the group leader's pid, which
/// the runtime reaps itself).
pub type Live = Arc<Mutex<HashMap<u64, i32>>>;

/// What the sweep knows: adopted children with their process number, and the process groups that
/// are this host's (spawned groups and adopted daemons' groups) while any member of them exists.
pub struct Escaped {
    service: u64,
    live: Live,
    state: Mutex<Known>,
    /// Held shared from a spawn until its child is registered live, and exclusively while a sweep
    /// round decides: a sweep never sees a child of this host that is not yet known as spawned.
    gate: RwLock<()>,
    /// Sweeps asked for and done: one sweep runs at a time and serves every request made before it
    /// started, so a burst of settlements costs a few sweeps, not one blocked thread each.
    requests: Mutex<Requests>,
    done: tokio::sync::watch::Sender<u64>,
}

#[derive(Default)]
struct Requests {
    asked: u64,
    running: bool,
    groups: Vec<i32>,
}

#[derive(Default)]
struct Known {
    adopted: HashMap<i32, u64>,
    groups: HashSet<i32>,
}

/// Most rounds of one sweep that end something: each ends one more level of a daemon's descendants.
const MAX_ROUNDS: usize = 16;
/// Longest a sweep waits for the killed members of the settled groups, and the groups of the daemons
/// it killed, to die and be adopted. Rounds that only wait do not count against [`MAX_ROUNDS`]: on a
/// loaded machine a killed group can take longer than sixteen 1 ms waits to empty, and a descendant
/// adopted after the sweep gave up would outlive its task.
const GROUP_WAIT: Duration = Duration::from_millis(500);

impl Escaped {
    /// The escape tracking of a service whose live processes are `live`.
    pub fn new(live: Live) -> Self {
        Self {
            service: next_service(),
            live,
            state: Mutex::default(),
            gate: RwLock::new(()),
            requests: Mutex::default(),
            done: tokio::sync::watch::Sender::new(0),
        }
    }

    /// Ends what escaped from processes that settled, once `group` (a settled process's group, if
    /// it had one) is gone: resolves when a sweep that started after this call has finished. Sweeps
    /// run on the runtime's blocking pool, one at a time, each serving every request made before it.
    ///
    /// # Cancel safety
    /// Dropping the future leaves the sweep it asked for to run without it.
    pub async fn settled(self: &Arc<Self>, group: Option<i32>) {
        let mut done = self.done.subscribe();
        let ticket = {
            let mut r = self.requests.lock();
            r.asked += 1;
            r.groups.extend(group);
            if !r.running {
                r.running = true;
                let this = self.clone();
                tokio::task::spawn_blocking(move || this.serve_requests());
            }
            r.asked
        };
        let _ = done.wait_for(|&d| d >= ticket).await;
    }

    /// Runs sweeps until every request made so far is served.
    fn serve_requests(&self) {
        /// Should a sweep panic, its waiters are released and the next request starts a runner.
        struct Unwind<'a>(&'a Escaped);
        impl Drop for Unwind<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    let mut r = self.0.requests.lock();
                    r.running = false;
                    self.0.done.send_replace(r.asked);
                }
            }
        }
        let _unwind = Unwind(self);
        loop {
            let (ticket, groups) = {
                let mut r = self.requests.lock();
                (r.asked, std::mem::take(&mut r.groups))
            };
            self.sweep(&groups);
            self.done.send_replace(ticket);
            let mut r = self.requests.lock();
            if r.asked == ticket {
                r.running = false;
                return;
            }
        }
    }

    /// The marker value for this service's process number `n`.
    pub fn marker(&self, n: u64) -> String {
        marker_value(self.service, n)
    }

    /// What every marker of this service starts with.
    pub fn marker_prefix(&self) -> String {
        format!("{}:{}:", std::process::id(), self.service)
    }

    /// Records a spawned process group as this host's: an orphaned member that dies as the host's
    /// child is then reaped by the sweep.
    pub fn own_group(&self, pgid: i32) {
        self.lock().groups.insert(pgid);
    }

    /// Held from just before a spawn until the child is in the live map; spawns hold it together, a
    /// sweep round waits for them.
    pub fn spawning(&self) -> RwLockReadGuard<'_, ()> {
        self.gate.read()
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, Known> {
        self.state.lock()
    }

    /// Ends and reaps every adopted child whose process is not live (group leaders of live processes
    /// are the runtime's to reap and are never touched), reaps this host's orphaned zombies, and
    /// waits (bounded by [`GROUP_WAIT`]) until nothing is left of `settled`, groups just ended, nor
    /// of the groups of the daemons it killed. Each round reads
    /// the live map afresh while no spawn is between its fork and its registration
    /// ([`Escaped::spawning`]). Returns the processes it ended. Blocking: run it off the async workers.
    pub fn sweep(&self, settled: &[i32]) -> usize {
        let mut known = self.lock();
        let deadline = Instant::now() + GROUP_WAIT;
        let mut ended = 0;
        let mut spawned: HashSet<i32>;
        let mut killed: Vec<i32> = Vec::new();
        let mut rounds = 0;
        loop {
            let gate = self.gate.write();
            let (live, now_spawned) = {
                let live = self.live.lock();
                let numbers: HashSet<u64> = live.keys().copied().collect();
                let pids: HashSet<i32> = live.values().copied().collect();
                (numbers, pids)
            };
            spawned = now_spawned;
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
            progressed |= end_orphans(&mut known, &live, &mut killed, &mut ended);
            drop(gate);
            if progressed {
                rounds += 1;
                if rounds >= MAX_ROUNDS {
                    break;
                }
                continue;
            }
            // The children list of /proc is read while processes die: a round can miss an orphan
            // whose group is still there, so the sweep looks again until those groups are gone.
            let waiting = Instant::now() < deadline
                && settled.iter().chain(&killed).any(|&g| group_exists(g));
            if !waiting {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
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
pub fn group_exists(pgid: i32) -> bool {
    killpg(Pid::from_raw(pgid), None).is_ok()
}

/// Ends and reaps every child this process has, whoever it came from, until none is left or `within`
/// has passed; returns how many it ended. Each is killed with its process group (ending one can
/// orphan its own children to this subreaper, so it repeats).
///
/// Only for a process that is a taskhost and nothing else, as its last step (the binary, after
/// [`super::ProcessService::shutdown`]): its children are then all descendants of its tasks, a daemon that
/// cleared the `TASKHOST_PROCESS` marker from its environment included, which no sweep can attribute to a task. A program
/// that embeds the host and has children of its own must not call it.
pub fn end_all_children(within: Duration) -> usize {
    let deadline = Instant::now() + within;
    let mut ended = 0;
    loop {
        let children = direct_children();
        if children.is_empty() || Instant::now() >= deadline {
            return ended;
        }
        for pid in children {
            if let Some((false, _)) = stat(pid) {
                kill_with_group(pid);
                ended += 1;
            }
            reap(pid);
        }
    }
}

/// SIGKILLs `pid` with the process group it leads, or alone when it leads none.
fn kill_with_group(pid: i32) {
    let p = Pid::from_raw(pid);
    if killpg(p, Signal::SIGKILL).is_err() {
        let _ = kill(p, Signal::SIGKILL);
    }
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

/// Reaps, as each ends, the children this process has before it started any of its own: a host
/// that re-executed itself (an upgrade) inherits the old image's, whose waits went with it (keepers
/// that died and were not yet reaped, tasks their keeper's death left to the host, their zombies).
/// Waits on a thread of its own, which ends with the last of them. To be called first thing, so
/// that no child of this image's own is waited for here.
pub fn reap_inherited() {
    let mut left = direct_children();
    if left.is_empty() {
        return;
    }
    let reaping = std::thread::Builder::new()
        .name("taskhost-inherited".into())
        .spawn(move || {
            while !left.is_empty() {
                // Reaped, or no longer this process's child (its owner reaped it): done with it.
                left.retain(|&pid| {
                    matches!(
                        waitpid(Pid::from_raw(pid), Some(WaitPidFlag::WNOHANG)),
                        Ok(WaitStatus::StillAlive)
                    )
                });
                if !left.is_empty() {
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        });
    if let Err(e) = reaping {
        tracing::warn!(error = %e, "cannot wait for the children the previous image left");
    }
}

/// Ends and reaps each adopted child whose task is no longer live (`live`, by number), with its
/// group; adds the ended to `killed` and `ended`. Whether any was reaped.
fn end_orphans(
    known: &mut Known,
    live: &HashSet<u64>,
    killed: &mut Vec<i32>,
    ended: &mut usize,
) -> bool {
    let mut progressed = false;
    let Known { adopted, groups } = known;
    adopted.retain(|&pid, n| {
        let zombie = stat(pid).is_none_or(|(z, _)| z);
        if live.contains(n) && !zombie {
            return true;
        }
        if !zombie {
            // After `setsid` the daemon leads its own group: end that group with it.
            groups.insert(pid);
            killed.push(pid);
            kill_with_group(pid);
            *ended += 1;
        }
        if !reap(pid) {
            // Not dead yet (uninterruptible sleep): the next sweep tries again.
            return true;
        }
        progressed = true;
        false
    });
    progressed
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
