//! A spawned process's supervision: its output pumped into its streams, its exit awaited, its group
//! and its escaped descendants ended, then the settlement published.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::unix::pipe::Receiver;

use super::bounds::Bounds;
use super::bounds::limits::TaskCgroups;
use super::child::signal_group;
use super::keeper::Keepers;
use super::spills::Spills;
use super::splice::{Spliced, splice_kept};
use super::stream::FLUSH_EVERY;
use super::{Exit, Process, escaped};

/// How a process's exit is awaited.
pub(crate) enum Waiter {
    /// A child of the host, reaped by the runtime.
    Child(tokio::process::Child),
    /// A child of the keeper, which reaps it and reports the exit.
    Kept(tokio::sync::oneshot::Receiver<Exit>),
}

impl Waiter {
    async fn exit(self) -> Exit {
        match self {
            Waiter::Child(mut child) => match child.wait().await {
                Ok(s) => {
                    use std::os::unix::process::ExitStatusExt;
                    match (s.code(), s.signal()) {
                        (Some(c), _) => Exit::Code(c),
                        (None, Some(sig)) => Exit::Signal(sig),
                        _ => Exit::Unknown,
                    }
                }
                Err(_) => Exit::Unknown,
            },
            Waiter::Kept(exit) => exit.await.unwrap_or(Exit::Unknown),
        }
    }
}

/// Where a process's output comes from.
pub(crate) enum Outputs {
    /// Its stdout (unless handed to a protocol peer) and stderr pipes.
    Pipes {
        stdout: Option<Receiver>,
        stderr: Option<Receiver>,
    },
    /// The master side of its terminal: everything it writes, on one stream.
    Terminal(Receiver),
}

/// What the supervision of process number `n` needs of its service.
pub(crate) struct Supervised {
    pub(crate) n: u64,
    pub(crate) process: Arc<Process>,
    pub(crate) live: escaped::Live,
    pub(crate) escaped: Arc<escaped::Escaped>,
    pub(crate) spills: Arc<Spills>,
    pub(crate) budget: Arc<crate::budget::SpillBudget>,
    pub(crate) session: String,
    pub(crate) keeper: Option<Keepers>,
    /// The owner's bounds and the process's own cgroups, for a bounded process.
    pub(crate) bounded: Option<Bounded>,
}

/// A bounded process's bounds and its own cgroups (where its bounds set a limit).
pub(crate) type Bounded = (Arc<Bounds>, Option<TaskCgroups>);

impl Supervised {
    /// Runs until the process has settled: exited, its group ended, its pipes drained (within the
    /// grace), its escaped descendants swept; then its exit is published.
    pub(crate) async fn run(self, waiter: Waiter, pgid: Option<i32>, outputs: Outputs) {
        let p = self.process.clone();
        let shared = |r: Option<Receiver>| r.map(Arc::new);
        let (out, err, widen): (_, _, fn(&Receiver)) = match outputs {
            Outputs::Pipes { stdout, stderr } => (shared(stdout), shared(stderr), widen_pipe),
            // A terminal's master reports EIO once every holder of its other side is gone: the end.
            Outputs::Terminal(master) => (shared(Some(master)), None, |_| {}),
        };
        if let (Some(k), Some(g)) = (&self.keeper, pgid) {
            k.read_ends(g, read_ends(out.as_ref(), err.as_ref()));
        }
        let (out, err) = (
            tokio::spawn(pump(out, p.clone(), true, widen)),
            tokio::spawn(pump(err, p.clone(), false, widen)),
        );
        let exit = waiter.exit().await;
        let pumps = async {
            let _ = out.await;
            let _ = err.await;
        };
        tokio::pin!(pumps);
        // The pipes close when every writer is gone. A writer left in the task's group gets the grace
        // to finish; once the group is empty, only processes that left it (daemons, ended by the sweep
        // below) can hold them, and nothing waits for those.
        let deadline = tokio::time::Instant::now() + p.grace;
        let drained = loop {
            tokio::select! {
                () = &mut pumps => break true,
                () = tokio::time::sleep_until(deadline) => break false,
                () = tokio::time::sleep(Duration::from_millis(20)) => {
                    if !pgid.is_some_and(escaped::group_exists) {
                        break false;
                    }
                }
            }
        };
        end_what_is_left(pgid).await;
        self.live.lock().remove(&self.n);
        self.escaped.settled(pgid).await;
        settle_bounds(self.bounded, &p, exit.clone()).await;
        if let (Some(k), Some(g)) = (&self.keeper, pgid) {
            k.group_ended(g);
        }
        if !drained {
            // What the writers left in the pipes, now that they are gone.
            let _ = tokio::time::timeout_at(deadline, &mut pumps).await;
        }
        {
            let mut s = p.streams.lock();
            s.out.finish();
            s.err.finish();
        }
        self.spills.forget_unused(&self.session, &p);
        self.budget.settled(p.spill_paths());
        p.exit.send_replace(Some(exit));
    }
}

/// Ends what is left of a settled task's group `pgid`: nothing of it survives the task.
async fn end_what_is_left(pgid: Option<i32>) {
    if let Some(g) = pgid
        && signal_group(g, nix::sys::signal::Signal::SIGTERM)
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
        signal_group(g, nix::sys::signal::Signal::SIGKILL);
    }
}

/// For a bounded process, what ended it, read in its cgroups before they go: whatever is left in
/// them is ended (a bounded task's processes end with it) and they are removed.
async fn settle_bounds(bounded: Option<Bounded>, process: &Process, exit: Exit) {
    let Some((bounds, cgroups)) = bounded else {
        return;
    };
    let ended = tokio::task::spawn_blocking(move || {
        let ended = super::bounds::ended_by(&bounds, cgroups.as_ref(), &exit);
        cgroups.as_ref().map(TaskCgroups::remove);
        ended
    });
    *process.ended_by.lock() = ended.await.ok().flatten();
}

/// Copies one pipe into its stream until EOF: by splicing it into the stream's kept file while
/// the file holds the whole stream ([`splice_kept`]), else by reading it. Starts with the kernel's
/// default 64 KiB; a read that fills the buffer marks a busy stream, which then gets a 1 MiB read
/// size and `widen` is asked to enlarge its pipe (fewer wakeups).
async fn pump(
    pipe: Option<Arc<Receiver>>,
    process: Arc<Process>,
    stdout: bool,
    widen: fn(&Receiver),
) {
    let Some(pipe) = pipe else { return };
    let mut buf = vec![0u8; 64 * 1024];
    // Only this pump adds to the batch; a read that writes it out early leaves a timer that finds
    // nothing to do.
    let mut pending = false;
    let mut splicing = true;
    loop {
        if splicing {
            match splice_kept(&pipe, &process, stdout, &mut buf).await {
                Spliced::Moved(n) => {
                    process.arrived.send_modify(|n| *n = n.wrapping_add(1));
                    grow(&pipe, &mut buf, n, widen);
                    continue;
                }
                Spliced::End => return,
                Spliced::Declined => splicing = false,
            }
        }
        let read = if pending {
            // Output gathered past the cap goes to the file once the pipe is quiet for a while.
            match tokio::time::timeout(FLUSH_EVERY, read(&pipe, &mut buf)).await {
                Ok(read) => read,
                Err(_) => {
                    process.streams.lock().side(stdout).flush();
                    pending = false;
                    continue;
                }
            }
        } else {
            read(&pipe, &mut buf).await
        };
        match read {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let kept_again;
                (pending, kept_again) = {
                    let mut streams = process.streams.lock();
                    let stream = streams.side(stdout);
                    let gap = stream.gap.is_some();
                    stream.push(&buf[..n]);
                    (stream.has_pending(), gap && stream.gap.is_none())
                };
                // The disk takes the kept file's writes again: splicing may go on.
                splicing |= kept_again;
                process.arrived.send_modify(|n| *n = n.wrapping_add(1));
                grow(&pipe, &mut buf, n, widen);
            }
        }
    }
}

/// After a read of `n` bytes into `buf`: a read that filled it marks a busy stream, which gets a
/// 1 MiB read size and its pipe widened.
fn grow(pipe: &Receiver, buf: &mut Vec<u8>, n: usize, widen: fn(&Receiver)) {
    if n == buf.len() && buf.len() < PIPE_BYTES {
        widen(pipe);
        buf.resize(PIPE_BYTES, 0);
    }
}

/// Reads what `pipe` has once it has something (a shared pipe: its read ends may be asked for while
/// it is read, see [`read_ends`]).
async fn read(pipe: &Receiver, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        pipe.readable().await?;
        match pipe.try_read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            read => return read,
        }
    }
}

/// Second handles of the read ends `out` and `err` while both are read (a terminal's master alone),
/// for a keeper that carries the task of a dead one (see [`Keepers::read_ends`]).
fn read_ends(out: Option<&Arc<Receiver>>, err: Option<&Arc<Receiver>>) -> crate::keeper::ReadEnds {
    let ends: Vec<std::sync::Weak<Receiver>> =
        out.into_iter().chain(err).map(Arc::downgrade).collect();
    Arc::new(move || {
        ends.iter()
            .map(|end| {
                let end = end.upgrade()?;
                std::os::fd::AsFd::as_fd(&*end).try_clone_to_owned().ok()
            })
            .collect()
    })
}

/// Pipe capacity asked for each output pipe, and the read size: fewer, larger reads than the
/// kernel's 64 KiB default.
const PIPE_BYTES: usize = 1 << 20;

/// Asks the kernel for a larger pipe buffer; a refusal (over the system limit) leaves the default.
fn widen_pipe<P: std::os::fd::AsFd>(pipe: &P) {
    let _ = nix::fcntl::fcntl(pipe, nix::fcntl::FcntlArg::F_SETPIPE_SZ(PIPE_BYTES as i32));
}
