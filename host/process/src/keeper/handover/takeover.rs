//! Running tasks that outlive their host: what the keeper holds of each for a successor, and a
//! successor taking them back (same processes, output going on where the kept files stand).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::sync::watch;

use crate::child::{Process, Streams};
use crate::keeper::{
    AdoptedKeeper, Handed, HandedTask, HeldAs, HeldFromStart, HeldStream, Hold, HoldSetup, Keepers,
};
use crate::master;
use crate::service::ProcessService;
use crate::spec::{HoldSpec, SpawnError};
use crate::stream::StreamBuf;
use crate::supervise::{Outputs, Supervised, Waiter};

impl ProcessService {
    /// Serves with `adopted`, the keeper a gone predecessor handed `handed` over with (see
    /// [`Keepers::take_waiting`]), instead of a keeper of its own; should it die, keepers of
    /// `program` take its place. Its tasks are then taken back with [`ProcessService::take_over`].
    #[must_use]
    pub fn with_adopted_keeper(
        mut self,
        program: &Path,
        adopted: AdoptedKeeper,
        handed: &Handed,
    ) -> Self {
        let prefix = self.escaped.marker_prefix();
        let next = handed.tasks.iter().map(|t| t.hold.n).max().unwrap_or(0);
        self.next.fetch_max(next, Ordering::Relaxed);
        if let Some(k) = self.keeper.take() {
            k.stop();
        }
        // The successor's bounded starts go through the same binary's wrapper.
        self.wrapper = Some(crate::bounds::Wrapper::beside(program));
        self.keeper = Some(Keepers::with_adopted(
            program,
            &prefix,
            adopted,
            &handed.markers,
            self.live.clone(),
        ));
        self
    }

    /// Asks the keeper (and every later one) to hold this host's running tasks for a successor
    /// once the host is gone (see [`Keepers::enable_handover`]).
    pub fn enable_handover(&self, setup: HoldSetup) {
        if let Some(k) = &self.keeper {
            let kept_dir = self
                .kept_dir
                .as_ref()
                .and_then(|d| d.as_fd().try_clone_to_owned().ok());
            k.enable_handover(setup, kept_dir);
        }
    }

    /// Withdraws the handover (a host that stops has no successor): from now on the tasks end with
    /// the host however it ends, a second stop signal's exit included.
    pub fn cancel_handover(&self) {
        if let Some(k) = &self.keeper {
            k.cancel_handover();
        }
    }

    /// Calls `tell` with the names of the running tasks a keeper held for a successor each time it
    /// dies (see [`Keepers::on_unheld`]): they end with the host from then on.
    pub fn on_unheld(&self, tell: impl Fn(Vec<String>) + Send + Sync + 'static) {
        if let Some(k) = &self.keeper {
            k.on_unheld(tell);
        }
    }

    /// True once the keeper holds this host's tasks for a successor (see
    /// [`ProcessService::enable_handover`]).
    pub fn hands_over(&self) -> bool {
        self.keeper.as_ref().is_some_and(Keepers::hands_over)
    }

    /// Lets the keeper hold the running tasks for a successor (an upgrade): no keeper is started
    /// after it, and nothing is ended.
    pub fn leave_keeper(&self) {
        if let Some(k) = &self.keeper {
            k.leave();
        }
    }

    /// Makes the kept files of `process`, spawned for `session` with
    /// [`crate::ProcessSpec::kept_for_session`], the task's: no longer removed with the session.
    pub fn kept_as_task(&self, session: &str, process: &Arc<Process>) {
        self.spills
            .forget(session, process.output_files().into_iter().flatten());
    }

    /// Asks the keeper to hold `process`, the task `task`, for a handover: its output's read ends
    /// and kept files (only a process with kept output that is still running). Held already for
    /// something else, the keeper renames what it holds (a foreground command, held as
    /// [`HeldAs::Foreground`], that became a task); held for this task from its start, nothing is
    /// said.
    pub fn hold_for_handover(&self, process: &Arc<Process>, task: &str) {
        let (Some(k), Some(pgid)) = (&self.keeper, process.pgid) else {
            return;
        };
        let held_as = HeldAs::Task(task.to_owned());
        let Some((mut hold, fds)) = process.hold.lock().take() else {
            let mut held = process.held_as.lock();
            if held.as_ref().is_some_and(|h| *h != held_as) {
                k.rename(pgid, task);
                *held = Some(held_as);
            }
            return;
        };
        if process.exit.borrow().is_some() {
            return;
        }
        hold.held_as = held_as.clone();
        *process.held_as.lock() = Some(held_as);
        k.hold(pgid, hold, fds);
    }

    /// The plan of a kept file at `path` (in the kept directory) of cap `cap`.
    fn kept_plan(&self, path: &Path, cap: u64) -> Option<crate::stream::SpillPlan> {
        let dir = self.kept_dir.clone()?;
        let name = path.file_name()?.to_str()?.to_owned();
        Some(crate::stream::SpillPlan {
            path: dir.path().join(&name),
            dir,
            name,
            cap,
            budget: Some(self.budget.clone()),
            kept: true,
        })
    }

    /// What the keeper would hold of process `n` for a handover, when the keeper hands over and the
    /// process keeps its output: second handles of its output's read ends and of its kept files.
    pub(crate) fn handover_hold(
        &self,
        n: u64,
        spec: &HoldSpec,
        outputs: &Outputs,
        streams: &mut Streams,
    ) -> Option<(Hold, Vec<OwnedFd>)> {
        let terminal = match outputs {
            Outputs::Terminal(_) => true,
            Outputs::Pipes {
                stdout: Some(_),
                stderr: Some(_),
            } => false,
            Outputs::Pipes { .. } => return None,
        };
        let plan = self.hold_plan(n, spec, streams, terminal)?;
        let fds = match outputs {
            Outputs::Terminal(master) => {
                let mut fds = vec![master.as_fd()];
                fds.extend(plan.terminal_fds());
                fds
            }
            Outputs::Pipes { .. } => plan.pipe_fds(outputs)?,
        };
        let fds = fds
            .into_iter()
            .map(|fd| fd.try_clone_to_owned().ok())
            .collect::<Option<Vec<_>>>()?;
        Some((plan.hold, fds))
    }

    /// What the keeper would hold of process `n`, a terminal's or a piped one's, before its read
    /// ends exist: `None` unless the keeper hands over and the process keeps its output. Its kept
    /// files are made now.
    pub(crate) fn hold_plan(
        &self,
        n: u64,
        spec: &HoldSpec,
        streams: &mut Streams,
        terminal: bool,
    ) -> Option<HoldPlan> {
        if !spec.keep_output || !self.keeper.as_ref().is_some_and(Keepers::hands_over) {
            return None;
        }
        let mut kept = vec![OwnedFd::from(streams.out.open_kept()?)];
        if !terminal {
            kept.push(OwnedFd::from(streams.err.open_kept()?));
        }
        let name = |s: &StreamBuf| {
            s.planned_path()
                .and_then(|p| Some(p.file_name()?.to_str()?.to_owned()))
                .unwrap_or_default()
        };
        let stream = |file: String| HeldStream {
            cap: spec.spill_cap,
            kept: true,
            file,
            pending: Vec::new(),
            dropped: 0,
        };
        let mut held = vec![stream(name(&streams.out))];
        if !terminal {
            held.push(stream(name(&streams.err)));
        }
        let hold = Hold {
            // Named once it is known whom it is held for.
            held_as: HeldAs::Task(String::new()),
            n,
            tail_bytes: spec.tail_bytes,
            grace_ms: spec.grace_ms,
            terminal,
            streams: held,
            stdin: false,
        };
        Some(HoldPlan { hold, kept })
    }

    /// Ends the process group of a task the predecessor's keeper handed over that is not taken
    /// back, and has the keeper forget it (a keeper of protocol 7 would hold it on).
    pub fn end_handed(&self, pgid: i32) {
        crate::child::end_group(pgid);
        if let Some(k) = &self.keeper {
            k.group_ended(pgid);
        }
    }

    /// Takes back a task the predecessor's keeper handed over: its output goes on into its kept
    /// files `files` (stdout, stderr) from their ends, with its owner's reads at `read`, after
    /// what the keeper drained and could not write; its exit comes from the keeper. The task's
    /// spill files belong to `session`.
    ///
    /// # Errors
    /// [`SpawnError`] when its descriptors cannot be served (the caller ends it with
    /// [`ProcessService::end_handed`]).
    pub fn take_over(
        &self,
        task: HandedTask,
        files: [Option<PathBuf>; 2],
        read: [u64; 2],
        session: &str,
    ) -> Result<Arc<Process>, SpawnError> {
        let err = |e: &dyn std::fmt::Display| SpawnError(e.to_string());
        let HandedTask {
            pgid,
            hold,
            streams: fds,
            exit,
            ..
        } = task;
        let tail = usize::try_from(hold.tail_bytes).unwrap_or(usize::MAX);
        let mut bufs = Vec::new();
        for (i, ((read_end, file), meta)) in fds.into_iter().zip(&hold.streams).enumerate() {
            // The record's path, else the name the keeper held (a start killed before its record
            // named its files).
            let path = files[i].clone().or_else(|| {
                let dir = self.kept_dir.as_ref()?;
                (!meta.file.is_empty()).then(|| dir.path().join(&meta.file))
            });
            let plan = path.as_ref().and_then(|p| self.kept_plan(p, meta.cap));
            // A keeper of protocol 3 names the kept file it held by name.
            let file = match (&plan, file) {
                (Some(plan), None) if meta.by_name() => plan.dir.open_existing(&plan.name).ok(),
                (_, file) => file,
            };
            let mut buf = match (plan, file) {
                (Some(plan), Some(file)) => StreamBuf::resume(tail, plan, file, read[i]),
                _ => StreamBuf::new(tail, None),
            };
            if meta.dropped > 0 {
                let note = format!(
                    "\n[taskhost: {} bytes of output were dropped while no host ran]\n",
                    meta.dropped
                );
                buf.push(note.as_bytes());
            }
            buf.push(&meta.pending);
            bufs.push((read_end, buf));
        }
        let _guard = self.runtime.enter();
        let mut bufs = bufs.into_iter();
        let (out_end, out) = bufs.next().ok_or_else(|| err(&"no output stream"))?;
        let err_stream = bufs.next();
        let (outputs, input, err_buf) = if hold.terminal {
            let (reader, writer) = master::split(out_end).map_err(|e| err(&e))?;
            (
                Outputs::Terminal(reader),
                Some(crate::input::Input::new(writer)),
                StreamBuf::new(tail, None),
            )
        } else {
            let (err_end, err_buf) = err_stream.ok_or_else(|| err(&"no stderr stream"))?;
            let pipe = |fd| tokio::net::unix::pipe::Receiver::from_owned_fd(fd);
            let outputs = Outputs::Pipes {
                stdout: Some(pipe(out_end).map_err(|e| err(&e))?),
                stderr: Some(pipe(err_end).map_err(|e| err(&e))?),
            };
            (outputs, None, err_buf)
        };
        let mut streams = Streams { out, err: err_buf };
        let spec = HoldSpec {
            keep_output: true,
            spill_cap: hold.streams.first().map_or(0, |s| s.cap),
            tail_bytes: hold.tail_bytes,
            grace_ms: hold.grace_ms,
        };
        // A keeper of protocol 7 holds it on as it was; an older one is asked again.
        let held_on = self.keeper.as_ref().is_some_and(|k| k.hold_on(pgid, &hold));
        let again = match held_on {
            true => None,
            false => self.handover_hold(hold.n, &spec, &outputs, &mut streams),
        };
        let grace = Duration::from_millis(hold.grace_ms);
        let (exit_tx, _) = watch::channel(None);
        let process = Process::new(Some(pgid), streams, exit_tx, grace, &self.runtime, input);
        *process.hold.lock() = again;
        if held_on {
            *process.held_as.lock() = Some(hold.held_as.clone());
        }
        self.next.fetch_max(hold.n, Ordering::Relaxed);
        self.live.lock().insert(hold.n, pgid);
        self.escaped.own_group(pgid);
        let supervised = Supervised {
            n: hold.n,
            process: process.clone(),
            live: self.live.clone(),
            escaped: self.escaped.clone(),
            spills: self.spills.clone(),
            budget: self.budget.clone(),
            session: session.to_owned(),
            keeper: self.keeper.clone(),
            bounded: adopted_bounds(pgid, hold.n, self.keeper.as_ref()),
        };
        self.runtime
            .spawn(supervised.run(Waiter::Kept(exit), Some(pgid), outputs));
        Ok(process)
    }
}

/// A handed-over process's cgroups, found by their names (the hold does not name them), and the
/// memory limit they hold: this host names the limit when it ends the task, ends what is left in
/// them and removes them, as the host that started it would have. The other parts of the task's
/// bounds the kernel keeps on the process itself.
fn adopted_bounds(
    pgid: i32,
    n: u64,
    keeper: Option<&crate::keeper::Keepers>,
) -> Option<crate::supervise::Bounded> {
    let hosts = keeper?.predecessors();
    let cgroups = crate::bounds::limits::TaskCgroups::of_handed(pgid, n, &hosts)?;
    let bounds = crate::bounds::Bounds {
        memory_max: cgroups.memory_limit(),
        ..crate::bounds::Bounds::default()
    };
    Some((Arc::new(bounds), Some(cgroups)))
}

/// What the keeper is to hold of a process, made before the process's read ends exist (see
/// [`ProcessService::hold_plan`]): the hold, and its kept files (stdout's, then stderr's unless it
/// runs on a terminal).
pub(crate) struct HoldPlan {
    pub(crate) hold: Hold,
    kept: Vec<OwnedFd>,
}

impl HoldPlan {
    /// Its descriptors beside a piped process's read ends `outputs`, in the order
    /// [`Hold::descriptors`] says; `None` without both read ends (a protocol peer's stdout is not
    /// the host's to hold).
    pub(crate) fn pipe_fds<'a>(&'a self, outputs: &'a Outputs) -> Option<Vec<BorrowedFd<'a>>> {
        let (
            Outputs::Pipes {
                stdout: Some(out),
                stderr: Some(err),
            },
            [out_file, err_file],
        ) = (outputs, self.kept.as_slice())
        else {
            return None;
        };
        Some(vec![
            out.as_fd(),
            out_file.as_fd(),
            err.as_fd(),
            err_file.as_fd(),
        ])
    }

    /// What a start held from its first instant carries: the hold, and `fds`, its descriptors
    /// ([`HoldPlan::pipe_fds`] or [`HoldPlan::terminal_fds`]).
    pub(crate) fn at_start<'a>(&'a self, fds: &'a [BorrowedFd<'a>]) -> HeldFromStart<'a> {
        HeldFromStart {
            hold: &self.hold,
            fds,
        }
    }

    /// A terminal's descriptors less its read end (the master, which the keeper opens): its kept
    /// file.
    pub(crate) fn terminal_fds(&self) -> Vec<BorrowedFd<'_>> {
        self.kept.iter().map(AsFd::as_fd).collect()
    }
}
