//! The process service: spawns every child of every producer, keeps its output, ends it, and
//! removes what it left.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::runtime::Handle;
use tokio::sync::watch;

use crate::child::{Process, Streams, signal_group};
use crate::spawned::Spawned;
use crate::spec::{HoldSpec, Pipes, ProcessSpec, SpawnError, check_workdir};
use crate::spills::Spills;
use crate::stream::StreamBuf;
use crate::{budget, cgroup, env, escaped, keeper, private_dir, supervise};

/// Spawns and tracks child processes.
pub struct ProcessService {
    pub(crate) runtime: Handle,
    /// `None` when the configured directory is not private: output past the tail is then not kept.
    /// The held spill directory (`None`: it was refused, and no spill is kept).
    pub(crate) spill_dir: Option<Arc<private_dir::HeldDir>>,
    /// Where kept output goes (the host's state directory), if the host keeps output.
    pub(crate) kept_dir: Option<Arc<private_dir::HeldDir>>,
    /// The environment policy applied to the host's environment, once: every child starts from it.
    pub(crate) base_env: Vec<env::Var>,
    /// Spawns the task processes and ends them all if the host dies (`None`: no keeper was asked
    /// for).
    pub(crate) keeper: Option<keeper::Keepers>,
    pub(crate) next: AtomicU64,
    pub(crate) spills: Arc<Spills>,
    /// What all spill files may hold together.
    pub(crate) budget: Arc<budget::SpillBudget>,
    /// Live process groups by process number, ended at shutdown.
    pub(crate) live: escaped::Live,
    /// Descendants that left their group, ended when their process settles.
    pub(crate) escaped: Arc<escaped::Escaped>,
    /// What starts bounded processes ([`crate::bounds::wrap`]): found beside the keeper's program.
    pub(crate) wrapper: Option<crate::bounds::Wrapper>,
    /// Where each start's bounds come from, by its owner (`None`: only a spec's own).
    pub(crate) owner_bounds: Option<Arc<dyn crate::owner_bounds::OwnerBounds>>,
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
        let wrapper = keeper.map(crate::bounds::Wrapper::beside);
        if wrapper.is_some() {
            crate::bounds::limits::sweep();
        }
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
            kept_dir: None,
            next: AtomicU64::new(0),
            spills: Arc::default(),
            budget: Arc::new(budget::SpillBudget::new(spill_budget)),
            escaped,
            live,
            wrapper,
            owner_bounds: None,
        }
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

    /// The output streams of process `n`, and the spill files recorded as `owner_session`'s for
    /// them (none for output kept for a task).
    fn planned_streams(
        &self,
        n: u64,
        spec: &ProcessSpec,
        owner_session: &str,
    ) -> (Vec<PathBuf>, Streams) {
        let (out_plan, err_plan) = (
            self.spill_plan(n, "stdout", spec.spill_cap, spec.keep_output),
            self.spill_plan(n, "stderr", spec.spill_cap, spec.keep_output),
        );
        let planned: Vec<PathBuf> =
            if spec.keep_output && self.kept_dir.is_some() && !spec.kept_for_session {
                Vec::new()
            } else {
                [&out_plan, &err_plan]
                    .into_iter()
                    .flatten()
                    .map(|p| p.path.clone())
                    .collect()
            };
        self.spills.record(owner_session, planned.iter().cloned());
        let streams = Streams {
            out: StreamBuf::new(spec.tail_bytes, out_plan),
            err: StreamBuf::new(spec.tail_bytes, err_plan),
        };
        (planned, streams)
    }

    fn spawn_with(
        &self,
        spec: &ProcessSpec,
        owner_session: &str,
        piped: bool,
    ) -> Result<(Arc<Process>, Option<Pipes>), SpawnError> {
        check_workdir(spec)?;
        let n = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let (planned, mut streams) = self.planned_streams(n, spec, owner_session);
        let held = spec.held_as.as_ref().and_then(|held_as| {
            let mut plan =
                self.hold_plan(n, &HoldSpec::of(spec), &mut streams, spec.tty.is_some())?;
            plan.hold.held_as.clone_from(held_as);
            Some(plan)
        });
        let (launch, bounded) = self.wrapped(spec, owner_session, self.launch(spec, n), n)?;
        let _guard = self.runtime.enter();
        let (exit, _) = watch::channel(None);
        let spawning = self.escaped.spawning();
        let spawned = match spec.tty {
            None => self.spawn_with_pipes(&launch, piped, held.as_ref()),
            Some(size) => self.spawn_with_terminal(&launch, size, held.as_ref()),
        };
        drop(held);
        let Spawned {
            pgid,
            waiter,
            outputs,
            talk,
            input,
            held_from_start,
        } = match spawned {
            Ok(spawned) => spawned,
            Err(e) => {
                // A kept file made for a hold is the failed start's.
                for path in [&streams.out, &streams.err].map(|s| s.planned_path()) {
                    if let Some(path) = path.filter(|p| p.exists()) {
                        let _ = std::fs::remove_file(path);
                    }
                }
                self.spills.forget(owner_session, planned);
                return Err(SpawnError(e.to_string()));
            }
        };
        let hold = match held_from_start {
            true => None,
            false => self.handover_hold(n, &HoldSpec::of(spec), &outputs, &mut streams),
        };
        let process = Process::new(pgid, streams, exit, spec.grace, &self.runtime, input);
        *process.hold.lock() = hold;
        if held_from_start {
            process.held_as.lock().clone_from(&spec.held_as);
        }
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
            bounded,
        };
        self.runtime.spawn(supervised.run(waiter, pgid, outputs));
        Ok((process, talk))
    }

    /// Resolves every start's bounds by its owner through `resolver` (see
    /// [`crate::OwnerBounds`]).
    #[must_use]
    pub fn with_owner_bounds(
        mut self,
        resolver: Arc<dyn crate::owner_bounds::OwnerBounds>,
    ) -> Self {
        self.owner_bounds = Some(resolver);
        self
    }

    /// `launch` as the `n`th process starts for `owner`: through the bounds wrapper, in cgroups of
    /// its own where its bounds set a limit, when the spec or the owner has bounds; as it is
    /// otherwise. An owner whose bounds cannot be found is refused.
    fn wrapped(
        &self,
        spec: &ProcessSpec,
        owner: &str,
        launch: crate::keeper::Launch,
        n: u64,
    ) -> Result<(crate::keeper::Launch, Option<supervise::Bounded>), SpawnError> {
        let bounds = match (&spec.bounds, &self.owner_bounds) {
            (Some(bounds), _) => Some(bounds.clone()),
            (None, Some(resolver)) => resolver.bounds_of(owner).map_err(SpawnError)?,
            (None, None) => None,
        };
        let Some(bounds) = &bounds else {
            return Ok((launch, None));
        };
        let Some(wrapper) = &self.wrapper else {
            return Err(SpawnError(format!(
                "policy '{}': this host has no bounds wrapper (no keeper program): the process \
                 was not started",
                bounds.policy
            )));
        };
        let cgroups = crate::bounds::limits::TaskCgroups::for_spawn(bounds, n);
        let wrapped = crate::bounds::wrap(wrapper, &launch, bounds, cgroups.as_ref())
            .map_err(|e| SpawnError(e.to_string()))?;
        Ok((wrapped, Some((bounds.clone(), cgroups))))
    }

    /// Keeps the output of processes asked to keep it ([`ProcessSpec::keep_output`]) in `dir`: their
    /// files are written from the first byte and never removed by the service.
    #[must_use]
    pub fn with_kept_output(mut self, dir: Arc<private_dir::HeldDir>) -> Self {
        self.kept_dir = Some(dir);
        self
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
