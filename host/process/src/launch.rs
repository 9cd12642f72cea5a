//! How the service starts one process: the launch (program, arguments, environment), its spill
//! plans, and the spawn through the keeper or, without one, by the host.

use crate::keeper::handover::takeover::HoldPlan;
use crate::keeper::{self, Launch};
use crate::service::ProcessService;
use crate::spawned::{Spawned, command, on_terminal, pipes, spawn_on_terminal};
use crate::spec::{ProcessSpec, TtySize};
use crate::stream::SpillPlan;
use crate::{env, escaped, supervise};

impl ProcessService {
    /// Where stream `which` of process `n` spills: the kept-output directory when `keep` and the
    /// service keeps output (then from the first byte, never removed by the service), else the
    /// spill directory. Either way within the host's budget (`[tasks] spill_budget`): kept output
    /// must not fill a disk any more than spills may.
    pub(crate) fn spill_plan(
        &self,
        n: u64,
        which: &str,
        cap: u64,
        keep: bool,
    ) -> Option<SpillPlan> {
        let kept = keep.then_some(self.kept_dir.as_ref()).flatten();
        let dir = kept.or(self.spill_dir.as_ref())?;
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
            kept: kept.is_some(),
        })
    }

    /// Spawns a piped child: through the keeper when the service has one (its small descriptor
    /// table makes the spawn's cost independent of the host's; while none runs the start fails),
    /// else directly. With `held`, the keeper holds it for a successor from its start (not a
    /// protocol peer's, whose stdout is not the host's): [`Spawned::held_from_start`] says so.
    pub(crate) fn spawn_with_pipes(
        &self,
        launch: &Launch,
        piped: bool,
        held: Option<&HoldPlan>,
    ) -> std::io::Result<Spawned> {
        let (child_ends, host_ends) = pipes(piped)?;
        let (outputs, talk) = host_ends.split();
        let held_fds = held.and_then(|h| h.pipe_fds(&outputs));
        let held = held
            .zip(held_fds.as_deref())
            .map(|(h, fds)| h.at_start(fds));
        let kept = self.keeper.as_ref().map(|k| {
            k.spawn(
                launch,
                keeper::KeptStreams::Pipes(child_ends.borrowed()),
                held,
            )
        });
        let (pgid, waiter, held_from_start) = match kept {
            Some(Ok(kept)) => (
                Some(kept.pid),
                supervise::Waiter::Kept(kept.exit),
                kept.held,
            ),
            Some(Err(e)) => return Err(std::io::Error::other(e.to_string())),
            None => {
                let child = child_ends.spawn(command(launch))?;
                (
                    child.id().map(|p| p as i32),
                    supervise::Waiter::Child(child),
                    false,
                )
            }
        };
        drop(held_fds);
        Ok(Spawned {
            pgid,
            waiter,
            outputs,
            talk,
            input: None,
            held_from_start,
        })
    }

    /// Spawns a child on a fresh terminal: through the keeper when the service has one, which hands
    /// the terminal's master back, else directly. With `held`, the keeper holds it for a successor
    /// from its start.
    pub(crate) fn spawn_with_terminal(
        &self,
        launch: &Launch,
        size: TtySize,
        held: Option<&HoldPlan>,
    ) -> std::io::Result<Spawned> {
        let held_fds = held.map(HoldPlan::terminal_fds);
        let held = held
            .zip(held_fds.as_deref())
            .map(|(h, fds)| h.at_start(fds));
        match self
            .keeper
            .as_ref()
            .map(|k| k.spawn(launch, keeper::KeptStreams::Terminal(size), held))
        {
            Some(Ok(keeper::KeptProcess {
                pid,
                exit,
                master: Some(master),
                held,
            })) => on_terminal(Some(pid), supervise::Waiter::Kept(exit), master).map(|mut s| {
                s.held_from_start = held;
                s
            }),
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
    pub(crate) fn launch(&self, spec: &ProcessSpec, n: u64) -> Launch {
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
        Launch {
            program: env::resolve_program(program, search_path),
            args: args.into_iter().map(Into::into).collect(),
            env,
            cwd: spec.workdir.clone(),
        }
    }
}
