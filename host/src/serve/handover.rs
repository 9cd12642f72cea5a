//! A `--listen` host's handover: at start, the keeper of a gone predecessor on the same state
//! directory and addresses is taken with its running tasks; then this host's own keeper is told to
//! hold its tasks for the next host, on a socket in the state directory named after the addresses.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::Taskhost;
use crate::process::keeper::{HoldSetup, Keepers};
use crate::services::options::{HandedTasks, TakenKeeper};

/// Where a host's keeper waits for its successor, and what was taken from a predecessor's.
pub(super) struct Handover {
    /// The socket's path: `<state>/hosts/handover-<hash of the addresses>.sock`.
    path: PathBuf,
    taken: Option<Arc<TakenKeeper>>,
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
    /// with. Its keeper is kept for the services ([`Handover::taken_keeper`]).
    pub(super) fn take_waiting(&mut self) -> Option<taskhost_store::Takeover> {
        let taken = self.at_short_path(|path| Ok(Keepers::take_waiting(path)));
        let (keeper, mut handed) = match taken {
            Ok(Ok(taken)) => taken,
            Ok(Err(crate::process::keeper::HandoverError::NoneWaiting)) | Err(_) => return None,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the previous host's tasks are not taken over");
                return None;
            }
        };
        let takeover = taskhost_store::Takeover {
            host: handed.host,
            tasks: handed.tasks.iter().map(|t| t.hold.task.clone()).collect(),
            lock: handed.lock.take()?,
        };
        tracing::info!(
            tasks = takeover.tasks.len(),
            "the previous host's keeper handed its running tasks over"
        );
        self.taken = Some(Arc::new(TakenKeeper(parking_lot::Mutex::new(Some((
            keeper,
            HandedTasks(handed),
        ))))));
        Some(takeover)
    }

    /// The predecessor's listening sockets by normalized address (taken once).
    pub(super) fn take_listens(&self) -> std::collections::HashMap<String, OwnedFd> {
        let Some(taken) = &self.taken else {
            return std::collections::HashMap::new();
        };
        let mut guard = taken.0.lock();
        match guard.as_mut() {
            Some((_, HandedTasks(handed))) => {
                std::mem::take(&mut handed.listens).into_iter().collect()
            }
            None => std::collections::HashMap::new(),
        }
    }

    /// The keeper taken from a predecessor, for the services.
    pub(super) fn taken_keeper(&mut self) -> Option<Arc<TakenKeeper>> {
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
