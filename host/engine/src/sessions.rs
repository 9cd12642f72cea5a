//! Sessions: each MCP session is one agent, the owner of the tasks it starts.
//!
//! Every tool call carries a cancellation token, a child of its session's: a foreground command or
//! subagent the call starts ends when the call is cancelled (the client's `notifications/cancelled`, its
//! disconnect, or the session's close). Each session may run `[tasks] max_foreground_per_owner` (16)
//! foreground calls at once; past that a call is refused. A session's end disposes its agent: its tasks
//! are cancelled and awaited, their processes ended, their spill files removed.

use parking_lot::{Mutex, MutexGuard};
use std::collections::HashMap;
use std::sync::Arc;

use taskhost_registry::{Agent, CancellationToken, Registry};

/// A notice for a session, about a task when it names one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// The task the notice is about, if any.
    pub task: Option<String>,
    /// What the session is told.
    pub text: String,
}

/// Where a session's notices go (the MCP layer installs one per connection).
pub type NoticeSink = Arc<dyn Fn(&Notice) + Send + Sync>;

struct Entry {
    agent: Agent,
    pending: Vec<Notice>,
    sink: Option<NoticeSink>,
    /// Cancelled when the session closes: every call of the session holds a child of it.
    calls: CancellationToken,
    /// Foreground commands running now.
    foreground: Arc<std::sync::atomic::AtomicUsize>,
}

/// The open sessions.
pub struct Sessions {
    registry: Registry,
    inner: Mutex<HashMap<String, Entry>>,
    max_foreground: usize,
    /// Where a notice handed to a session's sink is recorded as told.
    state: Option<Arc<taskhost_store::Store>>,
    /// The name each session's client gave in its `initialize` (`clientInfo.name`), kept after the
    /// session closes (its settled tasks are still listed) for this host's life.
    clients: Mutex<HashMap<String, String>>,
}

/// Why a foreground command was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ForegroundError {
    /// The session runs as many foreground commands as it may.
    #[error(
        "too many foreground commands running in this session (limit {0}); wait for one to finish, or run this one with run_in_background"
    )]
    Limit(usize),
}

/// A running foreground command's place in its session's count; given back when dropped.
pub struct ForegroundSlot(Option<Arc<std::sync::atomic::AtomicUsize>>);

impl Drop for ForegroundSlot {
    fn drop(&mut self) {
        if let Some(count) = &self.0 {
            count.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
        }
    }
}

/// The default of `[tasks] max_foreground_per_owner`.
pub const DEFAULT_MAX_FOREGROUND: usize = 16;

impl Sessions {
    pub(crate) fn new(
        registry: Registry,
        max_foreground: usize,
        state: Option<Arc<taskhost_store::Store>>,
    ) -> Self {
        Self {
            registry,
            inner: Mutex::new(HashMap::new()),
            max_foreground: max_foreground.max(1),
            state,
            clients: Mutex::default(),
        }
    }

    /// True while session `id` is open (connected, or away within its grace).
    pub fn is_open(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }

    /// Session `id`'s connection is gone but its owner may come back: its calls are cancelled and
    /// its notices are kept (not sent to the gone connection) until [`Sessions::set_sink`] installs
    /// the next one's.
    pub fn detach(&self, id: &str) {
        if let Some(e) = self.lock().get_mut(id) {
            e.sink = None;
            std::mem::take(&mut e.calls).cancel();
        }
    }

    /// Records that the notice about `task` reached a connection.
    fn told(&self, task: Option<&str>) {
        if let (Some(state), Some(task)) = (&self.state, task) {
            state.told(task);
        }
    }

    /// A token for one call of session `id`: cancelled when the session closes (a fresh, free token
    /// for an unknown or empty session).
    pub fn call_token(&self, id: &str) -> CancellationToken {
        self.lock()
            .get(id)
            .map_or_else(CancellationToken::new, |e| e.calls.child_token())
    }

    /// Cancels every call session `id` runs now (its client is gone); later calls get a fresh token.
    pub fn cancel_calls(&self, id: &str) {
        if let Some(e) = self.lock().get_mut(id) {
            std::mem::take(&mut e.calls).cancel();
        }
    }

    /// Takes one of session `id`'s foreground slots for a command that runs until the slot is
    /// dropped. A call outside any open session is not counted.
    ///
    /// # Errors
    /// [`ForegroundError::Limit`] when the session already runs `max_foreground_per_owner` of them.
    pub fn begin_foreground(&self, id: &str) -> Result<ForegroundSlot, ForegroundError> {
        use std::sync::atomic::Ordering;
        let Some(count) = self.lock().get(id).map(|e| e.foreground.clone()) else {
            return Ok(ForegroundSlot(None));
        };
        let taken = count.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < self.max_foreground).then_some(n + 1)
        });
        match taken {
            Ok(_) => Ok(ForegroundSlot(Some(count))),
            Err(_) => Err(ForegroundError::Limit(self.max_foreground)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.inner.lock()
    }

    /// Opens a session: a new agent, registered as the live owner for `id`. Reopening an open id
    /// replaces its agent (the old one's tasks stay until it is closed).
    pub fn open(&self, id: &str) -> Agent {
        let agent = Agent::new(id, id);
        self.registry.register_agent(&agent);
        self.lock().insert(
            id.to_owned(),
            Entry {
                agent: agent.clone(),
                pending: Vec::new(),
                sink: None,
                calls: CancellationToken::new(),
                foreground: Arc::default(),
            },
        );
        agent
    }

    /// Closes a session: its calls are cancelled (foreground commands end as a kill ends them) and
    /// its agent is disposed (its tasks cancelled and awaited, its records dropped).
    ///
    /// # Cancel safety
    /// As [`Registry::dispose_agent`].
    pub async fn close(&self, id: &str) {
        let entry = self.lock().remove(id);
        if let Some(e) = entry {
            e.calls.cancel();
            self.registry.dispose_agent(&e.agent).await;
        }
    }

    /// Records the name session `id`'s client gave (`clientInfo.name`), for people's views.
    pub fn name_client(&self, id: &str, name: &str) {
        self.clients.lock().insert(id.to_owned(), name.to_owned());
    }

    /// The name session `id`'s client gave, if it gave one on this host.
    pub fn client_name(&self, id: &str) -> Option<String> {
        self.clients.lock().get(id).cloned()
    }

    /// The session's agent, if the session is open.
    pub fn agent(&self, id: &str) -> Option<Agent> {
        self.lock().get(id).map(|e| e.agent.clone())
    }

    /// Installs where the session's notices go; notices sent before are delivered to it at once.
    pub fn set_sink(&self, id: &str, sink: NoticeSink) {
        let pending = {
            let mut g = self.lock();
            let Some(e) = g.get_mut(id) else { return };
            e.sink = Some(sink.clone());
            std::mem::take(&mut e.pending)
        };
        for n in pending {
            sink(&n);
            self.told(n.task.as_deref());
        }
    }

    /// Sends a notice to one session: to its sink, or kept until one is installed or
    /// [`Sessions::take_notices`] collects it. A notice to a closed session is dropped.
    pub fn notify(&self, id: &str, task: Option<&str>, text: &str) {
        let notice = Notice {
            task: task.map(str::to_owned),
            text: text.to_owned(),
        };
        let sink = {
            let mut g = self.lock();
            let Some(e) = g.get_mut(id) else { return };
            match &e.sink {
                Some(s) => s.clone(),
                None => {
                    e.pending.push(notice);
                    return;
                }
            }
        };
        sink(&notice);
        self.told(notice.task.as_deref());
    }

    /// Takes the texts of the notices kept for a session without a sink.
    pub fn take_notices(&self, id: &str) -> Vec<String> {
        self.lock()
            .get_mut(id)
            .map(|e| std::mem::take(&mut e.pending))
            .unwrap_or_default()
            .into_iter()
            .map(|n| n.text)
            .collect()
    }

    /// True when `task`, owned by session `id`, was reported (read, waited on, killed) since its
    /// notice was sent: a notice shown later would repeat what the session already saw. False for a
    /// closed session or a task it does not own.
    pub fn already_reported(&self, id: &str, task: &str) -> bool {
        self.agent(id).is_some_and(|agent| {
            self.registry
                .get(task, Some(&agent))
                .is_ok_and(|s| s.reported)
        })
    }
}
