//! What a plugin needs, without the boundary's `abi_stable` types: `use taskhost_abi::prelude::*;`.
//! Every name is the one it has in its own module; nothing is renamed.
//!
//! Typed tool arguments and configs derive `Deserialize` and `JsonSchema` through this crate's
//! re-exports, so a plugin depends on `taskhost-abi` alone:
//!
//! ```ignore
//! #[derive(Deserialize, JsonSchema)]
//! #[serde(crate = "taskhost_abi::serde")]
//! #[schemars(crate = "taskhost_abi::schemars")]
//! struct Args { name: String }
//! ```

pub use crate::export_plugin;
pub use crate::ffi::{
    ExternalRequest, ExternalResult, FfiOutcome, FfiSnapshot, FfiStatus, Level, PermissionPolicy,
    ProcessRequest, ProcessResult, SubagentRequest, ToolCall, ToolResult,
};
pub use crate::sdk::{
    Declaration, Handler, Host, NoArgs, NoState, NonEmpty, Output, Plugin, Positive, PositiveMs,
    TaskControl, TaskHandle, Tool,
};
pub use crate::wording;
pub use schemars::JsonSchema;
pub use serde::Deserialize;
pub use serde_json::{Value, json};
