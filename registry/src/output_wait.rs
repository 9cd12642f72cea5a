//! Waiting until a stream task's output matches: each look costs what arrived since the last one.
//!
//! A producer that can show its output as it grows gives its hooks an [`OutputWatch`] factory
//! ([`TaskHooks::with_output_watch`](crate::TaskHooks::with_output_watch)); a wait then matches
//! only the new output (each stream's unfinished last line carried into the next look, so a line
//! that arrives in pieces still matches whole) and sleeps until the watch says more arrived, the
//! task settles, the wait times out or is aborted. A producer without one is looked at through its
//! peeker every [`PEEK_EVERY`], the whole unread output each time. Each owner has at most
//! [`MAX_OUTPUT_WAITS`] such waits at once.

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::error::RegistryError;
use crate::registry::Registry;
use crate::state::owner_key;
use crate::status::TaskSnapshot;

/// How often a task without an output watch is peeked at.
pub const PEEK_EVERY: Duration = Duration::from_millis(25);

/// The waits on output one owner may have at once (the unowned share one allowance).
pub const MAX_OUTPUT_WAITS: usize = 16;

impl Registry {
    /// Waits until `matches` accepts some of a stream task's new output, the task settles,
    /// `timeout_ms` passes or `abort` fires. Nothing is consumed: a read afterwards returns all of
    /// it. Returns the task's snapshot at the end.
    ///
    /// # Errors
    /// As [`Registry::wait`] and [`Registry::peek`]; [`RegistryError::TooManyOutputWaits`] when the
    /// caller already has [`MAX_OUTPUT_WAITS`] of them.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future releases its place among the caller's waits.
    pub async fn wait_for_output(
        &self,
        id: &str,
        timeout_ms: f64,
        caller: Option<&Agent>,
        abort: Option<&CancellationToken>,
        mut matches: impl FnMut(&str) -> bool + Send,
    ) -> Result<TaskSnapshot, RegistryError> {
        if !(timeout_ms.is_finite() && timeout_ms > 0.0) {
            // The plain wait says why, in its words.
            return self.wait(id, timeout_ms, caller, abort).await;
        }
        let (task, ops) = self.authorized_ops(id, caller)?;
        let factory = {
            let ops = ops.lock();
            let stream = self
                .inner
                .state
                .lock()
                .records
                .get(id)
                .is_some_and(|r| r.stream);
            if !stream {
                return Err(RegistryError::NotStream(task));
            }
            match ops.hooks.as_ref() {
                // Settled: the wait is over.
                None => return self.get(id, caller),
                Some(h) if h.watch.is_none() && h.peeker.is_none() => {
                    return Err(RegistryError::NotWatchable(task));
                }
                Some(h) => h.watch.clone(),
            }
        };
        let _place = self.take_output_wait(caller)?;
        let deadline =
            Instant::now() + Duration::from_secs_f64(timeout_ms / 1000.0).min(Duration::MAX / 2);
        let Some(factory) = factory else {
            return self.peek_until(id, deadline, caller, abort, matches).await;
        };
        let mut watch = factory();
        loop {
            if watch.fresh().iter().any(|text| matches(text)) {
                return self.get(id, caller);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return self.get(id, caller);
            }
            tokio::select! {
                biased;
                ended = self.wait(id, left.as_secs_f64() * 1000.0, caller, abort) => return ended,
                () = watch.changed() => {}
            }
        }
    }

    /// The wait for a producer without a watch: its whole unread output, every [`PEEK_EVERY`].
    async fn peek_until(
        &self,
        id: &str,
        deadline: Instant,
        caller: Option<&Agent>,
        abort: Option<&CancellationToken>,
        mut matches: impl FnMut(&str) -> bool,
    ) -> Result<TaskSnapshot, RegistryError> {
        loop {
            let unread = self.peek(id, caller)?;
            if unread.snapshot.status.is_terminal() || matches(&unread.text) {
                return Ok(unread.snapshot);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(unread.snapshot);
            }
            let snapshot = self
                .wait(
                    id,
                    left.min(PEEK_EVERY).as_secs_f64() * 1000.0,
                    caller,
                    abort,
                )
                .await?;
            if snapshot.status.is_terminal() {
                return Ok(snapshot);
            }
        }
    }

    /// Takes one of the caller's places for an output wait, given back when the guard drops.
    fn take_output_wait(
        &self,
        caller: Option<&Agent>,
    ) -> Result<OutputWaitPlace<'_>, RegistryError> {
        let key = owner_key(caller);
        let mut st = self.inner.state.lock();
        let count = st.output_waits.entry(key).or_default();
        if *count >= MAX_OUTPUT_WAITS {
            return Err(RegistryError::TooManyOutputWaits(MAX_OUTPUT_WAITS));
        }
        *count += 1;
        Ok(OutputWaitPlace {
            registry: self,
            key,
        })
    }
}

/// One place among an owner's output waits.
struct OutputWaitPlace<'a> {
    registry: &'a Registry,
    key: crate::state::OwnerKey,
}

impl Drop for OutputWaitPlace<'_> {
    fn drop(&mut self) {
        let mut st = self.registry.inner.state.lock();
        if let Some(count) = st.output_waits.get_mut(&self.key) {
            *count -= 1;
            if *count == 0 {
                st.output_waits.remove(&self.key);
            }
        }
    }
}
