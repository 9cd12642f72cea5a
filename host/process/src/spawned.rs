//! A child once spawned by the host or the keeper: its pipes or its terminal, how its exit is
//! awaited, and the host's ends of its output and input.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::Stdio;

use tokio::net::unix::pipe;

use crate::keeper::Launch;
use crate::spec::{Pipes, TtySize};
use crate::{input, master, supervise};

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

/// A spawned child: its process group, how its exit is awaited, where its output comes from, the
/// pipes handed back to a protocol peer, its terminal's input, and whether the keeper holds it.
pub(crate) struct Spawned {
    pub(crate) pgid: Option<i32>,
    pub(crate) waiter: supervise::Waiter,
    pub(crate) outputs: supervise::Outputs,
    pub(crate) talk: Option<Pipes>,
    pub(crate) input: Option<input::Input>,
    /// The keeper holds it for a successor of the host from its start.
    pub(crate) held_from_start: bool,
}

/// The ends of a piped child's pipes that the child gets (stdin `None`: `/dev/null`).
pub(crate) struct ChildEnds {
    stdin: Option<OwnedFd>,
    stdout: OwnedFd,
    stderr: OwnedFd,
}

/// The host's ends of a piped child's pipes.
pub(crate) struct HostEnds {
    stdin: Option<pipe::Sender>,
    stdout: pipe::Receiver,
    stderr: pipe::Receiver,
}

/// Pipes for stdout and stderr, and for stdin when `piped`. The host's ends are non-blocking (the
/// child's are not), and no end is inherited by any other child.
pub(crate) fn pipes(piped: bool) -> std::io::Result<(ChildEnds, HostEnds)> {
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
    pub(crate) fn borrowed(&self) -> [Option<BorrowedFd<'_>>; 3] {
        [
            self.stdin.as_ref().map(AsFd::as_fd),
            Some(self.stdout.as_fd()),
            Some(self.stderr.as_fd()),
        ]
    }

    /// Spawns `cmd` directly, a child of the host, in its own process group with these ends.
    pub(crate) fn spawn(
        self,
        mut cmd: tokio::process::Command,
    ) -> std::io::Result<tokio::process::Child> {
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
    pub(crate) fn split(self) -> (supervise::Outputs, Option<Pipes>) {
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
pub(crate) fn command(launch: &Launch) -> tokio::process::Command {
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
pub(crate) fn spawn_on_terminal(
    cmd: tokio::process::Command,
    size: TtySize,
) -> std::io::Result<Spawned> {
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
pub(crate) fn on_terminal(
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
        held_from_start: false,
    })
}
