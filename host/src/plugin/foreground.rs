//! Foreground processes of a generation's calls: run, report progress, and at the timeout either
//! promote the process to a background task or kill it; and the host-owned hooks of process tasks.

use std::sync::Arc;

use taskhost_abi::abi_stable::std_types::{RNone, RSome, RString};
use taskhost_abi::{ProcessRequest, ProcessResult, TaskDecl};
use taskhost_registry::{ProducerError, TaskHooks};

use super::call_scope::CallScope;
use super::host_api::GenHost;
use super::requests::{process_spec, report_progress};

/// How a foreground process's wait ended.
enum Ended {
    Exited(crate::process::Exit),
    TimedOut,
    Cancelled,
}

/// The registry hooks of a process task: the host's own, so the task never keeps a plugin loaded.
/// A process on a terminal also takes input.
pub(crate) fn process_hooks(process: Arc<crate::process::Process>) -> TaskHooks {
    let (waited, killed, read, peeked, watched) = (
        process.clone(),
        process.clone(),
        process.clone(),
        process.clone(),
        process.clone(),
    );
    let done = async move {
        let exit = waited.wait().await;
        Ok(waited.outcome(&exit))
    };
    let cancel = move |_reason: Option<&str>| {
        killed.kill();
        Ok(())
    };
    let hooks = TaskHooks::new(done, cancel)
        .with_reader(move || read.read())
        .with_peeker(move || peeked.peek())
        .with_output_watch(move || Box::new(watched.output_watch()));
    if !process.takes_input() {
        return hooks;
    }
    hooks.with_writer(move |input: &[u8], eof: bool| {
        process
            .write_input(input, eof)
            .map_err(|e| ProducerError(e.to_string()))
    })
}

impl GenHost {
    /// Adopts a running foreground process as a background task declared by `decl`: the registry's
    /// fence and admission checks run first, exactly as for a start; refused, the process is the
    /// caller's again.
    fn promote(
        &self,
        decl: &TaskDecl,
        process: Arc<crate::process::Process>,
    ) -> Result<RString, RString> {
        self.register(decl, move || Ok(process_hooks(process)))
            .into_result()
    }
}

impl GenHost {
    /// A foreground process for `session`: run until it ends, the call is cancelled, or the timeout
    /// passes (then promoted to a background task when the request allows it and the registry admits
    /// it, else killed).
    pub(crate) fn run_foreground(
        &self,
        session: &str,
        request: &ProcessRequest,
        timeout_ms: u64,
    ) -> ProcessResult {
        let refused = |error: String| ProcessResult {
            output: RString::new(),
            exit_code: RNone,
            signal: RNone,
            timed_out: false,
            error: RSome(error.into()),
            cancelled: false,
            promoted_task: RNone,
        };
        let call = CallScope::current();
        let _slot = match self.shared.sessions.begin_foreground(session) {
            Ok(slot) => slot,
            Err(e) => return refused(e.to_string()),
        };
        let spec = process_spec(request);
        let process = match self.shared.processes.spawn(&spec, session) {
            Ok(p) => p,
            Err(e) => return refused(e.to_string()),
        };
        let timeout = std::time::Duration::from_millis(timeout_ms.max(1));
        let promote = request.promote_on_timeout.as_ref().into_option();
        // Plugin code runs on generation threads, never on the runtime's, so blocking here is sound.
        let ended = self.shared.runtime.block_on(async {
            let reporting = report_progress(&process, call.progress.as_ref());
            tokio::select! {
                exit = tokio::time::timeout(timeout, process.wait()) => match exit {
                    Ok(exit) => Ended::Exited(exit),
                    Err(_) => Ended::TimedOut,
                },
                () = call.cancel.cancelled() => Ended::Cancelled,
                never = reporting => match never {},
            }
        });
        let (exit, timed_out, cancelled, promoted) = match ended {
            Ended::Exited(exit) => (exit, false, false, None),
            Ended::TimedOut => match promote.and_then(|d| self.promote(d, process.clone()).ok()) {
                // Still running: no exit to report, the rest of its output is the task's.
                Some(id) => (crate::process::Exit::Unknown, true, false, Some(id)),
                None => {
                    process.kill();
                    (
                        self.shared.runtime.block_on(process.wait()),
                        true,
                        false,
                        None,
                    )
                }
            },
            Ended::Cancelled => {
                process.kill();
                (
                    self.shared.runtime.block_on(process.wait()),
                    false,
                    true,
                    None,
                )
            }
        };
        let (exit_code, signal) = match exit {
            crate::process::Exit::Code(c) => (Some(c), None),
            crate::process::Exit::Signal(s) => {
                (None, Some(RString::from(crate::process::signal_name(s))))
            }
            crate::process::Exit::Unknown => (None, None),
        };
        ProcessResult {
            output: process.read().into(),
            exit_code: exit_code.into(),
            signal: signal.into(),
            timed_out,
            error: RNone,
            cancelled,
            promoted_task: promoted.into(),
        }
    }
}
