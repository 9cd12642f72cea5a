//! The host handle as a plugin uses it: the registry's calls (get, list, read, peek, write, kill,
//! wait), completion listeners, notices, logs and workers.

use std::sync::Arc;

use abi_stable::sabi_trait::TD_Opaque;
use abi_stable::std_types::{RResult, RStr};

use super::glue::{ListenerGlue, WorkerGlue};
use crate::ffi::*;

/// A host answer with its typed refusal.
pub(crate) fn host_result<T>(r: RResult<T, HostError>) -> Result<T, HostError> {
    r.into_result()
}

/// The host handle, as a plugin uses it. Cheap to clone.
#[derive(Clone)]
pub struct Host(pub(crate) Arc<HostBox>);

impl Host {
    /// Attaches a control surface; returns its key.
    pub fn attach_surface(&self, name: &str) -> u64 {
        self.0.attach_surface(name.into())
    }

    /// Detaches a surface.
    pub fn detach_surface(&self, key: u64) {
        self.0.detach_surface(key);
    }

    /// A snapshot of a task, authorized for `caller`'s session.
    ///
    /// # Errors
    /// The registry's error text (`unknown task ...`, for another session's task too).
    pub fn get_task(&self, caller: &str, id: &str) -> Result<FfiSnapshot, HostError> {
        host_result(self.0.get_task(caller.into(), id.into()))
    }

    /// The caller's and the unowned tasks.
    pub fn list_tasks(&self, caller: &str) -> Vec<FfiSnapshot> {
        self.0.list_tasks(caller.into()).into_vec()
    }

    /// Reads a task.
    ///
    /// # Errors
    /// As [`Host::get_task`]; refused when called (directly, or from a thread it waits on) by the
    /// task's own cancel or reader.
    pub fn read_task(&self, caller: &str, id: &str) -> Result<FfiRead, HostError> {
        host_result(self.0.read_task(caller.into(), id.into()))
    }

    /// A stream task's unread output, left unread (nothing is marked reported).
    ///
    /// # Errors
    /// As [`Host::read_task`]; also for a final-output task (it has no stream).
    pub fn peek_task(&self, caller: &str, id: &str) -> Result<FfiRead, HostError> {
        host_result(self.0.peek_task(caller.into(), id.into()))
    }

    /// Writes `input` to a live task that takes input, then, with `eof`, ends its input.
    ///
    /// # Errors
    /// As [`Host::get_task`]; a task that takes no input, a finished task, more than 64 KiB, or the
    /// producer's own error (the program stopped reading).
    pub fn write_task(
        &self,
        caller: &str,
        id: &str,
        input: &str,
        eof: bool,
    ) -> Result<(), HostError> {
        host_result(
            self.0
                .write_task(caller.into(), id.into(), input.into(), eof),
        )
    }

    /// Requests cancellation of a task.
    ///
    /// # Errors
    /// As [`Host::get_task`], or the producer's cancel error; refused when called by the task's own
    /// cancel or reader, as [`Host::read_task`] is.
    pub fn kill_task(
        &self,
        caller: &str,
        id: &str,
        reason: Option<&str>,
    ) -> Result<FfiKill, HostError> {
        let reason = reason.map(RStr::from).into();
        host_result(self.0.kill_task(caller.into(), id.into(), reason))
    }

    /// Blocks until the task settles or the timeout passes.
    ///
    /// # Errors
    /// As [`Host::get_task`], or `invalid wait timeout: ...`.
    pub fn wait_task(
        &self,
        caller: &str,
        id: &str,
        timeout_ms: f64,
    ) -> Result<FfiSnapshot, HostError> {
        host_result(self.0.wait_task(caller.into(), id.into(), timeout_ms))
    }

    /// Blocks until a stream task's output matches the regular expression `pattern`, the task
    /// settles, or `timeout_ms` passes; nothing is consumed (a read afterwards returns it all). The
    /// host matches only what arrived since its previous look and wakes when more arrives.
    ///
    /// # Errors
    /// As [`Host::wait_task`]; a pattern that is not a regular expression; a final-output task; too
    /// many waits of the caller's at once.
    pub fn wait_output(
        &self,
        caller: &str,
        id: &str,
        pattern: &str,
        timeout_ms: f64,
    ) -> Result<FfiSnapshot, HostError> {
        host_result(
            self.0
                .wait_output(caller.into(), id.into(), pattern.into(), timeout_ms),
        )
    }

    /// Registers a completion listener; returns its key.
    pub fn on_task_done(&self, listener: impl Fn(FfiSnapshot) + Send + Sync + 'static) -> u64 {
        self.0
            .on_task_done(Listener_TO::from_value(ListenerGlue(listener), TD_Opaque))
    }

    /// Removes a listener.
    pub fn remove_listener(&self, key: u64) {
        self.0.remove_listener(key);
    }

    /// Sends a notice to a session, about `task` when given (the host may then drop it if the task
    /// gets read, waited on or killed before the notice is shown).
    pub fn notify(&self, session: &str, task: Option<&str>, text: &str) {
        self.0
            .notify(session.into(), task.unwrap_or_default().into(), text.into());
    }

    /// Logs a record at `level` .
    pub fn log(&self, level: Level, message: &str) {
        self.0.log(level, "plugin".into(), message.into());
    }

    /// Runs `work` on a thread of this plugin's generation (the generation stays loaded until it
    /// returns). A panic in `work` is logged.
    pub fn spawn_worker(&self, work: impl FnOnce() + Send + 'static) {
        let host = self.clone();
        self.0.spawn_worker(Worker_TO::from_value(
            WorkerGlue(Some(work), host.0),
            TD_Opaque,
        ));
    }
}
