//! Giving memory back once a burst is over.
//!
//! Measured (a socket host, 400 concurrent foreground calls, then 7 GiB of `yes` read by polling, then
//! a 200 MB line under a terminal): RSS went from 13 MB to 27 MB and stayed there idle. What held it:
//! glibc's per-thread arenas. A burst of calls runs on a burst of plugin executor threads (24 extra
//! here), each thread's allocations come from an arena of its own, and freed memory in an arena
//! that is not at its top is kept for reuse, never returned, after the threads exit. (The other
//! holder, each busy stream's in-memory tail kept at its peak capacity of a whole read, is fixed
//! where it grows: a tail never takes more than its size.) `malloc_trim(0)` returns the free pages of
//! every arena; the host calls it every [`TRIM_EVERY`] on a blocking thread, where it costs well
//! under a millisecond for a heap this size.

use std::time::Duration;

/// How often free memory is handed back.
pub const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Hands every arena's free pages back to the system, every [`TRIM_EVERY`], for as long as the
/// runtime runs.
pub fn trim_periodically(runtime: &tokio::runtime::Handle) {
    runtime.spawn(async {
        let mut every = tokio::time::interval(TRIM_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            let _ = tokio::task::spawn_blocking(trim).await;
        }
    });
}

/// Returns free heap pages to the system.
#[cfg(target_env = "gnu")]
pub fn trim() {
    // SAFETY: malloc_trim takes no pointer and touches only the allocator's own free lists, under
    // the allocator's locks; glibc documents it as safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Returns free heap pages to the system (nothing to do outside glibc).
#[cfg(not(target_env = "gnu"))]
pub fn trim() {}
