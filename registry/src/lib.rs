//! The taskhost task registry: one concrete, in-process service that gives every long-running tool the
//! same task ids, owner isolation and lifecycle.
//!
//! A producer (bash, a subagent) hands [`Registry::start`] a [`TaskStart`]: identity (kind, label,
//! optional owner) and a starter that returns the work's [`TaskHooks`] (cancel, a completion that
//! settles at quiescence, an optional incremental reader). Every check that can fail runs before the
//! starter, and nothing can fail after it returns, so work started without a collectable id cannot
//! exist. Control surfaces read, kill and wait through the registry, authorized by the owner's session;
//! they learn of settlements through [`Registry::on_task_done`].
//!
//! Architecture invariant: this crate knows nothing of FFI, plugins or processes. It is plain Rust on
//! tokio, and is tested alone.
//!
//! Registrations are not tied to whoever called `start`: a task belongs to its owner and its producer's
//! hooks, so reloading the code that started it (or the surface that reads it) never touches it.

#![forbid(unsafe_code)]

mod access;
mod agent;
mod config;
mod error;
mod hook_scope;
mod ids;
mod input;
mod journal;
mod listeners;
mod output_wait;
mod producer;
mod queued;
mod registry;
mod restore;
mod start;
mod state;
mod status;
mod surface;
mod teardown;
mod wait;

#[cfg(test)]
mod tests;

pub use agent::Agent;
pub use config::RegistryConfig;
pub use error::{
    ConfigError, MAX_INPUT_BYTES, MAX_SAFE_INTEGER, ProducerError, RegistryError, excerpt,
};
pub use hook_scope::{HookScope, ScopeGuard};
pub use ids::{AgentId, SessionId, TaskId};
pub use journal::{Journal, JournalStart};
pub use listeners::{Registration, TaskDoneListener, TasksChangedListener};
pub use output_wait::{MAX_OUTPUT_WAITS, PEEK_EVERY};
pub use producer::{DoneFuture, OutputWatch, TaskHooks, TaskStart};
pub use registry::{KillOutcome, Registry, RegistryStats};
pub use restore::RestoredTask;
pub use status::{TaskOutcome, TaskRead, TaskSnapshot, TaskStatus, TerminalStatus};
pub use surface::SurfaceScope;
pub use teardown::{OWNER_DISPOSED, SERVICE_DISPOSED};
pub use tokio_util::sync::CancellationToken;
