//! The keeper process's side: it spawns what the host asks for, reaps each child and reports its
//! exit, and when the host's socket closes it ends every group it knows and every marked process.
//!
//! Its descriptor table holds the socket, standard streams and, for the moment of a spawn, the
//! child's three streams: a spawn copies and closes that small table, not the host's, so starting a
//! task costs the same with ten thousand alive as with none.

use parking_lot::{Condvar, Mutex};
use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::wait::waitpid;
use nix::unistd::Pid;

use super::Hold;
use super::ending::end_everything;
use super::fds::Receiver;
use super::handover::held::{Setup, held};
use super::shared::{Shared, State};
use super::wire::{Launch, Report, Request, Slot, Streams};

/// Serves the host on `socket` (the keeper's stdin) until it closes, then ends every group the host
/// registered or the keeper spawned and every process whose marker starts with `marker_prefix`,
/// and last everything in `cgroup` (the host's, which the keeper joins first so that every child is
/// born in it), which it removes. Returns how many signals the rounds took.
pub fn serve(socket: BorrowedFd<'_>, marker_prefix: &str, cgroup: Option<&Path>) -> usize {
    // The spawn requests carry the children's environments: no other process of the user may read
    // them from this one's memory or `/proc` entries.
    let _ = nix::sys::prctl::set_dumpable(false);
    close_inherited();
    default_terminal_signals();
    // Every child is born in the host's cgroup, whatever it later does to its group or environment.
    let cgroup = cgroup.filter(|c| crate::cgroup::join(c).is_ok());
    let ended = serve_host(socket, marker_prefix, cgroup);
    if let Some(c) = cgroup {
        crate::cgroup::kill_and_remove(c);
    }
    ended
}

/// [`serve`] less the cgroup: spawns until the host's socket closes, hands the host's tasks to a
/// successor when the host asked for a handover, then ends what is left.
fn serve_host(socket: BorrowedFd<'_>, marker_prefix: &str, cgroup: Option<&Path>) -> usize {
    let markers = vec![marker_prefix.to_owned()];
    let out = match socket.try_clone_to_owned() {
        Ok(fd) => UnixStream::from(fd),
        Err(_) => return end_everything(&HashSet::new(), &markers, Duration::from_secs(1)),
    };
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            out,
            ids: HashMap::new(),
            count: 0,
            host_gone: false,
            held: HashMap::new(),
            handover: None,
            markers: markers.clone(),
            next_id: 0,
            kept_dir: None,
            carried: Vec::new(),
            watching: false,
        }),
        spawned: Condvar::new(),
    });
    let reaper = shared.clone();
    if std::thread::Builder::new()
        .name("reaper".into())
        .spawn(move || reap_forever(&reaper))
        .is_err()
    {
        // A keeper that cannot reap must not spawn: exiting makes the host start another.
        return end_everything(&HashSet::new(), &markers, Duration::from_secs(1));
    }
    let mut groups = HashSet::new();
    serve_one(&shared, socket, &mut groups);
    while let Some(successor) = super::handover::wait::wait(&shared, &mut groups, cgroup) {
        serve_one(&shared, successor.as_fd(), &mut groups);
    }
    let markers = shared.state.lock().markers.clone();
    end_everything(&groups, &markers, Duration::from_secs(1))
}

/// Serves one host's requests until its socket closes.
fn serve_one(shared: &Arc<Shared>, socket: BorrowedFd<'_>, groups: &mut HashSet<i32>) {
    let mut frames = Receiver::new();
    while let Ok(Some(body)) = frames.next(socket) {
        match Request::decode(&body).map(Request::typed) {
            Ok(Request::Spawn {
                id,
                launch,
                streams,
            }) => spawn_request(shared, &mut frames, groups, (id, &launch, streams), None),
            Ok(Request::SpawnHeld {
                id,
                launch,
                streams,
                hold,
            }) => spawn_request(
                shared,
                &mut frames,
                groups,
                (id, &launch, streams),
                Some(hold),
            ),
            Ok(Request::Watch { pgid }) => {
                if pgid > 1 {
                    groups.insert(pgid);
                }
            }
            Ok(Request::Forget { pgid }) => {
                groups.remove(&pgid);
                let mut st = shared.state.lock();
                st.held.remove(&pgid);
                if let Some(i) = st.carried.iter().position(|&g| g == pgid) {
                    st.carried.swap_remove(i);
                    st.ids.remove(&pgid);
                }
            }
            Ok(Request::Carry { id, pgid, hold }) => match frames.take_fds(hold.descriptors()) {
                Ok(fds) => {
                    groups.insert(pgid);
                    super::handover::carried::carry(shared, id, pgid, hold, fds);
                }
                Err(_) => frames.discard_fds(),
            },
            Ok(request) => held_request(shared, request, &mut frames),
            // Out of step with the host: descriptors received so far belong to no request it knows.
            Err(_) => frames.discard_fds(),
        }
    }
}

/// Spawns what a `Spawn` request asks, with the descriptors beside it, and reports it; with
/// `hold`, holds it for a successor from its start.
fn spawn_request(
    shared: &Shared,
    frames: &mut Receiver,
    groups: &mut HashSet<i32>,
    (id, launch, streams): (u64, &Launch, Streams),
    hold: Option<Hold>,
) {
    let passed = match streams {
        Streams::Slots(slots) => slots.iter().filter(|s| **s == Slot::Passed).count(),
        Streams::Terminal(_) => 0,
    };
    // The hold's descriptors follow the streams'; a start asked to be held is refused without
    // them, never started unheld.
    let fds = frames.take_fds(passed + hold.as_ref().map_or(0, Hold::descriptors_at_start));
    let mut st = shared.state.lock();
    st.next_id = st.next_id.max(id + 1);
    let spawned = fds.map_err(|e| e.to_string()).and_then(|mut fds| {
        let held_fds = fds.split_off(passed);
        let spawned = spawn(launch, streams, fds).map_err(|e| e.to_string())?;
        Ok((spawned, held_fds))
    });
    match spawned {
        Ok(((pid, master), mut held_fds)) => {
            groups.insert(pid);
            st.ids.insert(pid, id);
            st.count += 1;
            shared.spawned.notify_one();
            if let Some(hold) = hold {
                // A terminal's read end is a second handle of the master it hands back.
                let read_end = match (hold.terminal, &master) {
                    (false, _) => Some(()),
                    (true, Some(m)) => m.try_clone().ok().map(|m| held_fds.insert(0, m)),
                    (true, None) => None,
                };
                let dir = st.kept_dir.clone();
                if let Some(held) = read_end.and_then(|()| held(id, hold, held_fds, dir.as_ref())) {
                    st.held.insert(pid, held);
                }
            }
            let report = Report::Spawned {
                id,
                pid,
                master: master.is_some(),
            };
            let fds: Vec<BorrowedFd<'_>> = master.iter().map(AsFd::as_fd).collect();
            st.report_with(&report, &fds);
        }
        Err(cause) => st.report(&Report::Refused { id, cause }),
    }
}

/// A request about holding tasks for a handover: `Hold`, `Rename`, `Handover`, `NoHandover` or
/// `Mark`.
fn held_request(shared: &Shared, request: Request, frames: &mut Receiver) {
    match request {
        Request::Hold { pgid, hold } => {
            let count = hold.descriptors();
            match frames.take_fds(count) {
                Ok(fds) => hold_task(shared, pgid, hold, fds),
                Err(_) => frames.discard_fds(),
            }
        }
        Request::Handover {
            grace_ms,
            host,
            listens,
        } => match frames.take_fds(2 + listens.len()) {
            Ok(fds) => {
                let mut fds = fds.into_iter();
                if let (Some(listener), Some(lock)) = (fds.next(), fds.next()) {
                    shared.state.lock().handover = Some(Setup {
                        grace: Duration::from_millis(grace_ms),
                        host,
                        listener,
                        lock,
                        listens: listens.into_iter().zip(fds).collect(),
                    });
                }
            }
            Err(_) => frames.discard_fds(),
        },
        Request::KeptDir => match frames.take_fds(1) {
            Ok(mut fds) => shared.state.lock().kept_dir = fds.pop().map(Arc::new),
            Err(_) => frames.discard_fds(),
        },
        Request::Rename { pgid, task } => {
            if let Some(held) = shared.state.lock().held.get_mut(&pgid) {
                held.hold.held_as = super::HeldAs::Task(task);
            }
        }
        Request::NoHandover => {
            let mut st = shared.state.lock();
            st.handover = None;
            st.held.clear();
        }
        Request::Mark { prefix } => {
            let mut st = shared.state.lock();
            if !st.markers.contains(&prefix) {
                st.markers.push(prefix);
            }
        }
        _ => {}
    }
}

/// Holds a running task's descriptors for a handover; a process already reaped is not held (its
/// host has its exit).
fn hold_task(shared: &Shared, pgid: i32, hold: Hold, fds: Vec<OwnedFd>) {
    let mut st = shared.state.lock();
    let Some(&id) = st.ids.get(&pgid) else {
        return;
    };
    let dir = st.kept_dir.clone();
    if let Some(held) = held(id, hold, fds, dir.as_ref()) {
        st.held.insert(pgid, held);
    }
}

/// Gives the tasks the default actions of SIGINT and SIGQUIT whatever the host inherited. A shell
/// without job control starts its background commands (`cmd &`) with both ignored, and an ignored
/// signal stays ignored across `exec`: a host started that way handed it on to every task, and a
/// Ctrl-C typed into a task's terminal was echoed and did nothing. A caught signal is reset to its
/// default at `exec`, so the keeper catches both (and does nothing with them: it is in a process
/// group of its own, and only its host's end ends it).
fn default_terminal_signals() {
    use signal_hook::consts::{SIGINT, SIGQUIT};
    let noticed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [SIGINT, SIGQUIT] {
        let _ = signal_hook::flag::register(signal, noticed.clone());
    }
}

/// Closes every descriptor but the standard three that the keeper was started with: whatever its
/// host inherited without close-on-exec (a client's pipe, a terminal's descriptor) would otherwise
/// reach every task, which could then hold that client's pipe open for as long as it runs. Called
/// first, while the keeper is one thread and has opened nothing of its own.
fn close_inherited() {
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let inherited: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    // The directory's own descriptor is among them, closed already: closing it again is EBADF.
    for fd in inherited {
        let _ = nix::unistd::close(fd);
    }
}

/// Spawns `launch` as the leader of a new process group (a new session, for a terminal); returns
/// its pid and, for a terminal, the master.
fn spawn(
    launch: &Launch,
    streams: Streams,
    fds: Vec<OwnedFd>,
) -> std::io::Result<(i32, Option<OwnedFd>)> {
    let mut cmd = Command::new(&launch.program);
    cmd.args(&launch.args)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)));
    if let Some(dir) = &launch.cwd {
        cmd.current_dir(dir);
    }
    let slots = match streams {
        Streams::Slots(slots) => slots,
        Streams::Terminal(size) => {
            // pty-process makes the child a session leader with the terminal as its controlling
            // one (in a `pre_exec`: the keeper's fork copies a small process).
            let (pty, pts) = pty_process::blocking::open().map_err(crate::spawned::pty_error)?;
            pty.resize(pty_process::Size::new(size.rows, size.cols))
                .map_err(crate::spawned::pty_error)?;
            let child = pty_process::blocking::Command::from(cmd)
                .spawn(pts)
                .map_err(crate::spawned::pty_error)?;
            return Ok((child.id() as i32, Some(OwnedFd::from(pty))));
        }
    };
    let mut fds = fds.into_iter();
    let mut slot = |s: Slot| match s {
        Slot::Passed => fds.next().map_or_else(Stdio::null, Stdio::from),
        Slot::Null => Stdio::null(),
    };
    cmd.stdin(slot(slots[0]))
        .stdout(slot(slots[1]))
        .stderr(slot(slots[2]))
        .process_group(0);
    // The child's ends are closed here with `cmd`: only the child holds them.
    let child = cmd.spawn()?;
    Ok((child.id() as i32, None))
}

/// Reaps every child as it exits and reports it to the host. It waits for an exit without reaping
/// (`WNOWAIT`), then reaps under the state lock, where no spawn is under way.
fn reap_forever(shared: &Shared) {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    loop {
        let seen = shared.state.lock().count;
        match waitid(Id::All, WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(_) => {
                // No child: wait for the next spawn.
                let mut st = shared.state.lock();
                if st.count == seen {
                    shared.spawned.wait_for(&mut st, Duration::from_secs(1));
                }
                continue;
            }
        }
        let mut st = shared.state.lock();
        loop {
            let (pid, exit) = match waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)) {
                Err(Errno::EINTR) => continue,
                Ok(status) => match crate::child::reaped(status) {
                    Some(reaped) => reaped,
                    None => break,
                },
                // Nothing more has exited (or a spawn's failed child was already reaped by it).
                Err(_) => break,
            };
            if let Some(held) = st.held.get_mut(&pid) {
                held.exit = Some(exit.clone());
            }
            if let Some(id) = st.ids.remove(&pid) {
                st.report(&Report::Exited { id, exit });
            }
        }
    }
}
