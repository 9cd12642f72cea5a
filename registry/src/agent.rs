//! Agents: the owners of tasks.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::ids::{AgentId, SessionId};

static NEXT_INSTANCE: AtomicU64 = AtomicU64::new(1);

/// One live agent instance: the owner of the tasks it starts.
///
/// Identity is the *instance*, not the id: two `Agent::new` calls with the same id are two owners, each
/// with its own admission bucket and cleanup. Clones share the instance. Access to owned tasks is decided
/// by [`Agent::session`], so a replacement agent in the same session can still read and kill the tasks its
/// predecessor started.
#[derive(Clone)]
pub struct Agent(Arc<AgentInner>);

struct AgentInner {
    id: AgentId,
    session: SessionId,
    instance: u64,
    oversees: bool,
}

impl Agent {
    /// Creates a new agent instance. It cannot own tasks until [`crate::Registry::register_agent`]
    /// makes it the live instance for its id.
    pub fn new(id: impl Into<AgentId>, session: impl Into<SessionId>) -> Self {
        Self(Arc::new(AgentInner {
            id: id.into(),
            session: session.into(),
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            oversees: false,
        }))
    }

    /// A caller that sees, reads and kills every owner's tasks: a person's view that was given
    /// every owner (a token made with `--all-owners`). It owns nothing and is never registered;
    /// it only asks.
    pub fn overseer(id: impl Into<AgentId>) -> Self {
        let id = id.into();
        Self(Arc::new(AgentInner {
            session: SessionId::new(format!("overseer:{}", id.as_str())),
            id,
            instance: NEXT_INSTANCE.fetch_add(1, Ordering::Relaxed),
            oversees: true,
        }))
    }

    /// True for an [`Agent::overseer`].
    pub fn oversees(&self) -> bool {
        self.0.oversees
    }

    /// The id this agent is registered under.
    pub fn id(&self) -> &AgentId {
        &self.0.id
    }

    /// The session this agent belongs to.
    pub fn session(&self) -> &SessionId {
        &self.0.session
    }

    /// True when `other` is this very instance (not merely the same id).
    pub fn same_instance(&self, other: &Agent) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    pub(crate) fn instance(&self) -> u64 {
        self.0.instance
    }
}

impl fmt::Debug for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Agent")
            .field("id", &self.0.id)
            .field("session", &self.0.session)
            .field("instance", &self.0.instance)
            .finish()
    }
}
