//! The calls a crashed predecessor interrupted whose foreground commands became tasks here (see
//! `foregrounds.rs`), kept until each calling session's bridge is welcomed back.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

/// A call a predecessor's crash interrupted whose command became a task here: the call's JSON-RPC
/// id and the task's.
pub type ContinuedCall = (Value, String);

/// The [`ContinuedCall`]s of each session.
#[derive(Clone, Default)]
pub struct ContinuedCalls(pub(crate) Arc<parking_lot::Mutex<HashMap<String, Vec<ContinuedCall>>>>);
