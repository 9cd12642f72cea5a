//! The one place in front of rmcp: a message-level layer that every MCP session's messages pass,
//! whatever carries them (stdio, a socket or a bridge's socket, HTTP sessions and single requests),
//! and that serves what rmcp 3.11 does not model: the 2025-11-25 era's tasks
//! ([`LegacyTasks`], SEP-1686, in the core protocol; rmcp models only the 2026-07-28 extension).
//!
//! It has two sides, each met once per message:
//!
//! - **In** ([`Layer::takes`], [`Layer::answer`]): a client's message, as JSON, before rmcp parses
//!   it. A 2025-11-25 session's `tasks/*` requests and task-augmented `tools/call`s are answered
//!   here and never reach rmcp, whose typed parse would drop `params.task` and does not know
//!   `tasks/result` or `tasks/list`. The transports hand each message over as they frame it: the
//!   line guard of stdio and sockets (`crate::wire`, through `SessionAhead`), and the HTTP
//!   middleware that reads each request's body (`crate::http`).
//! - **Out** ([`Layer::outbound`], through [`Layered`]): each of rmcp's messages to the client, as
//!   rmcp's typed value, before it is serialized. An answer to `initialize` that negotiated
//!   2025-11-25 gains `capabilities.tasks` (and turns the session's [`Negotiated`] on); a
//!   `tools/list` answer of such a session gains each tool's `execution`. [`Layered`] wraps the
//!   rmcp transport of a stdio or socket session and of every HTTP session. A 2026-07-28 HTTP
//!   request (served on its own, on a transport rmcp makes inside its service) has nothing amended.
//!
//! Nothing else rewrites what rmcp serialized or reads its answers' contents. (The upgrade pause
//! of a bridge's session, `crate::drain`, reads the id of each answer line the line guard queues,
//! to know when every request it took is answered: its own framing, not the protocol's.)
//!
//! # Why not in rmcp
//!
//! Carrying the methods in rmcp (a `[patch.crates-io]` of the crate, or a change offered upstream)
//! was considered and not chosen: rmcp's model has no field for any of it (`Tool::execution`,
//! `ServerCapabilities::tasks`, `CallToolRequestParams::task`), its requests are parsed into those
//! types before a handler sees them, and 2025-11-25's `tasks/get` and `tasks/cancel` share their
//! method names with the 2026-07-28 extension rmcp does model, with other shapes. A patch would be
//! a fork of rmcp's model and service to carry through every release. Upstream, rmcp once had this
//! era's `execution.taskSupport` (modelcontextprotocol/rust-sdk#635) and its 3.x model follows the
//! 2026-07-28 extension instead: bringing the old era back beside it is rmcp's maintainers' call,
//! and this host's to serve in the meantime. The layer needs none of that: it uses rmcp's public
//! `Transport` trait and `CustomResult`, and when 2025-11-25 clients are gone it is removed whole.

mod legacy_tasks;
#[cfg(test)]
mod tests;

use std::borrow::Cow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use rmcp::model::{
    CustomResult, InitializeResult, JsonRpcMessage, ListToolsResult, ServerJsonRpcMessage,
    ServerResult,
};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::Value;

pub use legacy_tasks::{LEGACY_TASKS_VERSION, LegacyTasks};

use super::tasks::McpTasks;
use crate::Taskhost;

/// What one session negotiated that the layer serves: whether its `initialize` chose 2025-11-25
/// (then its task methods are answered here). Off until the layer saw that answer go out.
#[derive(Debug, Default)]
pub struct Negotiated {
    tasks_era: AtomicBool,
}

impl Negotiated {
    /// True once the session negotiated 2025-11-25.
    pub fn tasks_era(&self) -> bool {
        self.tasks_era.load(Ordering::Acquire)
    }

    /// Notes that the session negotiated 2025-11-25.
    pub fn set_tasks_era(&self) {
        self.tasks_era.store(true, Ordering::Release);
    }
}

/// The layer of one host: see the module's doc.
#[derive(Clone)]
pub struct Layer {
    legacy: LegacyTasks,
}

impl Layer {
    /// The layer serving `host`'s sessions, whose MCP tasks are `tasks`.
    pub(crate) fn new(host: Arc<Taskhost>, tasks: Arc<McpTasks>) -> Self {
        Self {
            legacy: LegacyTasks::new(host, tasks),
        }
    }

    /// True for a client's `message` that is answered here, in a session that `negotiated`.
    pub fn takes(&self, negotiated: &Negotiated, message: &Value) -> bool {
        negotiated.tasks_era() && LegacyTasks::answers(message)
    }

    /// The whole JSON-RPC answer to `message` (one [`Layer::takes`] took) of `owner`'s session.
    ///
    /// # Cancel safety
    /// Dropped half way, a task it was creating or cancelling may still be created or cancelled;
    /// nothing is answered.
    pub async fn answer(&self, owner: &str, message: &Value) -> Value {
        self.legacy.answer(owner, message).await
    }

    /// rmcp's `message` to the client of a session that `negotiated`, as the client is to read
    /// it (see the module's doc); every other message is returned as it came.
    pub fn outbound(
        &self,
        negotiated: &Negotiated,
        message: ServerJsonRpcMessage,
    ) -> ServerJsonRpcMessage {
        let JsonRpcMessage::Response(mut response) = message else {
            return message;
        };
        let amended = match &response.result {
            ServerResult::InitializeResult(r) => initialized(negotiated, r),
            ServerResult::ListToolsResult(r) if negotiated.tasks_era() => self.tools(r),
            _ => None,
        };
        if let Some(result) = amended {
            response.result = ServerResult::CustomResult(CustomResult(result));
        }
        JsonRpcMessage::Response(response)
    }

    /// A `tools/list` answer with each tool's `execution`.
    fn tools(&self, result: &ListToolsResult) -> Option<Value> {
        let mut result = serde_json::to_value(result).ok()?;
        self.legacy.with_executions(&mut result);
        Some(result)
    }

    /// `transport`, rmcp's for one session that `negotiated`, with its outgoing messages passing
    /// [`Layer::outbound`].
    pub fn wrap<T>(&self, transport: T, negotiated: Arc<Negotiated>) -> Layered<T> {
        Layered::new(transport, self.clone(), negotiated)
    }
}

/// An `initialize` answer that negotiated 2025-11-25, with `capabilities.tasks` (and
/// `negotiated` turned on); `None` for any other.
fn initialized(negotiated: &Negotiated, result: &InitializeResult) -> Option<Value> {
    let mut result = serde_json::to_value(result).ok()?;
    legacy_tasks::with_tasks_capability(&mut result).then(|| {
        negotiated.set_tasks_era();
        result
    })
}

/// The in side of the layer for one stdio or socket session (its owner's): the line guard hands
/// it each message ([`crate::wire::Ahead`]).
pub(crate) struct SessionAhead {
    pub(crate) layer: Layer,
    pub(crate) negotiated: Arc<Negotiated>,
    pub(crate) owner: String,
}

impl crate::wire::Ahead for SessionAhead {
    fn take(&self, message: &Value) -> Option<BoxFuture<'static, Value>> {
        if !self.layer.takes(&self.negotiated, message) {
            return None;
        }
        let (layer, owner, message) = (self.layer.clone(), self.owner.clone(), message.clone());
        Some(Box::pin(
            async move { layer.answer(&owner, &message).await },
        ))
    }
}

/// rmcp's transport `T` for one session: what rmcp sends passes [`Layer::outbound`] first;
/// what it receives comes as `T` gives it.
pub struct Layered<T> {
    inner: T,
    layer: Layer,
    negotiated: Arc<Negotiated>,
}

impl<T> Layered<T> {
    /// `inner`, for a session that `negotiated`.
    fn new(inner: T, layer: Layer, negotiated: Arc<Negotiated>) -> Self {
        Self {
            inner,
            layer,
            negotiated,
        }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Layered<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let item = self.layer.outbound(&self.negotiated, item);
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
