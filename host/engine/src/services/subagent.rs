//! ACP agents as background tasks or as a call's foreground run (the protocol is in [`super::acp`]).

use taskhost_registry::{CancellationToken, ProducerError, TaskHooks, TaskOutcome};

use super::acp::{self, SubagentRun};
use super::call::CallContext;
use super::declare::TaskDeclaration;
use super::handles::Services;

impl Services {
    /// Starts the agent `run` describes as the background task `decl` declares; a kill cancels its
    /// turn and ends the agent.
    ///
    /// # Errors
    /// As [`Services::declare`].
    pub fn start_subagent(
        &self,
        decl: &TaskDeclaration,
        run: SubagentRun,
    ) -> Result<String, super::DeclareError> {
        let session = decl.session_key();
        let (processes, runtime) = (self.processes.clone(), self.runtime.clone());
        self.declare(decl, move || {
            let cancel = CancellationToken::new();
            let token = cancel.clone();
            let driver = runtime
                .spawn(async move { acp::run(&processes, &session, run, token, None).await });
            let done = async move {
                driver
                    .await
                    .map_err(|e| ProducerError(format!("subagent driver failed: {e}")))
            };
            let cancel = move |_reason: Option<&str>| {
                cancel.cancel();
                Ok(())
            };
            Ok(TaskHooks::new(done, cancel))
        })
    }

    /// Runs the agent `run` describes for `session` in the foreground of `call`, to its answer. Must
    /// not be called on the runtime's threads (it blocks on the runtime).
    pub fn run_subagent(&self, session: &str, run: SubagentRun, call: CallContext) -> TaskOutcome {
        let _slot = match self.sessions.begin_foreground(session) {
            Ok(slot) => slot,
            Err(e) => return TaskOutcome::failed(e.to_string()),
        };
        let processes = self.processes.clone();
        let session = session.to_owned();
        self.runtime.block_on(async move {
            acp::run(&processes, &session, run, call.cancel, call.progress).await
        })
    }
}
