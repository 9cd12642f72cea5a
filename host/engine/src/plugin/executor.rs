//! The threads a generation's code runs on.
//!
//! Plugin code (init, tool calls, hooks, listeners, workers, and the drop of plugin-made objects) runs
//! only on threads of its generation's executor, never on the host's runtime threads. When the
//! generation is unloaded the executor is shut down and every one of its threads is joined first, so
//! thread-local destructors the plugin registered have run and glibc can really unmap the library.
//!
//! Calls use a pool that never makes a job wait for a busy thread: a job goes to an idle thread or to a
//! new one, so a blocking tool call can never starve the call it is waiting on. After a burst, idle
//! threads beyond [`CORE`] exit once idle for [`IDLE_EXIT`], so the pool shrinks back.

use parking_lot::Mutex;
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;

use taskhost_registry::HookScope;

type Job = Box<dyn FnOnce() + Send>;

static NEXT_EXECUTOR: AtomicU64 = AtomicU64::new(1);

/// Idle threads a pool keeps however long they wait.
pub(crate) const CORE: usize = 2;

/// How long an idle thread beyond the core waits for a job before it exits.
pub(crate) const IDLE_EXIT: std::time::Duration = std::time::Duration::from_secs(5);

thread_local! {
    /// The executor this thread belongs to (0 for threads of none). Host code, so it pins nothing.
    static CURRENT: Cell<u64> = const { Cell::new(0) };
}

/// One generation's threads.
pub(crate) struct Executor {
    id: u64,
    name: String,
    inner: Arc<Mutex<Pool>>,
}

struct Pool {
    open: bool,
    /// Idle threads' job channels, each with a key its thread knows it by.
    idle: Vec<(u64, Sender<Job>)>,
    next_key: u64,
    threads: Vec<JoinHandle<()>>,
}

impl Executor {
    pub(crate) fn new(name: String) -> Self {
        Self {
            id: NEXT_EXECUTOR.fetch_add(1, Ordering::Relaxed),
            name,
            inner: Arc::new(Mutex::new(Pool {
                open: true,
                idle: Vec::new(),
                next_key: 0,
                threads: Vec::new(),
            })),
        }
    }

    /// True when the calling thread is one of this executor's.
    pub(crate) fn is_current(&self) -> bool {
        CURRENT.with(Cell::get) == self.id
    }

    /// Runs `job` on one of the executor's threads, without waiting. Returns false (and drops the
    /// job) if the executor is shut down or no thread could be started.
    pub(crate) fn submit(&self, job: impl FnOnce() + Send + 'static) -> bool {
        let mut job: Job = Box::new(job);
        let mut pool = self.inner.lock();
        if !pool.open {
            return false;
        }
        // Sent while the pool is locked: an idle thread deciding whether to exit sees either its
        // channel still listed or the job already in it.
        while let Some((_, tx)) = pool.idle.pop() {
            match tx.send(job) {
                Ok(()) => return true,
                Err(returned) => job = returned.0,
            }
        }
        let (tx, rx) = channel::<Job>();
        if tx.send(job).is_err() {
            return false;
        }
        let pool_ref = Arc::downgrade(&self.inner);
        let id = self.id;
        let spawned = std::thread::Builder::new()
            .name(self.name.clone())
            .spawn(move || worker_loop(id, rx, pool_ref));
        match spawned {
            Ok(handle) => {
                pool.threads.retain(|t| !t.is_finished());
                pool.threads.push(handle);
                true
            }
            Err(e) => {
                tracing::error!(executor = %self.name, error = %e, "cannot start a plugin thread");
                false
            }
        }
    }

    /// Runs `f` on one of the executor's threads and waits for its result; runs it inline when already
    /// on one. `None` if the executor is shut down (or `f` panicked, which the SDK glue prevents).
    ///
    /// The caller's registry hook scope goes with `f`: the caller waits for it, so a producer hook
    /// run this way is still inside its task's hook, and its call-backs for that task are refused
    /// rather than left waiting on the caller.
    pub(crate) fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Option<R> {
        if self.is_current() {
            return Some(f());
        }
        let (tx, rx) = channel();
        let scope = HookScope::current();
        if !self.submit(move || {
            let _scope = scope.map(HookScope::enter);
            let _ = tx.send(f());
        }) {
            return None;
        }
        rx.recv().ok()
    }

    /// Runs `f` on one of the executor's threads; the returned receiver yields its result.
    pub(crate) fn call_async<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> Option<tokio::sync::oneshot::Receiver<R>> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(move || {
            let _ = tx.send(f());
        })
        .then_some(rx)
    }

    /// Closes the executor and returns its threads; idle ones exit at once, busy ones after their job.
    pub(crate) fn shut_down(&self) -> Vec<JoinHandle<()>> {
        let mut pool = self.inner.lock();
        pool.open = false;
        pool.idle.clear();
        std::mem::take(&mut pool.threads)
    }
}

fn worker_loop(id: u64, first: Receiver<Job>, pool: std::sync::Weak<Mutex<Pool>>) {
    CURRENT.with(|c| c.set(id));
    let Ok(mut job) = first.recv() else { return };
    loop {
        job();
        // Each idle period gets its own channel whose only sender sits in the idle list: clearing the
        // list at shutdown ends the wait.
        let (key, rx) = {
            let Some(pool) = pool.upgrade() else { return };
            let mut pool = pool.lock();
            if !pool.open {
                return;
            }
            let (tx, rx) = channel();
            pool.next_key += 1;
            let key = pool.next_key;
            pool.idle.push((key, tx));
            (key, rx)
        };
        match wait_for_job(&rx, key, &pool) {
            Some(next) => job = next,
            None => return,
        }
    }
}

/// Waits for the next job on `rx`; `None` when the thread should exit: the pool shut down, or this
/// thread was idle for [`IDLE_EXIT`] while more than [`CORE`] threads were idle.
fn wait_for_job(rx: &Receiver<Job>, key: u64, pool: &std::sync::Weak<Mutex<Pool>>) -> Option<Job> {
    use std::sync::mpsc::RecvTimeoutError;
    loop {
        match rx.recv_timeout(IDLE_EXIT) {
            Ok(job) => return Some(job),
            Err(RecvTimeoutError::Disconnected) => return None,
            Err(RecvTimeoutError::Timeout) => {
                let pool = pool.upgrade()?;
                let mut pool = pool.lock();
                if !pool.open {
                    return None;
                }
                match pool.idle.iter().position(|(k, _)| *k == key) {
                    Some(at) if pool.idle.len() > CORE => {
                        pool.idle.remove(at);
                        return None;
                    }
                    Some(_) => {}
                    // A submitter took this thread under the lock: its job is in the channel.
                    None => return rx.recv().ok(),
                }
            }
        }
    }
}
