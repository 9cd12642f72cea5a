//! The handover: a `--listen` host with a state directory hands its running tasks to the next
//! host on the same state directory and addresses, whether it crashed or was upgraded
//! (`SIGHUP`, `upgrade.rs`), through its keeper. This folder is where the protocol is told; its
//! parts live in one folder per crate: the keeper's and the process service's side in
//! `host/process/src/keeper/handover/` (the messages in `keeper/wire.rs`), the engine's in
//! `host/engine/src/services/handover/`, the store's in `host/store/src/handover/`.
//!
//! **Holding (the host and its keeper, on the socket pair the host started the keeper on).**
//! Once its state is open, the host sends `Handover { grace_ms, host, listens }` with a listener
//! (`<state>/hosts/handover-<hash of the addresses>.sock`), its lock and its listening sockets
//! beside the frame ([`Handover::offer`]), then `KeptDir` with its kept-output directory (protocol
//! 3), and `Mark { prefix }` for a successor's marker. Each task with kept output is held from its
//! start (`SpawnHeld`, protocol 2) or after it (`Hold`): its output's read ends (and kept files,
//! before protocol 3; by name after), for whom it is held (`HeldAs`: a task by id, or a foreground
//! command by its record's id, typed from protocol 5). A foreground command that becomes a task is
//! renamed (`Rename { pgid, task }`), a group that is gone forgotten (`Forget`), and a keeper that
//! replaces a dead one is sent the dead one's holds (`Carry`, protocol 4). A host that stops sends
//! `NoHandover`: its tasks end with it.
//!
//! **Waiting (the keeper, its host gone).** When the socket closes (a crash, a SIGKILL, the `exec`
//! of an upgrade), the keeper ends what it does not hold, starts a watchdog, drains the held tasks'
//! output into their kept files and keeps the lock and listening sockets, for the grace.
//!
//! **Taking back (the successor, on the listener).** Before it opens the state
//! ([`Handover::take_waiting`]), the next host connects, checks the keeper is its user's, and says
//! `Successor { protocol }` (protocol 3). The keeper answers an `Adopt` per task (its descriptors
//! beside), then `Handed { host, markers, next_id, listens }` followed by its own protocol, with
//! the lock and the listening sockets beside. The successor records the tasks and foreground
//! commands as its own ([`taskhost_store::Takeover`]) before it lets the lock go, serves on the
//! sockets, makes the keeper its own ([`crate::Taskhost::taking_over`]), takes the tasks back
//! once its plugins are loaded ([`crate::Taskhost::take_back_tasks`]) and offers its own handover.
//! A keeper and a successor of protocol 7 keep the holds where they are: the keeper goes on
//! holding what it handed over (less what it drained, which the successor took), so the successor
//! holds nothing again; it has the keeper `Forget` a task it does not take back, and a successor
//! that offers no handover sends `NoHandover`. With an older peer on either side, the keeper
//! forgets its holds and the successor holds each task again (`Hold`).
//!
//! **Versions.** Messages are only appended, and each side sends a later protocol's messages only
//! to a peer that said it speaks it. A host assumes its own protocol of a keeper it started (the
//! binary on disk: this build or a later one), and of an adopted keeper what its `Handed` said (1
//! when nothing followed); a keeper assumes of a successor what its `Successor` said (2 when it
//! said nothing within a second). So an upgrade runs the new host against the old keeper, and a
//! keeper replaced after a death may run a newer binary than its host. 1: the first handover; 2:
//! `Rename`, `SpawnHeld`, the protocol after `Handed`; 3: `KeptDir`, `Successor`, kept files by
//! name; 4: `Carry`; 5: holds typed (`Hold`, `SpawnHeld`, `Carry`, `Adopt`), where protocols 1 to
//! 4 named them by a string and still get, and send, the named variants; 6: `NoRoom`; 7: the
//! holds kept through a handover, and the keeper's pid after `Handed`'s protocol (the
//! connection's credentials are those of whoever made the listener, not the keeper's).

pub(super) mod upgrade;

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::Taskhost;
use crate::process::keeper::{HeldAs, HoldSetup, Keepers};
use crate::services::handover::Predecessor;

/// Where a host's keeper waits for its successor, and what was taken from a predecessor's.
pub(super) struct Handover {
    /// The socket's path: `<state>/hosts/handover-<hash of the addresses>.sock`.
    path: PathBuf,
    /// What a predecessor's keeper handed over, until the host is built with it.
    taken: Option<Predecessor>,
    /// The socket this host made, once it offered: the held `hosts/`, its name, and its device and
    /// inode (so only this host's socket is removed at its stop).
    offered: Option<(
        Arc<crate::process::private_dir::HeldDir>,
        String,
        (u64, u64),
    )>,
}

impl Handover {
    /// The handover of a host of state directory `state` listening on `listen` (none for a stdio
    /// host, which has no successor).
    pub(super) fn of(state: &Path, listen: &[String]) -> Option<Self> {
        if listen.is_empty() {
            return None;
        }
        let mut specs: Vec<String> = listen.iter().map(|s| normalized(s)).collect();
        specs.sort();
        // FNV-1a: a stable name, not a secret.
        let hash = specs
            .join("\n")
            .bytes()
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            });
        Some(Self {
            path: state
                .join("hosts")
                .join(format!("handover-{hash:016x}.sock")),
            taken: None,
            offered: None,
        })
    }

    /// Runs `f` with a path of the socket short enough for any state directory: through this
    /// process's descriptor of its directory (`/proc/self/fd/N/NAME`), since a socket's path is
    /// limited to about a hundred bytes.
    fn at_short_path<T>(&self, f: impl FnOnce(&Path) -> std::io::Result<T>) -> std::io::Result<T> {
        use std::os::fd::AsRawFd;
        let (Some(dir), Some(name)) = (self.path.parent(), self.path.file_name()) else {
            return f(&self.path);
        };
        let held = std::fs::File::open(dir)?;
        let short = Path::new("/proc/self/fd")
            .join(held.as_raw_fd().to_string())
            .join(name);
        f(&short)
    }

    /// Takes the keeper a predecessor left waiting, if one waits: the takeover the state opens
    /// with. The keeper and its tasks are kept for the host ([`Handover::predecessor`]).
    ///
    /// # Errors
    /// This host cannot hold the descriptors of the keeper's tasks (its open-file limit): the
    /// host must not start, and the keeper holds the tasks for one that can, until its grace ends.
    pub(super) fn take_waiting(&mut self) -> Result<Option<taskhost_store::Takeover>, String> {
        use crate::process::keeper::HandoverError;
        let taken = self.at_short_path(|path| Ok(Keepers::take_waiting(path)));
        let (keeper, mut handed) = match taken {
            Ok(Ok(taken)) => taken,
            Ok(Err(HandoverError::NoneWaiting)) | Err(_) => return Ok(None),
            Ok(Err(e @ (HandoverError::NoRoom(_) | HandoverError::Dropped(_)))) => {
                return Err(e.to_string());
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the previous host's tasks are not taken over");
                return Ok(None);
            }
        };
        let (mut tasks, mut foregrounds) = (Vec::new(), Vec::new());
        for task in &handed.tasks {
            match &task.hold.held_as {
                HeldAs::Task(id) => tasks.push(id.clone()),
                HeldAs::Foreground(id) => foregrounds.push(*id),
            }
        }
        let takeover = taskhost_store::Takeover {
            host: handed.host,
            tasks,
            foregrounds,
            lock: match handed.lock.take() {
                Some(lock) => lock,
                None => return Ok(None),
            },
        };
        tracing::info!(
            tasks = takeover.tasks.len(),
            "the previous host's keeper handed its running tasks over"
        );
        self.taken = Some(Predecessor { keeper, handed });
        Ok(Some(takeover))
    }

    /// The predecessor's listening sockets by normalized address (taken once).
    pub(super) fn take_listens(&mut self) -> HashMap<String, OwnedFd> {
        match &mut self.taken {
            Some(taken) => std::mem::take(&mut taken.handed.listens)
                .into_iter()
                .collect(),
            None => HashMap::new(),
        }
    }

    /// The keeper taken from a predecessor and its tasks, for the host (taken once).
    pub(super) fn predecessor(&mut self) -> Option<Predecessor> {
        self.taken.take()
    }

    /// Tells `host`'s keeper to hold its running tasks for the next host for `grace_ms` once this
    /// one is gone. A socket that cannot be made is logged: the tasks then end with the host.
    pub(super) fn offer(
        &mut self,
        host: &Taskhost,
        grace_ms: u64,
        listens: Vec<(String, OwnedFd)>,
    ) {
        let Some(state) = host.services().state.as_ref() else {
            return;
        };
        if grace_ms == 0 {
            // No wait, no handover: the tasks end with the host at once, as without one.
            return;
        }
        let (Some(row), Some(lock)) = (state.host_id(), state.lock_fd()) else {
            return;
        };
        // Through the state's held `hosts/`: a directory put at the state's path after start never
        // gets the socket.
        let short = self
            .path
            .file_name()
            .map(|name| state.hosts_dir().through().join(name))
            .ok_or_else(|| std::io::Error::other("the socket has no name"));
        let made = short.and_then(|short| listen(&short)).and_then(|listener| {
            let lock = lock.try_clone_to_owned()?;
            Ok(HoldSetup {
                grace_ms,
                host: row,
                listener,
                lock,
                listens,
            })
        });
        match made {
            Ok(setup) => {
                let hosts = state.hosts_dir();
                let name = self
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned());
                self.offered = name.and_then(|name| {
                    let id = identity(&hosts, &name)?;
                    Some((hosts, name, id))
                });
                host.services().processes.enable_handover(setup);
            }
            Err(e) => tracing::warn!(
                path = %self.path.display(),
                error = %e,
                "no handover: running tasks will end with this host"
            ),
        }
    }
}

impl Handover {
    /// Removes the socket this host offered its successor on, at a stop that hands nothing over
    /// (its keeper no longer listens there): a socket another host made since is left.
    pub(super) fn withdraw(&self) {
        let Some((hosts, name, id)) = &self.offered else {
            return;
        };
        if identity(hosts, name) == Some(*id) {
            let _ = nix::unistd::unlinkat(
                &**hosts,
                name.as_str(),
                nix::unistd::UnlinkatFlags::NoRemoveDir,
            );
        }
    }
}

/// The device and inode of `name` in the held directory `dir`, if it exists.
fn identity(dir: &crate::process::private_dir::HeldDir, name: &str) -> Option<(u64, u64)> {
    nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| (st.st_dev, st.st_ino))
}

/// `spec` (a `--listen` value) as the handover names it: a Unix socket's path made absolute.
pub(super) fn normalized(spec: &str) -> String {
    let path = spec
        .strip_prefix("unix:")
        .map(crate::terminal::address::socket_path);
    match path {
        Some(Ok(path)) => format!(
            "unix:{}",
            std::path::absolute(&path).unwrap_or(path).display()
        ),
        _ => spec.to_owned(),
    }
}

/// A listening socket at `short`, replacing what is there (a predecessor's, whose keeper has let go
/// of it: this host holds the state directory's address now).
fn listen(short: &Path) -> std::io::Result<OwnedFd> {
    match std::fs::remove_file(short) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    Ok(OwnedFd::from(std::os::unix::net::UnixListener::bind(
        short,
    )?))
}
