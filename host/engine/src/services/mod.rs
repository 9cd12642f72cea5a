//! The host's services: what a task runs on, independent of plugins and of the ABI. Each file is one
//! service, reached through [`Services`], the bundle of handles every plugin's host handle holds:
//!
//! - [`declare`]: registering a task a producer declared (its owner looked up, its limits set);
//! - [`process_tasks`]: background processes as registry tasks;
//! - [`foreground`]: a call's foreground process, promoted or killed at its timeout;
//! - [`external`]: work that runs elsewhere (a cluster job), followed by the host;
//! - [`subagent`] and [`acp`]: ACP agents as tasks or foreground runs;
//! - [`queue`]: limits on running process tasks, and tasks that wait, queued, for a slot or for
//!   others;
//! - [`call`]: what a running call carries (its cancellation, its progress reports);
//! - [`task_facts`]: where a task's process runs and who asked to kill it, for people's views.
//!
//! Nothing here knows `abi_stable`: `crate::plugin` converts the plugin's requests into these types.

pub mod acp;
pub mod call;
pub mod declare;
pub mod external;
pub mod foreground;
mod handles;
pub mod handover;
pub mod options;
pub mod process_tasks;
pub mod queue;
pub mod subagent;
pub mod task_facts;

pub use call::{CallContext, ClientLink, Progress};
pub use declare::{DeclareError, TaskDeclaration};
pub use handles::Services;
pub use options::ServiceOptions;
