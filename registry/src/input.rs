//! Interacting with a running task as its owner: writing its input, and looking at its unread output
//! without consuming it (what a wait for a pattern matches).

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::agent::Agent;
use crate::error::ProducerError;
use crate::error::{MAX_INPUT_BYTES, RegistryError};
use crate::hook_scope;
use crate::registry::Registry;
use crate::status::TaskRead;
use taskhost_common::panic_text;

impl Registry {
    /// Delivers `input` to a live task as typed, then, with `eof`, the end of its input.
    ///
    /// The checks run in this order, and a refused write delivers nothing: the caller is authorized,
    /// the task is live, its producer takes input, `input` is at most [`MAX_INPUT_BYTES`]. Neither the
    /// read cursor nor the notice state changes.
    ///
    /// # Errors
    /// As [`Registry::get`]; [`RegistryError::InputAfterEnd`] for a settled task;
    /// [`RegistryError::NoInput`] when its producer takes none; [`RegistryError::InputTooLarge`];
    /// [`RegistryError::OwnHook`] from inside the task's own hooks; [`RegistryError::Producer`] with
    /// the producer's error (the program stopped reading, say) or its panic.
    pub fn write(
        &self,
        id: &str,
        caller: Option<&Agent>,
        input: &[u8],
        eof: bool,
    ) -> Result<(), RegistryError> {
        let (task, ops) = self.authorized_ops(id, caller)?;
        let mut ops = ops.lock();
        let Some(hooks) = ops.hooks.as_mut() else {
            return Err(RegistryError::InputAfterEnd(task));
        };
        let Some(writer) = hooks.writer.as_mut() else {
            return Err(RegistryError::NoInput(task));
        };
        if input.len() > MAX_INPUT_BYTES {
            return Err(RegistryError::InputTooLarge(input.len()));
        }
        let written = hook_scope::run_hook(&task, || {
            catch_unwind(AssertUnwindSafe(|| writer(input, eof)))
        });
        match written {
            Ok(r) => r.map_err(RegistryError::from),
            Err(p) => {
                Err(ProducerError(format!("input writer panicked: {}", panic_text(&*p))).into())
            }
        }
    }

    /// The output a read of this stream task would return now, left unread, with the task's
    /// snapshot. Unlike [`Registry::read`] it marks nothing reported.
    ///
    /// # Errors
    /// As [`Registry::get`]; [`RegistryError::NotStream`] for a final-output task;
    /// [`RegistryError::NotWatchable`] for a live stream task whose producer has no peeker;
    /// [`RegistryError::OwnHook`]; [`RegistryError::Producer`] if the peeker panicked.
    pub fn peek(&self, id: &str, caller: Option<&Agent>) -> Result<TaskRead, RegistryError> {
        let (task, ops) = self.authorized_ops(id, caller)?;
        let mut ops = ops.lock();
        let ops = &mut *ops;
        let stream = {
            let st = self.inner.state.lock();
            st.records.get(id).is_some_and(|r| r.stream)
        };
        if !stream {
            return Err(RegistryError::NotStream(task));
        }
        let text = match ops.hooks.as_mut() {
            None => ops.remainder.clone(),
            Some(hooks) => {
                let Some(peeker) = hooks.peeker.as_mut() else {
                    return Err(RegistryError::NotWatchable(task));
                };
                hook_scope::run_hook(&task, || catch_unwind(AssertUnwindSafe(peeker))).map_err(
                    |p| ProducerError(format!("output peeker panicked: {}", panic_text(&*p))),
                )?
            }
        };
        let st = self.inner.state.lock();
        let rec = st
            .records
            .get(id)
            .ok_or_else(|| RegistryError::UnknownTask(id.to_owned()))?;
        Ok(TaskRead {
            text,
            snapshot: rec.snapshot(),
        })
    }
}
