//! The host's process service: every child process of every producer is spawned, read, signalled and
//! reaped here, on the host's runtime (no thread per process), with one environment policy. With a
//! [`keeper`], the keeper process does the spawning and reaping of piped children for the service, so
//! a start never copies the host's descriptor table.
//!
//! A child runs `bash -c <command>` in its own process group with stdin closed and a scrubbed
//! environment, or, when asked for a terminal, in a session of its own on a pseudo-terminal that
//! takes input ([`Process::write_input`]) and whose output is shown as the terminal draws it. Each
//! output stream keeps an in-memory tail and spills beyond it to a private 0600 file, whose cap keeps
//! the head and the latest output. A kill sends SIGTERM to the group, then SIGKILL after the grace if any of the
//! group is still alive. When a process settles, whatever is left of its group is ended too: a task's
//! processes never outlive it.

#![forbid(unsafe_code)]

mod budget;
mod cgroup;
mod child;
pub mod env;
mod escaped;
mod input;
pub mod keeper;
mod master;
pub mod private_dir;
mod render;
mod spills;
mod stream;
mod supervise;
mod terminal;
pub mod trusted_path;

use std::collections::HashSet;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::net::unix::pipe;
use tokio::runtime::Handle;
use tokio::sync::watch;

pub use budget::DEFAULT_SPILL_BUDGET;
pub use child::{Exit, Process, ProcessWatch, signal_name};
use child::{Streams, signal_group};
pub use escaped::end_all_children;
pub use input::InputError;
pub use render::{SpillRef, render_read};
use spills::Spills;
use stream::{SpillPlan, StreamBuf};
pub use taskhost_registry::excerpt;
pub use terminal::render_terminal;

/// What to run.
#[derive(Clone, Debug)]
pub struct ProcessSpec {
    /// The command, run as `bash -c <command>` (unless `argv` is set).
    pub command: String,
    /// A program and its arguments, run directly instead of through bash.
    pub argv: Option<Vec<String>>,
    /// The working directory (the host's when `None`).
    pub workdir: Option<PathBuf>,
    /// Variables set after the environment policy (trusted configuration: the policy does not
    /// filter them).
    pub extra_env: Vec<(String, String)>,
    /// Time between SIGTERM and SIGKILL, and the longest wait for pipes after exit.
    pub grace: Duration,
    /// In-memory tail per stream, in bytes.
    pub tail_bytes: usize,
    /// Largest spill file per stream, in bytes.
    pub spill_cap: u64,
    /// Run under a pseudo-terminal of this size instead of with stdin closed and piped output.
    pub tty: Option<TtySize>,
}

/// A terminal's size in character cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TtySize {
    /// Columns.
    pub cols: u16,
    /// Rows.
    pub rows: u16,
}

impl ProcessSpec {
    /// A spec with the defaults: 3 s grace, 64,000-byte tails, 64 MiB spill cap.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            argv: None,
            workdir: None,
            extra_env: Vec::new(),
            grace: Duration::from_secs(3),
            tail_bytes: 64_000,
            spill_cap: 64 << 20,
            tty: None,
        }
    }
}

/// The stdin and stdout of a piped process (a protocol peer's), the host's ends.
pub type Pipes = (pipe::Sender, pipe::Receiver);

/// Raises this process's soft limit of open files to the hard limit: every live task holds
/// descriptors, and a host that runs thousands of them must not fail at the usual soft limit of
/// 1,024. A refusal is logged.
pub fn raise_file_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
                tracing::warn!(error = %e, soft, hard, "cannot raise the open-file limit");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot read the open-file limit"),
    }
}

/// Refuses a working directory that is missing or not a directory, naming it (std's spawn error
/// would not say which path).
fn check_workdir(spec: &ProcessSpec) -> Result<(), SpawnError> {
    let Some(dir) = &spec.workdir else {
        return Ok(());
    };
    let shown = || excerpt(&dir.display().to_string()).into_owned();
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(SpawnError(format!("workdir {}: not a directory", shown()))),
        Err(e) => Err(SpawnError(format!("workdir {}: {e}", shown()))),
    }
}

/// Why a process could not be started: the OS's cause, with the value it concerns (at most 200
/// characters of it).
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[error("cannot start the command: {0}")]
pub struct SpawnError(pub String);

/// A spawned child: its process group, how its exit is awaited, where its output comes from, the
/// pipes handed back to a protocol peer, and its terminal's input.
struct Spawned {
    pgid: Option<i32>,
    waiter: supervise::Waiter,
    outputs: supervise::Outputs,
    talk: Option<Pipes>,
    input: Option<input::Input>,
}

/// The ends of a piped child's pipes that the child gets (stdin `None`: `/dev/null`).
struct ChildEnds {
    stdin: Option<OwnedFd>,
    stdout: OwnedFd,
    stderr: OwnedFd,
}

/// The host's ends of a piped child's pipes.
struct HostEnds {
    stdin: Option<pipe::Sender>,
    stdout: pipe::Receiver,
    stderr: pipe::Receiver,
}

/// Pipes for stdout and stderr, and for stdin when `piped`. The host's ends are non-blocking (the
/// child's are not), and no end is inherited by any other child.
fn pipes(piped: bool) -> std::io::Result<(ChildEnds, HostEnds)> {
    let pair = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(std::io::Error::from);
    let (out_r, out_w) = pair()?;
    let (err_r, err_w) = pair()?;
    let (stdin, host_stdin) = match piped {
        true => {
            let (r, w) = pair()?;
            (Some(r), Some(pipe::Sender::from_owned_fd(w)?))
        }
        false => (None, None),
    };
    Ok((
        ChildEnds {
            stdin,
            stdout: out_w,
            stderr: err_w,
        },
        HostEnds {
            stdin: host_stdin,
            stdout: pipe::Receiver::from_owned_fd(out_r)?,
            stderr: pipe::Receiver::from_owned_fd(err_r)?,
        },
    ))
}

impl ChildEnds {
    fn borrowed(&self) -> [Option<BorrowedFd<'_>>; 3] {
        [
            self.stdin.as_ref().map(AsFd::as_fd),
            Some(self.stdout.as_fd()),
            Some(self.stderr.as_fd()),
        ]
    }

    /// Spawns `cmd` directly, a child of the host, in its own process group with these ends.
    fn spawn(self, mut cmd: tokio::process::Command) -> std::io::Result<tokio::process::Child> {
        cmd.stdin(self.stdin.map_or_else(Stdio::null, Stdio::from))
            .stdout(Stdio::from(self.stdout))
            .stderr(Stdio::from(self.stderr));
        cmd.process_group(0);
        cmd.spawn()
    }
}

impl HostEnds {
    /// Stdout (unless handed to a protocol peer) and stderr to pump; stdin and stdout for a
    /// protocol peer.
    fn split(self) -> (supervise::Outputs, Option<Pipes>) {
        let (stdout, talk) = match self.stdin {
            Some(stdin) => (None, Some((stdin, self.stdout))),
            None => (Some(self.stdout), None),
        };
        let outputs = supervise::Outputs::Pipes {
            stdout,
            stderr: Some(self.stderr),
        };
        (outputs, talk)
    }
}

/// The command that runs `launch`, for a spawn by the host itself.
fn command(launch: &keeper::Launch) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(&launch.program);
    cmd.args(&launch.args);
    if let Some(dir) = &launch.cwd {
        cmd.current_dir(dir);
    }
    cmd.env_clear();
    cmd.envs(launch.env.iter().map(|(k, v)| (k, v)));
    cmd.kill_on_drop(false);
    cmd
}

/// A pseudo-terminal error as the I/O error it is (or carries).
pub(crate) fn pty_error(e: pty_process::Error) -> std::io::Error {
    match e {
        pty_process::Error::Io(e) => e,
        other => std::io::Error::other(other.to_string()),
    }
}

/// Spawns `cmd` as the leader of a new session whose controlling terminal is a fresh
/// pseudo-terminal of `size` (so its process group is its own, as a piped child's is), a child of
/// the host: the keeper's way when there is no keeper.
fn spawn_on_terminal(cmd: tokio::process::Command, size: TtySize) -> std::io::Result<Spawned> {
    let (pty, pts) = pty_process::open().map_err(pty_error)?;
    pty.resize(pty_process::Size::new(size.rows, size.cols))
        .map_err(pty_error)?;
    let child = pty_process::Command::from(cmd)
        .spawn(pts)
        .map_err(pty_error)?;
    let pgid = child.id().map(|p| p as i32);
    on_terminal(pgid, supervise::Waiter::Child(child), OwnedFd::from(pty))
}

/// A process on a terminal whose master is `master`: the terminal is its stdin, stdout and stderr,
/// its output is pumped from the master and its input written there.
fn on_terminal(
    pgid: Option<i32>,
    waiter: supervise::Waiter,
    master: OwnedFd,
) -> std::io::Result<Spawned> {
    let (read, write) = master::split(master)?;
    Ok(Spawned {
        pgid,
        waiter,
        outputs: supervise::Outputs::Terminal(read),
        talk: None,
        input: Some(input::Input::new(write)),
    })
}

/// Spawns and tracks child processes.
pub struct ProcessService {
    runtime: Handle,
    /// `None` when the configured directory is not private: output past the tail is then not kept.
    /// The held spill directory (`None`: it was refused, and no spill is kept).
    spill_dir: Option<Arc<private_dir::HeldDir>>,
    /// The environment policy applied to the host's environment, once: every child starts from it.
    base_env: Vec<env::Var>,
    /// Spawns the task processes and ends them all if the host dies (`None`: no keeper was asked
    /// for).
    keeper: Option<keeper::Keepers>,
    next: AtomicU64,
    spills: Arc<Spills>,
    /// What all spill files may hold together.
    budget: Arc<budget::SpillBudget>,
    /// Live process groups by process number, ended at shutdown.
    live: escaped::Live,
    /// Descendants that left their group, ended when their process settles.
    escaped: Arc<escaped::Escaped>,
}

impl ProcessService {
    /// A service whose children's environment follows `policy` and whose spill files go to
    /// `spill_dir` (created 0700 if missing; an existing directory must be ours and closed to others,
    /// else spills are refused and reads say the full output is unavailable). Makes the host process a
    /// child subreaper, so descendants that escape their process group are adopted and ended with
    /// their task. With `keeper` (the `taskhost` binary), starts a [`keeper::Keeper`] so that no task
    /// process outlives the host however it dies; while no keeper runs, starts are refused.
    pub fn new(
        runtime: Handle,
        spill_dir: PathBuf,
        spill_budget: u64,
        policy: &env::EnvPolicy,
        keeper: Option<&std::path::Path>,
    ) -> Self {
        escaped::become_subreaper();
        let spill_dir = match private_dir::HeldDir::ensure(&spill_dir) {
            Ok(held) => Some(Arc::new(held)),
            Err(e) => {
                tracing::error!("{e}; output past the in-memory tail will not be kept");
                None
            }
        };
        let live = escaped::Live::default();
        let escaped = Arc::new(escaped::Escaped::new(live.clone()));
        let keeper = keeper.map(|program| {
            keeper::Keepers::start(
                program,
                &escaped.marker_prefix(),
                cgroup::create(),
                live.clone(),
            )
        });
        let (base_env, withheld) = policy.apply_reporting(std::env::vars_os());
        if !withheld.is_empty() {
            let names: Vec<String> = withheld
                .iter()
                .map(|(name, why)| format!("{name} ({why})"))
                .collect();
            tracing::info!(
                "withheld from every task by the default excludes: {}",
                names.join(", ")
            );
        }
        Self {
            runtime,
            base_env,
            keeper,
            spill_dir,
            next: AtomicU64::new(0),
            spills: Arc::default(),
            budget: Arc::new(budget::SpillBudget::new(spill_budget)),
            escaped,
            live,
        }
    }

    fn spill_plan(&self, n: u64, which: &str, cap: u64) -> Option<SpillPlan> {
        let dir = self.spill_dir.as_ref()?;
        let nonce = {
            let t = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            (t as u64 ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)) & 0xFFFF_FFFF_FFFF
        };
        let name = format!(
            "taskhost-{}-{n}-{nonce:012x}-{which}.log",
            std::process::id()
        );
        Some(SpillPlan {
            path: dir.path().join(&name),
            dir: dir.clone(),
            name,
            cap,
            budget: Some(self.budget.clone()),
        })
    }

    /// Starts a process for `owner_session` (its spill files are removed with the session).
    ///
    /// # Errors
    /// [`SpawnError`] naming the OS cause when no process could be started (a missing or unusable
    /// working directory, a NUL byte, an argument list too long, too many open files, ...).
    pub fn spawn(
        &self,
        spec: &ProcessSpec,
        owner_session: &str,
    ) -> Result<Arc<Process>, SpawnError> {
        self.spawn_with(spec, owner_session, false).map(|(p, _)| p)
    }

    /// Starts a process that talks over its stdin and stdout (a protocol peer, such as an ACP agent):
    /// both are handed back; stderr is captured as usual.
    ///
    /// # Errors
    /// As [`ProcessService::spawn`].
    pub fn spawn_piped(
        &self,
        spec: &ProcessSpec,
        owner_session: &str,
    ) -> Result<(Arc<Process>, Pipes), SpawnError> {
        let (process, pipes) = self.spawn_with(spec, owner_session, true)?;
        let pipes = pipes.ok_or_else(|| SpawnError("the child's pipes were not set up".into()))?;
        Ok((process, pipes))
    }

    fn spawn_with(
        &self,
        spec: &ProcessSpec,
        owner_session: &str,
        piped: bool,
    ) -> Result<(Arc<Process>, Option<Pipes>), SpawnError> {
        check_workdir(spec)?;
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (out_plan, err_plan) = (
            self.spill_plan(n, "stdout", spec.spill_cap),
            self.spill_plan(n, "stderr", spec.spill_cap),
        );
        let planned: Vec<PathBuf> = [&out_plan, &err_plan]
            .into_iter()
            .flatten()
            .map(|p| p.path.clone())
            .collect();
        self.spills.record(owner_session, planned.iter().cloned());
        let streams = Streams {
            out: StreamBuf::new(spec.tail_bytes, out_plan),
            err: StreamBuf::new(spec.tail_bytes, err_plan),
        };
        let launch = self.launch(spec, n);
        let _guard = self.runtime.enter();
        let (exit, _) = watch::channel(None);
        let spawning = self.escaped.spawning();
        let spawned = match spec.tty {
            None => self.spawn_with_pipes(&launch, piped),
            Some(size) => self.spawn_with_terminal(&launch, size),
        };
        let Spawned {
            pgid,
            waiter,
            outputs,
            talk,
            input,
        } = match spawned {
            Ok(spawned) => spawned,
            Err(e) => {
                self.spills.forget(owner_session, planned);
                return Err(SpawnError(e.to_string()));
            }
        };
        let process = Process::new(pgid, streams, exit, spec.grace, &self.runtime, input);
        if let Some(g) = pgid {
            self.live.lock().insert(n, g);
            // After the gate: a sweep holds the known state while it waits for the gate.
            drop(spawning);
            self.escaped.own_group(g);
        }
        let supervised = supervise::Supervised {
            n,
            process: process.clone(),
            live: self.live.clone(),
            escaped: self.escaped.clone(),
            spills: self.spills.clone(),
            budget: self.budget.clone(),
            session: owner_session.to_owned(),
            keeper: self.keeper.clone(),
        };
        self.runtime.spawn(supervised.run(waiter, pgid, outputs));
        Ok((process, talk))
    }

    /// Spawns a piped child: through the keeper when the service has one (its small descriptor
    /// table makes the spawn's cost independent of the host's; while none runs the start fails),
    /// else directly.
    fn spawn_with_pipes(&self, launch: &keeper::Launch, piped: bool) -> std::io::Result<Spawned> {
        let (child_ends, host_ends) = pipes(piped)?;
        let kept = self
            .keeper
            .as_ref()
            .map(|k| k.spawn(launch, keeper::KeptStreams::Pipes(child_ends.borrowed())));
        let (pgid, waiter) = match kept {
            Some(Ok(kept)) => (Some(kept.pid), supervise::Waiter::Kept(kept.exit)),
            Some(Err(e)) => return Err(std::io::Error::other(e.to_string())),
            None => {
                let child = child_ends.spawn(command(launch))?;
                (
                    child.id().map(|p| p as i32),
                    supervise::Waiter::Child(child),
                )
            }
        };
        let (outputs, talk) = host_ends.split();
        Ok(Spawned {
            pgid,
            waiter,
            outputs,
            talk,
            input: None,
        })
    }

    /// Spawns a child on a fresh terminal: through the keeper when the service has one, which hands
    /// the terminal's master back, else directly.
    fn spawn_with_terminal(
        &self,
        launch: &keeper::Launch,
        size: TtySize,
    ) -> std::io::Result<Spawned> {
        match self
            .keeper
            .as_ref()
            .map(|k| k.spawn(launch, keeper::KeptStreams::Terminal(size)))
        {
            Some(Ok(keeper::KeptProcess {
                pid,
                exit,
                master: Some(master),
            })) => on_terminal(Some(pid), supervise::Waiter::Kept(exit), master),
            Some(Ok(_)) => Err(std::io::Error::other(
                "the keeper sent no terminal for the process",
            )),
            Some(Err(e)) => Err(std::io::Error::other(e.to_string())),
            None => spawn_on_terminal(command(launch), size),
        }
    }

    /// What process number `n` runs: bash (or `argv`), resolved on the child's `PATH`, with the
    /// environment policy's variables, the spec's, and the marker. Its stdio and process group are
    /// set by how it is spawned.
    fn launch(&self, spec: &ProcessSpec, n: u64) -> keeper::Launch {
        let mut env = self.base_env.clone();
        for (k, v) in &spec.extra_env {
            env::override_var(&mut env, k.into(), v.into());
        }
        env::override_var(
            &mut env,
            escaped::MARKER.into(),
            self.escaped.marker(n).into(),
        );
        if spec.tty.is_some() {
            // A terminal that draws: programs may use colour and cursor movement (the model's copy
            // of the output has them stripped).
            env::override_var(&mut env, "TERM".into(), "xterm-256color".into());
        }
        let search_path = env
            .iter()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.as_os_str());
        let (program, args): (&str, Vec<&str>) = match spec.argv.as_deref() {
            Some([program, args @ ..]) => (program, args.iter().map(String::as_str).collect()),
            _ => ("bash", vec!["-c", &spec.command]),
        };
        keeper::Launch {
            program: env::resolve_program(program, search_path),
            args: args.into_iter().map(Into::into).collect(),
            env,
            cwd: spec.workdir.clone(),
        }
    }

    /// Removes the spill files of a disposed session.
    pub fn remove_spills(&self, session: &str) {
        let paths = self.spills.0.lock().remove(session).unwrap_or_default();
        for p in paths {
            if let Ok(meta) = std::fs::symlink_metadata(&p)
                && std::fs::remove_file(&p).is_ok()
            {
                self.budget.shrank(meta.len());
            }
        }
    }

    /// Ends every live process group at once (SIGKILL) and removes every spill file: the last step of
    /// a host shutdown, after the registry's orderly teardown.
    pub fn shutdown(&self) {
        let groups: Vec<i32> = self.live.lock().drain().map(|(_, g)| g).collect();
        for &g in &groups {
            signal_group(g, nix::sys::signal::Signal::SIGKILL);
        }
        self.escaped.sweep(&groups);
        let sessions: Vec<String> = self.spills.0.lock().keys().cloned().collect();
        for s in sessions {
            self.remove_spills(&s);
        }
        if let Some(k) = &self.keeper {
            k.stop();
        }
    }

    /// The keeper's pid, while one runs (a child of the host that is no task's).
    pub fn keeper_pid(&self) -> Option<u32> {
        self.keeper.as_ref().and_then(keeper::Keepers::pid)
    }

    /// Spill files recorded for removal, across sessions: only files that were created.
    pub fn spill_files(&self) -> usize {
        self.spills.0.lock().values().map(HashSet::len).sum()
    }

    /// Live process groups.
    pub fn live(&self) -> usize {
        self.live.lock().len()
    }

    /// Escaped descendants adopted and not yet ended (they belong to running processes).
    pub fn adopted(&self) -> usize {
        self.escaped.adopted()
    }
}
