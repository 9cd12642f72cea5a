//! A call's foreground process: run until it ends, the call is cancelled, or the timeout passes; then
//! promoted to a background task when the caller allows it and the registry admits it, else killed.
//!
//! Promotion goes through `Services::adopt_process`, that is `Registry::start` (the fence and the owner's
//! admission first, as for any start), with the same host-owned hooks a process task has; refused, the
//! process is killed as without it.

use std::time::Duration;

use super::call::{CallContext, report_progress};
use super::declare::TaskDeclaration;
use super::handles::Services;
use crate::process::{Exit, ProcessSpec};

/// How a foreground process ended, with its output.
#[derive(Debug)]
pub struct Foreground {
    /// Its output, merged, as the model reads it.
    pub output: String,
    /// Its exit; [`Exit::Unknown`] when it was promoted and still runs.
    pub exit: Exit,
    /// The timeout passed.
    pub timed_out: bool,
    /// The call was cancelled and the process ended for it.
    pub cancelled: bool,
    /// The background task it became at the timeout or at an upgrade, if it was promoted.
    pub promoted_task: Option<String>,
    /// The host began an upgrade while it ran (see [`Services::restarting`]).
    pub restarted: bool,
}

/// How a foreground process's wait ended.
enum Ended {
    Exited(Exit),
    TimedOut,
    Cancelled,
    Restarting,
}

impl Services {
    /// Runs `spec` for `session` in the foreground of `call`. At `timeout` the process becomes the
    /// background task `promote` declares (if given and admitted) or is killed. Must not be called on
    /// the runtime's threads (it blocks on the runtime).
    ///
    /// # Errors
    /// The session already runs its limit of foreground calls, or the process could not start.
    pub fn run_foreground(
        &self,
        session: &str,
        spec: &ProcessSpec,
        timeout: Duration,
        promote: Option<&TaskDeclaration>,
        call: &CallContext,
    ) -> Result<Foreground, String> {
        let _slot = self
            .sessions
            .begin_foreground(session)
            .map_err(|e| e.to_string())?;
        // A host that hands over keeps the output from the first byte, so a call promoted at an
        // upgrade is carried like any task; until then the files are the session's.
        let carried = self.state.is_some() && self.processes.hands_over();
        let spec = &ProcessSpec {
            keep_output: spec.keep_output || carried,
            kept_for_session: carried,
            ..spec.clone()
        };
        // Carried past a crash of this host too, as a task of the caller's, where it may become one.
        let carry = promote.filter(|_| carried);
        // The command's start, which a task it becomes shows as its own.
        let began_at_ms = epoch_ms();
        let (process, carried_id) =
            self.spawn_carried(spec, session, carry, call.request_id.as_ref())?;
        let ended = self.runtime.block_on(async {
            let reporting = report_progress(&process, call.progress.as_ref());
            tokio::select! {
                exit = tokio::time::timeout(timeout, process.wait()) => match exit {
                    Ok(exit) => Ended::Exited(exit),
                    Err(_) => Ended::TimedOut,
                },
                () = call.cancel.cancelled() => Ended::Cancelled,
                () = self.restarting.cancelled() => Ended::Restarting,
                never = reporting => match never {},
            }
        });
        let end = |process: &std::sync::Arc<crate::process::Process>| {
            process.kill();
            self.runtime.block_on(process.wait())
        };
        let promoted = |process: &std::sync::Arc<crate::process::Process>| {
            let id =
                promote.and_then(|d| self.adopt_process(d, process.clone(), began_at_ms).ok())?;
            if carried {
                self.processes.kept_as_task(session, process);
                self.keep_for_successor(process, &id);
            }
            Some(id)
        };
        let restarted = matches!(ended, Ended::Restarting);
        let (timed_out, cancelled) = (
            matches!(ended, Ended::TimedOut),
            matches!(ended, Ended::Cancelled),
        );
        let (exit, promoted_task) = match ended {
            Ended::Exited(exit) => (exit, None),
            // Still running: no exit to report, the rest of its output is the task's.
            Ended::TimedOut | Ended::Restarting => match promoted(&process) {
                Some(id) => (Exit::Unknown, Some(id)),
                None => (end(&process), None),
            },
            Ended::Cancelled => (end(&process), None),
        };
        // After a promotion's rename: the keeper never holds it under a name nothing records.
        if let Some(id) = carried_id {
            self.foreground_settled(id);
        }
        Ok(Foreground {
            output: with_bound(process.read(), process.ended_by_bound()),
            exit,
            timed_out,
            cancelled,
            promoted_task,
            restarted,
        })
    }
}

/// A foreground command's output, and the bound that ended it when one did (the answer's exit line
/// shows only the signal).
fn with_bound(output: String, bound: Option<String>) -> String {
    match bound {
        Some(bound) => format!("{output}\n[killed: {bound}]"),
        None => output,
    }
}

/// Now, in milliseconds since the epoch (0 for a clock before it).
fn epoch_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
