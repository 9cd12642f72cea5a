//! Waiting for a task to settle, bounded, with the waiter counted while it waits.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::error::RegistryError;
use crate::status::TaskSnapshot;

use crate::access::authorize;
use crate::registry::{Inner, Registry};

/// Longest wait honoured; longer timeouts are clamped (a wait is bounded, not infinite).
const MAX_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);

impl Registry {
    /// Waits for the task to settle, for at most `timeout_ms` milliseconds, without cancelling it.
    ///
    /// Returns the terminal snapshot (marked reported), or the live snapshot when the timeout expires.
    /// An abort rejects the wait with [`RegistryError::WaitAborted`] while the task is live; if the task
    /// already settled, the terminal snapshot wins (the settlement counted this waiter as its reporter).
    ///
    /// # Errors
    /// [`RegistryError::InvalidWaitTimeout`] for a timeout that is not a positive finite number (checked
    /// first, even for settled tasks); otherwise as [`Registry::get`], or `WaitAborted`.
    ///
    /// # Cancel safety
    /// Dropping the future un-counts the waiter at once; nothing is retained for it. If the task
    /// settled while the waiter was counted, the task stays reported.
    pub async fn wait(
        &self,
        id: &str,
        timeout_ms: f64,
        caller: Option<&Agent>,
        abort: Option<&CancellationToken>,
    ) -> Result<TaskSnapshot, RegistryError> {
        if !(timeout_ms.is_finite() && timeout_ms > 0.0) {
            return Err(RegistryError::InvalidWaitTimeout(json_number(timeout_ms)));
        }
        let mut settled = {
            let mut st = self.inner.state.lock();
            let st = &mut *st;
            authorize(st, id, caller)?;
            let Some(rec) = st.records.get_mut(id) else {
                return Err(RegistryError::UnknownTask(id.to_owned()));
            };
            if rec.status.is_terminal() {
                rec.reported = true;
                return Ok(rec.snapshot());
            }
            let settled = rec.settled.subscribe();
            st.add_waiter(id);
            settled
        };
        let mut guard = WaiterGuard {
            inner: &self.inner,
            id,
            armed: true,
        };
        // A finite timeout too large for a `Duration` is the longest wait, not a panic.
        let timeout =
            Duration::try_from_secs_f64(timeout_ms / 1000.0).map_or(MAX_WAIT, |t| t.min(MAX_WAIT));
        let aborted = async {
            match abort {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let timed_out = tokio::select! {
            biased;
            _ = settled.wait_for(Option::is_some) => false,
            _ = aborted => false,
            _ = tokio::time::sleep(timeout) => true,
        };
        guard.armed = false;
        let mut st = self.inner.state.lock();
        let st = &mut *st;
        st.remove_waiter(id);
        match st.records.get_mut(id) {
            Some(rec) if rec.status.is_live() => {
                if timed_out {
                    Ok(rec.snapshot())
                } else {
                    Err(RegistryError::WaitAborted)
                }
            }
            Some(rec) => Ok(rec.snapshot()),
            None => settled
                .borrow()
                .clone()
                .ok_or_else(|| RegistryError::UnknownTask(id.to_owned())),
        }
    }
}

/// Un-counts a waiter whose future was dropped before it finished.
struct WaiterGuard<'a> {
    inner: &'a Inner,
    id: &'a str,
    armed: bool,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        self.inner.state.lock().remove_waiter(self.id);
    }
}

/// Renders a number the way JSON (and the original's messages) would.
fn json_number(v: f64) -> String {
    if v.is_nan() || v.is_infinite() {
        "null".to_owned()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}
