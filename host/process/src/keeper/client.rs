//! The host's end of the keeper: the process, the socket, the spawn requests waiting for their
//! answer and the processes waiting for their exit.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::Shutdown;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{RecvTimeoutError, SyncSender, sync_channel};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use tokio::sync::oneshot;

use super::fds;
use super::wire::{self, Launch, Report, Request, Slot, Streams};
use super::{HeldFromStart, Hold};
use crate::{Exit, TtySize};

/// How long a spawn waits for the keeper's answer before it gives up on it.
const ANSWER_WAIT: Duration = Duration::from_secs(10);

/// Why the keeper did not start a process.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KeeperSpawnError {
    /// The keeper is gone (or stopped) and was not asked: the caller may start the process itself.
    #[error("the keeper is gone")]
    Gone,
    /// The keeper was asked and did not start it: the OS's cause, or the keeper's silence.
    #[error("{0}")]
    Refused(String),
}

/// What a process the keeper starts gets as its standard streams.
#[derive(Clone, Copy)]
pub enum KeptStreams<'a> {
    /// Stdin, stdout and stderr (`None` is `/dev/null`); the caller closes its copies afterwards.
    Pipes([Option<BorrowedFd<'a>>; 3]),
    /// A fresh pseudo-terminal of this size, whose master comes back in [`KeptProcess::master`].
    Terminal(TtySize),
}

impl<'a> KeptStreams<'a> {
    /// The streams as a request says them, and the descriptors that go beside it.
    fn on_the_wire(self) -> (Streams, Vec<BorrowedFd<'a>>) {
        match self {
            KeptStreams::Pipes(stdio) => {
                let slots = stdio.map(|fd| {
                    if fd.is_some() {
                        Slot::Passed
                    } else {
                        Slot::Null
                    }
                });
                (Streams::Slots(slots), stdio.into_iter().flatten().collect())
            }
            KeptStreams::Terminal(size) => (Streams::Terminal(size), Vec::new()),
        }
    }
}

/// A process the keeper started: its pid (the leader of its own group), its exit, reported once it
/// has been reaped, and its terminal's master when it runs on one.
pub struct KeptProcess {
    /// The process id, which is also its process group's.
    pub pid: i32,
    /// Resolves with the exit once the keeper has reaped the process (or, should the keeper die,
    /// once the host has).
    pub exit: oneshot::Receiver<Exit>,
    /// The master side of its terminal: always there for [`KeptStreams::Terminal`], never else.
    pub master: Option<OwnedFd>,
    /// The keeper holds it for a successor from its start, as asked (a keeper of an earlier
    /// protocol was not asked).
    pub held: bool,
}

enum Answer {
    Spawned(i32, Option<OwnedFd>),
    Refused(String),
}

/// A process whose exit is awaited.
pub(super) struct Awaited {
    pub(super) pid: Option<i32>,
    pub(super) exit: oneshot::Sender<Exit>,
}

pub(super) struct Pending {
    answers: HashMap<u64, SyncSender<Answer>>,
    pub(super) exits: HashMap<u64, Awaited>,
    /// The keeper's socket has closed: nothing more will be answered.
    gone: bool,
    /// The host closed its side on purpose: the keeper's end is no death.
    pub(super) stopped: bool,
    /// The keeper's protocol ([`wire::PROTOCOL`]), 1 until it said otherwise.
    pub(super) protocol: u32,
}

impl Default for Pending {
    fn default() -> Self {
        Self {
            answers: HashMap::new(),
            exits: HashMap::new(),
            gone: false,
            stopped: false,
            protocol: 1,
        }
    }
}

/// The host's end of the keeper.
pub struct Keeper {
    pub(super) socket: UnixStream,
    /// False once the host stopped writing (shut down, or a write failed); held across each write so
    /// that frames never interleave.
    pub(super) open: Mutex<bool>,
    pub(super) pending: Arc<Mutex<Pending>>,
    pub(super) child: Mutex<Option<Child>>,
    /// The pid of a keeper taken over from a host that is gone (not started by this one), as its
    /// `Handed` report said it.
    pub(super) adopted_pid: Option<i32>,
    pub(super) next: AtomicU64,
    /// The keeper was told the kept directory ([`Keeper::handover`]): kept files are held by name.
    pub(super) kept_by_name: AtomicBool,
}

impl Keeper {
    /// Starts `program keeper --marker <marker_prefix> [--cgroup <cgroup>]` (the `taskhost` binary's
    /// keeper command) on a socket of its own, and a thread that reads its reports and calls `on_death` should the
    /// keeper end before [`Keeper::stop`].
    ///
    /// # Errors
    /// When the program, the socket or the thread cannot be had.
    pub fn start(
        program: &Path,
        marker_prefix: &str,
        cgroup: Option<&Path>,
        on_death: impl FnOnce() + Send + 'static,
    ) -> std::io::Result<Self> {
        use std::os::unix::process::CommandExt;
        let (socket, keepers_end) = UnixStream::pair()?;
        let mut command = Command::new(program);
        command.args(["keeper", "--marker", marker_prefix]);
        if let Some(cgroup) = cgroup {
            command.arg("--cgroup").arg(cgroup);
        }
        let child = command
            .env_clear()
            .stdin(Stdio::from(OwnedFd::from(keepers_end)))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        // It runs this build's binary, or a later one's.
        let pending = Arc::new(Mutex::new(Pending {
            protocol: wire::PROTOCOL,
            ..Pending::default()
        }));
        let reports = socket.try_clone()?;
        let reader = pending.clone();
        std::thread::Builder::new()
            .name("taskhost-keeper".into())
            .spawn(move || read_reports(reports, fds::Receiver::new(), &reader, on_death))?;
        Ok(Self {
            socket,
            open: Mutex::new(true),
            pending,
            child: Mutex::new(Some(child)),
            adopted_pid: None,
            next: AtomicU64::new(0),
            kept_by_name: AtomicBool::new(false),
        })
    }

    /// The keeper's pid while it runs.
    pub fn pid(&self) -> Option<u32> {
        match self.child.lock().as_ref() {
            Some(child) => Some(child.id()),
            None => self.adopted_pid.map(i32::cast_unsigned),
        }
    }

    /// Has the keeper start `launch` in a process group of its own with `streams`, and hold it for
    /// a successor from its start when `held` says so. Blocks until the keeper answered (at most
    /// 10 s).
    ///
    /// # Errors
    /// [`KeeperSpawnError::Gone`] when the keeper could not be asked; [`KeeperSpawnError::Refused`]
    /// with the OS's cause when it could not start the process.
    pub fn spawn(
        &self,
        launch: &Launch,
        streams: KeptStreams<'_>,
        held: Option<HeldFromStart<'_>>,
    ) -> Result<KeptProcess, KeeperSpawnError> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (answer_tx, answer) = sync_channel(1);
        let (exit_tx, exit) = oneshot::channel();
        {
            let mut p = self.pending.lock();
            if p.gone {
                return Err(KeeperSpawnError::Gone);
            }
            p.answers.insert(id, answer_tx);
            p.exits.insert(
                id,
                Awaited {
                    pid: None,
                    exit: exit_tx,
                },
            );
        }
        let (streams, mut fds) = streams.on_the_wire();
        let terminal = matches!(streams, Streams::Terminal(_));
        let held = held.filter(|_| self.speaks(2));
        let by_name = held.and_then(|h| self.by_name(h));
        let held = match &by_name {
            Some((hold, fds)) => Some(HeldFromStart { hold, fds }),
            None => held,
        };
        let frame = Request::start(id, launch, streams, held, &mut fds, self.protocol()).encode();
        let forget = || {
            let mut p = self.pending.lock();
            p.answers.remove(&id);
            p.exits.remove(&id);
        };
        if frame.len() > wire::MAX_FRAME {
            // The keeper would take it for a broken stream; no kernel would run it anyway.
            forget();
            return Err(KeeperSpawnError::Refused(format!(
                "the command, its arguments and its environment take {} bytes, more than a start may carry ({} MiB)",
                frame.len(),
                wire::MAX_FRAME >> 20
            )));
        }
        if !self.write(&frame, &fds) {
            forget();
            return Err(KeeperSpawnError::Gone);
        }
        match answer.recv_timeout(ANSWER_WAIT) {
            Ok(Answer::Spawned(pid, master)) if master.is_some() == terminal => Ok(KeptProcess {
                pid,
                exit,
                master,
                held: held.is_some(),
            }),
            Ok(Answer::Spawned(pid, _)) => Err(KeeperSpawnError::Refused(format!(
                "the keeper's answer for process {pid} did not match the request (terminal: {terminal})"
            ))),
            Ok(Answer::Refused(cause)) => Err(KeeperSpawnError::Refused(cause)),
            Err(RecvTimeoutError::Disconnected) => Err(KeeperSpawnError::Refused(
                "the keeper ended before it answered".into(),
            )),
            Err(RecvTimeoutError::Timeout) => {
                forget();
                // Stopped, or stuck in an `exec`: a keeper that does not answer serves nobody. Its
                // end is its death (another takes its place); this start is not tried again, since
                // the keeper may have started it.
                if let Some(child) = self.child.lock().as_mut() {
                    let _ = child.kill();
                }
                Err(KeeperSpawnError::Refused(format!(
                    "the keeper did not answer within {} s; it was ended and another started",
                    ANSWER_WAIT.as_secs()
                )))
            }
        }
    }

    /// A start's hold as this keeper takes it once told the kept directory (see
    /// [`Hold::by_name`]); `None` before.
    fn by_name<'a>(&self, held: HeldFromStart<'a>) -> Option<(Hold, Vec<BorrowedFd<'a>>)> {
        self.kept_by_name
            .load(Ordering::Acquire)
            .then(|| held.hold.by_name(held.fds, true))
    }

    /// Registers a process group the keeper did not spawn, to be ended should the host die.
    pub fn watch(&self, pgid: i32) {
        self.write(&Request::Watch { pgid }.encode(), &[]);
    }

    /// Unregisters a process group that is gone (so a later process reusing the number is safe).
    pub fn group_ended(&self, pgid: i32) {
        self.write(&Request::Forget { pgid }.encode(), &[]);
    }

    /// Writes one frame; false (and logged once) when the keeper cannot be written to.
    pub(super) fn write(&self, frame: &[u8], fds: &[BorrowedFd<'_>]) -> bool {
        let mut open = self.open.lock();
        if !*open {
            return false;
        }
        if let Err(e) = fds::send(self.socket.as_fd(), frame, fds) {
            tracing::error!(error = %e, "the keeper is gone: task processes may outlive a crash of the host");
            *open = false;
        }
        *open
    }

    /// Closes the host's side (the keeper ends what is left, normally nothing, and exits) and reaps
    /// the keeper, waiting up to two seconds.
    pub fn stop(&self) {
        {
            let mut open = self.open.lock();
            *open = false;
            self.pending.lock().stopped = true;
            let _ = self.socket.shutdown(Shutdown::Write);
        }
        let child = self.child.lock().take();
        if let Some(mut child) = child {
            let deadline = Instant::now() + Duration::from_secs(2);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        } else if let Some(pid) = self.adopted_pid {
            wait_gone(pid, Duration::from_secs(2));
        }
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Hands each report to whoever waits for it, until the keeper's socket closes; then, unless the host
/// stopped it, `on_death` is called and the processes still running, adopted by the host (a child
/// subreaper) when the keeper died, are reaped here.
pub(super) fn read_reports(
    socket: UnixStream,
    mut frames: fds::Receiver,
    pending: &Mutex<Pending>,
    on_death: impl FnOnce(),
) {
    while let Ok(Some(body)) = frames.next(socket.as_fd()) {
        let Ok(report) = Report::decode(&body) else {
            frames.discard_fds();
            continue;
        };
        let mut p = pending.lock();
        match report {
            Report::Spawned { id, pid, master } => {
                let master = match master {
                    true => frames.take_fds(1).ok().and_then(|mut fds| fds.pop()),
                    false => None,
                };
                if let Some(w) = p.exits.get_mut(&id) {
                    w.pid = Some(pid);
                }
                if let Some(answer) = p.answers.remove(&id) {
                    let _ = answer.try_send(Answer::Spawned(pid, master));
                }
            }
            Report::Refused { id, cause } => {
                p.exits.remove(&id);
                if let Some(answer) = p.answers.remove(&id) {
                    let _ = answer.try_send(Answer::Refused(cause));
                }
            }
            Report::Exited { id, exit } => {
                if let Some(w) = p.exits.remove(&id) {
                    let _ = w.exit.send(exit);
                }
            }
            // Only a successor's first frames (`Adopt`, `Handed`), read before this thread starts.
            _ => frames.discard_fds(),
        }
    }
    let (orphans, stopped): (Vec<(i32, oneshot::Sender<Exit>)>, bool) = {
        let mut p = pending.lock();
        p.gone = true;
        p.answers.clear();
        let orphans = p
            .exits
            .drain()
            .filter_map(|(_, w)| Some((w.pid?, w.exit)))
            .collect();
        (orphans, p.stopped)
    };
    if !stopped {
        tracing::error!(
            processes = orphans.len(),
            "the keeper died: its processes are the host's to reap now"
        );
        on_death();
    }
    reap_orphans(orphans);
}

/// Waits for the processes the dead keeper left (the host's children now) and reports their exits.
fn reap_orphans(mut orphans: Vec<(i32, oneshot::Sender<Exit>)>) {
    while !orphans.is_empty() {
        let mut i = 0;
        while i < orphans.len() {
            match orphan_exit(orphans[i].0) {
                Some(exit) => {
                    let (_, waiter) = orphans.swap_remove(i);
                    let _ = waiter.send(exit);
                }
                None => i += 1,
            }
        }
        if !orphans.is_empty() {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// The exit of a process the dead keeper left, once it has one.
fn orphan_exit(pid: i32) -> Option<Exit> {
    let pid = Pid::from_raw(pid);
    match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
        Ok(status) => crate::child::reaped(status).map(|(_, exit)| exit),
        // Not the host's child (it is no subreaper): the status is lost once the process is gone.
        Err(Errno::ECHILD) if nix::sys::signal::kill(pid, None).is_err() => Some(Exit::Unknown),
        _ => None,
    }
}

/// Waits up to `within` for the process `pid` (a keeper this host did not start) to be gone,
/// reaping it when it is this process's child (a host that re-executed itself).
fn wait_gone(pid: i32, within: Duration) {
    use nix::sys::wait::{WaitPidFlag, waitpid};
    let pid = nix::unistd::Pid::from_raw(pid);
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
            Ok(nix::sys::wait::WaitStatus::StillAlive) => {}
            Ok(_) => return,
            Err(_) if nix::sys::signal::kill(pid, None).is_err() => return,
            Err(_) => {}
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
