//! The host's side of a handover: a successor connects to the keeper its predecessor left, takes
//! back the held tasks and makes that keeper its own.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::oneshot;

use super::hold::Hold;
use crate::Exit;
use crate::keeper::client::{Awaited, Keeper, Pending, read_reports};
use crate::keeper::fds;
use crate::keeper::wire::{Report, Request};

/// How long a successor waits for a keeper that accepted it to tell it the tasks (its host may
/// still be dying: the keeper answers once its socket closed).
const INVENTORY_WAIT: Duration = Duration::from_secs(3);

/// A task a successor takes back from its predecessor's keeper.
pub struct HandedTask {
    /// The predecessor's request id of its process (the keeper reports its exit under it).
    pub id: u64,
    /// Its process group (its leader's pid).
    pub pgid: i32,
    /// What was held: the task id, the process number, the streams.
    pub hold: Hold,
    /// Each output stream's read end and kept file, in `hold.streams`' order.
    pub streams: Vec<(OwnedFd, Option<File>)>,
    /// Its stdin's write end, when it had one.
    pub stdin: Option<OwnedFd>,
    /// Resolves with its exit (at once when the keeper had reaped it already).
    pub exit: oneshot::Receiver<Exit>,
}

/// What a successor got from the keeper besides the keeper.
pub struct Handed {
    /// The tasks held for this host.
    pub tasks: Vec<HandedTask>,
    /// The predecessor's row in the state database.
    pub host: i64,
    /// The marker prefixes the keeper ends with its host.
    pub markers: Vec<String>,
    /// The predecessor's lock: held until its tasks are recorded as this host's (taken then).
    pub lock: Option<OwnedFd>,
    /// The predecessor's listening sockets by address, for this host to serve on.
    pub listens: Vec<(String, OwnedFd)>,
}

/// Why no handover was had.
#[derive(Debug, thiserror::Error)]
pub enum HandoverError {
    /// No keeper waits on that path.
    #[error("no keeper waits for a successor")]
    NoneWaiting,
    /// A keeper accepted and then failed to hand over.
    #[error("the keeper waiting for a successor failed to hand over: {0}")]
    Failed(String),
    /// This host cannot hold the descriptors of the keeper's tasks: none was asked for.
    #[error("{0}")]
    NoRoom(super::room::NoRoom),
    /// The descriptors of the keeper's tasks did not fit in this host (its limit reached while
    /// they arrived).
    #[error("the previous host's tasks are not taken over: {0}")]
    Dropped(String),
}

impl Keeper {
    /// Connects to the keeper waiting on `path` for a successor of its host, takes the tasks it
    /// holds and makes it this host's keeper (`on_death` called should it die).
    ///
    /// # Errors
    /// [`HandoverError::NoneWaiting`] when nothing listens there; [`HandoverError::Failed`] when the
    /// keeper is not this user's or its inventory is broken or late.
    pub fn adopt(
        path: &Path,
        on_death: impl FnOnce() + Send + 'static,
    ) -> Result<(Keeper, Handed), HandoverError> {
        let conn = UnixStream::connect(path).map_err(|_| HandoverError::NoneWaiting)?;
        let failed = |e: &dyn std::fmt::Display| HandoverError::Failed(e.to_string());
        let creds = nix::sys::socket::getsockopt(&conn, nix::sys::socket::sockopt::PeerCredentials)
            .map_err(|e| failed(&e))?;
        if creds.uid() != nix::unistd::getuid().as_raw() {
            return Err(failed(&format!("it runs as uid {}", creds.uid())));
        }
        conn.set_read_timeout(Some(INVENTORY_WAIT))
            .map_err(|e| failed(&e))?;
        let hello = Request::Successor {
            protocol: crate::keeper::wire::PROTOCOL,
        };
        fds::send(conn.as_fd(), &hello.encode(), &[]).map_err(|e| failed(&e))?;
        let pending: Arc<Mutex<Pending>> = Arc::default();
        let mut frames = fds::Receiver::new();
        let (tasks, (host, markers, next_id, lock, listens, pid)) =
            inventory(&conn, &mut frames, &pending)?;
        conn.set_read_timeout(None).map_err(|e| failed(&e))?;
        let reports = conn.try_clone().map_err(|e| failed(&e))?;
        let reader = pending.clone();
        std::thread::Builder::new()
            .name("taskhost-keeper".into())
            .spawn(move || read_reports(reports, frames, &reader, on_death))
            .map_err(|e| failed(&e))?;
        let keeper = Keeper {
            socket: conn,
            open: Mutex::new(true),
            pending,
            child: Mutex::new(None),
            // The connection's credentials are those of whoever made the listener (the gone
            // host): a keeper of protocol 6 or earlier, which does not say its pid, is taken for it.
            adopted_pid: Some(pid.map_or(creds.pid(), u32::cast_signed)),
            next: AtomicU64::new(next_id),
            kept_by_name: AtomicBool::new(false),
        };
        Ok((
            keeper,
            Handed {
                tasks,
                host,
                markers,
                lock: Some(lock),
                listens,
            },
        ))
    }
}

/// What the keeper closing the handover says after the tasks: the gone host's row, the marker
/// prefixes, the next request id, its lock, its listening sockets by address and its own pid
/// (since protocol 7).
type Closing = (
    i64,
    Vec<String>,
    u64,
    OwnedFd,
    Vec<(String, OwnedFd)>,
    Option<u32>,
);

/// Reads the keeper's inventory on `conn`: each held task, then the handover's close (or its
/// refusal of this successor).
fn inventory(
    conn: &UnixStream,
    frames: &mut fds::Receiver,
    pending: &Mutex<Pending>,
) -> Result<(Vec<HandedTask>, Closing), HandoverError> {
    let failed = |e: &dyn std::fmt::Display| HandoverError::Failed(e.to_string());
    let mut tasks = Vec::new();
    loop {
        let body = frames
            .next(conn.as_fd())
            .map_err(
                |e| match e.get_ref().is_some_and(|e| e.is::<super::room::Dropped>()) {
                    true => HandoverError::Dropped(e.to_string()),
                    false => failed(&e),
                },
            )?
            .ok_or_else(|| failed(&"the keeper closed the connection"))?;
        let (report, protocol, pid) = Report::decode_handed(&body).map_err(|e| failed(&e))?;
        match report.typed() {
            Report::Adopt {
                id,
                pgid,
                exit,
                hold,
            } => {
                let task =
                    take_task(frames, pending, id, pgid, exit, hold).map_err(|e| failed(&e))?;
                tasks.push(task);
            }
            Report::Handed {
                host,
                markers,
                next_id,
                listens,
            } => {
                let fds = frames.take_fds(1 + listens.len()).map_err(|e| failed(&e))?;
                let mut fds = fds.into_iter();
                let lock = fds.next().ok_or_else(|| failed(&"no lock"))?;
                let listens = listens.into_iter().zip(fds).collect();
                pending.lock().protocol = protocol;
                return Ok((tasks, (host, markers, next_id, lock, listens, pid)));
            }
            Report::NoRoom { descriptors, limit } => {
                let no_room = super::room::NoRoom { descriptors, limit };
                return Err(HandoverError::NoRoom(no_room));
            }
            _ => return Err(failed(&"an unexpected report before the handover")),
        }
    }
}

/// One handed task's descriptors, and its exit awaited under its id.
fn take_task(
    frames: &mut fds::Receiver,
    pending: &Mutex<Pending>,
    id: u64,
    pgid: i32,
    exit: Option<Exit>,
    hold: Hold,
) -> Result<HandedTask, crate::keeper::wire::WireError> {
    let count = hold.descriptors();
    let mut fds = frames.take_fds(count)?.into_iter();
    let mut streams = Vec::new();
    for s in &hold.streams {
        let read = fds
            .next()
            .ok_or(crate::keeper::wire::WireError::MissingDescriptors)?;
        let file = match s.kept {
            true => Some(File::from(
                fds.next()
                    .ok_or(crate::keeper::wire::WireError::MissingDescriptors)?,
            )),
            false => None,
        };
        streams.push((read, file));
    }
    let stdin = if hold.stdin { fds.next() } else { None };
    let (tx, rx) = oneshot::channel();
    match exit {
        Some(exit) => {
            let _ = tx.send(exit);
        }
        None => {
            pending.lock().exits.insert(
                id,
                Awaited {
                    pid: Some(pgid),
                    exit: tx,
                },
            );
        }
    }
    Ok(HandedTask {
        id,
        pgid,
        hold,
        streams,
        stdin,
        exit: rx,
    })
}
