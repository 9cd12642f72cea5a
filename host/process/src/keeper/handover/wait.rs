//! The keeper's side of a handover: when its host is gone (a crash, a SIGKILL, an upgrade), the
//! tasks the host held here keep running for the grace window while the keeper drains their output
//! into their kept files, and the first successor of the host (same user, on the listener the host
//! gave) gets them back, with their descriptors, their exits and what could not be written, and
//! goes on with this keeper as its own.
//!
//! A task the host did not hold (a subagent's agent, a foreground call's process) cannot be carried:
//! it is ended when the handover starts. With no successor within the grace, everything is ended as
//! when no handover was asked for. While the keeper waits it holds the gone host's lock, so no other
//! host of the state directory takes that host's running tasks for lost.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use super::held::{Held, HeldFds, Setup};
use super::watchdog::Watchdog;
use crate::keeper::fds;
use crate::keeper::shared::Shared;
use crate::keeper::wire::Report;
use crate::spill_layout;

/// The most output one stream keeps in memory while no host runs and its file cannot take it.
const STREAM_MEMORY: usize = 4 << 20;
/// The most output all streams keep in memory together while no host runs.
const ALL_MEMORY: usize = 256 << 20;

/// After the host's socket closed: waits for a successor with the tasks held, draining them. Returns
/// the successor's connection, already told everything and installed as the keeper's host; `None`
/// when there was no handover to make or none came within the grace (the caller ends everything).
pub(crate) fn wait(
    shared: &Shared,
    groups: &mut HashSet<i32>,
    cgroup: Option<&std::path::Path>,
) -> Option<UnixStream> {
    let setup = shared.state.lock().handover.take()?;
    let carried: HashSet<i32> = shared.state.lock().held.keys().copied().collect();
    let uncarried: HashSet<i32> = groups.difference(&carried).copied().collect();
    groups.retain(|g| carried.contains(g));
    if carried.is_empty() {
        // No wait: the host's addresses, then the successors' listener, then the lock are let go
        // before the tasks are ended, so a successor that starts once they are gone finds its
        // addresses free, no keeper waiting, and their records its to settle as lost.
        let Setup {
            listens,
            listener,
            lock,
            ..
        } = setup;
        drop(listens);
        drop(listener);
        drop(lock);
        crate::keeper::ending::end_everything(&uncarried, &[], Duration::from_millis(200));
        return None;
    }
    // First the watchdog (the keeper may be killed from now on), then what is not carried.
    let markers = shared.state.lock().markers.clone();
    let watchdog = Watchdog::start(groups, &markers, cgroup);
    crate::keeper::ending::end_everything(&uncarried, &[], Duration::from_millis(200));
    let handed = wait_with(shared, &setup);
    if handed.is_none() {
        // Ended before the watchdog stands down: no moment without one or the other.
        crate::keeper::ending::end_everything(groups, &markers, Duration::from_secs(1));
    }
    if let Some(w) = watchdog {
        w.stand_down();
    }
    handed
}

/// Drains the held tasks until a successor takes them or the grace has passed.
fn wait_with(shared: &Shared, setup: &Setup) -> Option<UnixStream> {
    let listener = UnixListener::from(setup.listener.try_clone().ok()?);
    listener.set_nonblocking(true).ok()?;
    let deadline = Instant::now() + setup.grace;
    let mut in_memory = 0usize;
    loop {
        if let Some(conn) = accept(&listener)
            && let Some(conn) = hand_over(shared, setup, conn)
        {
            return Some(conn);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        let wait = (deadline - now).min(Duration::from_millis(100));
        drain_ready(shared, listener.as_fd(), wait, &mut in_memory);
    }
}

/// A successor that connected, if it runs as this user in this keeper's mount namespace. A
/// bounded task always runs in a mount namespace of its own (its hidden paths), which it cannot
/// leave: however it reached the socket, it is never handed the tasks, the lock and the listeners.
fn accept(listener: &UnixListener) -> Option<UnixStream> {
    use nix::sys::socket::{getsockopt, sockopt};
    let (conn, _) = listener.accept().ok()?;
    let creds = getsockopt(&conn, sockopt::PeerCredentials).ok()?;
    // A kernel before 6.5 has no `SO_PEERPIDFD`: the pid alone is checked there.
    let pidfd = getsockopt(&conn, sockopt::PeerPidfd).ok();
    if creds.uid() != nix::unistd::getuid().as_raw()
        || !peer_in_this_mount_namespace(creds.pid(), pidfd.as_ref())
    {
        return None;
    }
    conn.set_nonblocking(false).ok()?;
    Some(conn)
}

/// Whether the peer, process `pid` when it connected, shares this process's mount namespace (no
/// when either cannot be read). Its pid could name another process by the time `/proc` is read (the
/// peer gone and the pid used again); the peer's `pidfd` pins the process itself, so a peer the
/// pidfd shows still running after the read is the one that was read.
fn peer_in_this_mount_namespace(pid: i32, pidfd: Option<&OwnedFd>) -> bool {
    let of = |who: &str| std::fs::read_link(format!("/proc/{who}/ns/mnt")).ok();
    let same = of(&pid.to_string()).is_some_and(|theirs| of("self") == Some(theirs));
    same && pidfd.is_none_or(running)
}

/// Whether the process of `pidfd` has not ended (a pidfd becomes readable when it does).
fn running(pidfd: &OwnedFd) -> bool {
    let mut fds = [PollFd::new(pidfd.as_fd(), PollFlags::POLLIN)];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(0))
}

/// How long the keeper waits for a successor's first frame; one that says nothing in that time (a
/// host of protocol 2 or earlier) is handed its kept files as descriptors.
const HELLO_WAIT: Duration = Duration::from_secs(1);

/// The protocol the successor on `conn` says it speaks (2 when it says nothing in time).
fn successor_protocol(conn: &UnixStream) -> u32 {
    if conn.set_read_timeout(Some(HELLO_WAIT)).is_err() {
        return 2;
    }
    let protocol = match fds::Receiver::new().next(conn.as_fd()) {
        Ok(Some(body)) => match crate::keeper::wire::Request::decode(&body) {
            Ok(crate::keeper::wire::Request::Successor { protocol }) => protocol,
            _ => 2,
        },
        _ => 2,
    };
    let _ = conn.set_read_timeout(None);
    protocol
}

/// Whether the successor on `conn` can hold the descriptors the `held` tasks surely come with (their
/// output's read ends and their input; kept files that travel too are not counted).
fn room_for(
    conn: &UnixStream,
    held: &HashMap<i32, super::held::Held>,
) -> Result<(), super::room::NoRoom> {
    use nix::sys::socket::{getsockopt, sockopt};
    let Ok(peer) = getsockopt(conn, sockopt::PeerCredentials) else {
        return Ok(());
    };
    let descriptors = held
        .values()
        .map(|h| h.streams.len() as u64 + u64::from(h.stdin.is_some()))
        .sum();
    super::room::check(peer.pid(), descriptors)
}

/// Waits up to `wait` for output (or a successor on `listener`), and drains what is ready. The
/// state stays locked meanwhile (the reaper waits at most one wait to record an exit).
fn drain_ready(shared: &Shared, listener: BorrowedFd<'_>, wait: Duration, in_memory: &mut usize) {
    let mut st = shared.state.lock();
    let mut open: Vec<(i32, usize)> = Vec::new();
    for (&pgid, held) in &mut st.held {
        for (i, s) in held.streams.iter_mut().enumerate() {
            if s.len.is_none() {
                start_draining(s, held.hold.streams[i].cap);
            }
            if !s.ended {
                open.push((pgid, i));
            }
        }
    }
    let ready: Vec<bool> = {
        let mut polled = vec![PollFd::new(listener, PollFlags::POLLIN)];
        for (pgid, i) in &open {
            if let Some(held) = st.held.get(pgid) {
                polled.push(PollFd::new(
                    held.streams[*i].read.as_fd(),
                    PollFlags::POLLIN,
                ));
            }
        }
        let timeout = PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX);
        if matches!(poll(&mut polled, timeout), Ok(0) | Err(_)) {
            return;
        }
        polled[1..]
            .iter()
            .map(|p| p.revents().is_some_and(|r| !r.is_empty()))
            .collect()
    };
    for ((pgid, i), ready) in open.into_iter().zip(ready) {
        if let (true, Some(held)) = (ready, st.held.get_mut(&pgid)) {
            let (fds, meta) = (&mut held.streams[i], &mut held.hold.streams[i]);
            drain_one(fds, meta, in_memory);
        }
    }
}

/// Takes the file's length and whether the host had rolled it.
fn start_draining(s: &mut HeldFds, cap: u64) {
    let (len, rolled) = s
        .file
        .with(|f| {
            let len = f.metadata().map_or(0, |m| m.len());
            (len, spill_layout::read_marker(f, cap).is_some())
        })
        .unwrap_or((0, true));
    s.rolled = rolled;
    s.len = Some(len);
}

/// Reads what one stream has ready into its file, or into memory past the file's cap.
fn drain_one(s: &mut HeldFds, meta: &mut super::hold::HeldStream, in_memory: &mut usize) {
    let mut buf = vec![0u8; 64 * 1024];
    let n = match nix::unistd::read(&s.read, &mut buf) {
        Ok(0) => {
            s.ended = true;
            return;
        }
        Ok(n) => n,
        Err(Errno::EAGAIN | Errno::EINTR) => return,
        // A terminal's master fails with EIO once its other side is closed everywhere: the end.
        Err(_) => {
            s.ended = true;
            return;
        }
    };
    let data = &buf[..n];
    let len = s.len.unwrap_or(0);
    if !s.rolled
        && meta.pending.is_empty()
        && meta.dropped == 0
        && len + n as u64 <= meta.cap
        && s.file.with(|f| f.write_all_at(data, len).is_ok()) == Some(true)
    {
        s.len = Some(len + n as u64);
        return;
    }
    let room = STREAM_MEMORY
        .saturating_sub(meta.pending.len())
        .min(ALL_MEMORY.saturating_sub(*in_memory));
    let kept = n.min(room);
    meta.pending.extend_from_slice(&data[..kept]);
    *in_memory += kept;
    meta.dropped += (n - kept) as u64;
}

/// Tells `conn` every held task, with its descriptors, then the gone host's row and lock; on
/// success the connection is the keeper's host from now on, and the tasks stay held for the next
/// handover when the successor speaks protocol 7 ([`crate::keeper::wire::KEEPS_HOLDS`]).
pub(crate) fn hand_over(shared: &Shared, setup: &Setup, conn: UnixStream) -> Option<UnixStream> {
    let protocol = successor_protocol(&conn);
    let by_name = protocol >= 3;
    let mut st = shared.state.lock();
    if let Err(no_room) = room_for(&conn, &st.held) {
        tracing::warn!(%no_room, "a successor was refused: the tasks are held for another");
        if protocol >= crate::keeper::wire::NO_ROOM {
            let report = Report::NoRoom {
                descriptors: no_room.descriptors,
                limit: no_room.limit,
            };
            let _ = fds::send(conn.as_fd(), &report.encode(), &[]);
        }
        return None;
    }
    for (&pgid, held) in &st.held {
        // A file kept by name goes by name to a successor of protocol 3; to an earlier one it is
        // open from here until it was sent, and travels as any kept file does.
        let mut hold = held.hold.clone();
        let files: Vec<Option<OwnedFd>> = held
            .streams
            .iter()
            .zip(&hold.streams)
            .map(|(s, meta)| match by_name && meta.by_name() {
                true => None,
                false => s.file.handed(),
            })
            .collect();
        for (s, meta) in held.streams.iter().zip(&mut hold.streams) {
            // Named, but another file has the name now (or none): the successor keeps no file.
            if by_name && meta.by_name() && !s.file.is_there() {
                meta.file.clear();
            }
        }
        let mut fds: Vec<BorrowedFd<'_>> = Vec::new();
        for ((s, file), meta) in held.streams.iter().zip(&files).zip(&mut hold.streams) {
            fds.push(s.read.as_fd());
            fds.extend(file.as_ref().map(AsFd::as_fd));
            if !(by_name && meta.by_name()) {
                meta.kept = file.is_some();
            }
        }
        fds.extend(held.stdin.as_ref().map(AsFd::as_fd));
        let report = Report::Adopt {
            id: held.id,
            pgid,
            exit: held.exit.clone(),
            hold,
        }
        .for_protocol(protocol);
        if fds::send(conn.as_fd(), &report.encode(), &fds).is_err() {
            return None;
        }
    }
    let handed = Report::Handed {
        host: setup.host,
        markers: st.markers.clone(),
        next_id: st.next_id,
        listens: setup.listens.iter().map(|(a, _)| a.clone()).collect(),
    };
    let mut fds = vec![setup.lock.as_fd()];
    fds.extend(setup.listens.iter().map(|(_, fd)| fd.as_fd()));
    fds::send(conn.as_fd(), &handed.encode_handed(), &fds).ok()?;
    st.out = conn.try_clone().ok()?;
    st.host_gone = false;
    if protocol >= crate::keeper::wire::KEEPS_HOLDS {
        // The successor does not hold its tasks again: they stay held as they were.
        st.held.values_mut().for_each(Held::handed_on);
    } else {
        st.held = HashMap::new();
    }
    Some(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pidfd_of(child: &std::process::Child) -> OwnedFd {
        let pid = rustix::process::Pid::from_child(child);
        rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).unwrap()
    }

    #[test]
    fn a_peer_its_pidfd_shows_gone_is_refused_though_its_pid_names_a_process_here() {
        let me = std::process::id() as i32;
        assert!(peer_in_this_mount_namespace(me, None));
        let mut ended = std::process::Command::new("true").spawn().unwrap();
        let gone = pidfd_of(&ended);
        ended.wait().unwrap();
        assert!(!peer_in_this_mount_namespace(me, Some(&gone)));
        let mut sleeping = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let alive = pidfd_of(&sleeping);
        assert!(peer_in_this_mount_namespace(me, Some(&alive)));
        sleeping.kill().unwrap();
        sleeping.wait().unwrap();
    }
}
