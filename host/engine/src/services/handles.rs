//! The bundle of service handles: cheap to clone, shared by every generation's host handle.

use std::sync::Arc;

use taskhost_registry::Registry;
use tokio::runtime::Handle;

use crate::process::ProcessService;
use crate::sessions::Sessions;

/// The host's services as one value: the registry, the process service, the sessions and the
/// runtime that drives them. Plugins reach them only through their host handles.
#[derive(Clone)]
pub struct Services {
    /// The task registry.
    pub registry: Registry,
    /// Every child process of every producer.
    pub processes: Arc<ProcessService>,
    /// The sessions: owners, notices, foreground slots.
    pub sessions: Arc<Sessions>,
    /// The runtime the services' futures run on.
    pub runtime: Handle,
    /// The durable state, if the host keeps one.
    pub state: Option<Arc<taskhost_store::Store>>,
    /// Fired when the host begins an upgrade (`SIGHUP`): every foreground process in flight is
    /// promoted to a background task of its caller's where the call allows it (else ended), so
    /// the call answers at once and the task goes on under the new image.
    pub restarting: taskhost_registry::CancellationToken,
    /// The calls a crashed predecessor's foreground commands came from, made tasks here.
    pub(crate) continued: super::handover::continued::ContinuedCalls,
    /// The configured policies (the process service resolves every start's bounds through them).
    pub policies: Option<Arc<crate::policy::Policies>>,
    /// The queue of process tasks: the slots the limits allow, and the tasks waiting for one.
    pub queue: super::queue::Queue,
    /// Where each running process task runs, and who asked to kill a task.
    pub facts: super::task_facts::TaskFacts,
}
