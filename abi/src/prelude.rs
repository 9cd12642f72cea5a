//! What a plugin needs, without the boundary's `abi_stable` types: `use taskhost_abi::prelude::*;`.
//!
//! Typed tool arguments derive `Deserialize` and `JsonSchema` through this crate's re-exports, so a
//! plugin depends on `taskhost-abi` alone:
//!
//! ```ignore
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(crate = "taskhost_abi::serde")]
//! #[schemars(crate = "taskhost_abi::schemars")]
//! struct Args { name: String }
//! ```

pub use crate::export_plugin;
pub use crate::sdk::{Host, Plugin, TaskControl, TaskHandle};
pub use crate::types::{
    ExternalRequest, ProcessRequest, ProcessResult, SubagentRequest, ToolCall, ToolResult,
};
pub use crate::types::{
    FfiOutcome as Outcome, FfiSnapshot as TaskSnapshot, FfiStatus as TaskStatus,
};
pub use schemars::JsonSchema;
pub use serde::Deserialize;
pub use serde_json::{Value, json};

/// A plugin with no state of its own and no prompt section.
pub struct NoState;

impl Plugin for NoState {}
