//! What a session answers ahead of rmcp, and how it amends rmcp's answers: the protocol methods
//! rmcp does not model (the 2025-11-25 era's tasks, `crate::mcp::LegacyTasks`), served on the
//! session's own lines.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::mpsc;

/// Methods a session may answer ahead of rmcp, once its `initialize` said so.
pub(crate) trait Ahead: Send + Sync + 'static {
    /// True for a message from the client that is answered here (only asked once
    /// [`Ahead::amend`] switched the session on).
    fn takes(&self, message: &Value) -> bool;
    /// The whole JSON-RPC answer to `message`.
    fn answer(&self, message: Value) -> BoxFuture<'static, Value>;
    /// Amends rmcp's `result` to a request of `method`; true when that switches the session on
    /// (its `initialize` negotiated the methods' era).
    fn amend(&self, method: &str, result: &mut Value) -> bool;
}

/// The methods whose answers [`Ahead::amend`] may change.
const AMENDED: [&str; 2] = ["initialize", "tools/list"];

/// One session's [`Ahead`], with what it saw.
pub(crate) struct AheadOf {
    ahead: Arc<dyn Ahead>,
    on: AtomicBool,
    /// Requests whose answers are amended, by id (as JSON text), with their method.
    pending: parking_lot::Mutex<HashMap<String, &'static str>>,
}

/// The id of a message, its other members skipped, not built.
#[derive(serde::Deserialize)]
struct IdOnly {
    id: Option<Value>,
}

impl AheadOf {
    pub(crate) fn new(ahead: Arc<dyn Ahead>) -> Arc<Self> {
        Arc::new(Self {
            ahead,
            on: AtomicBool::new(false),
            pending: parking_lot::Mutex::default(),
        })
    }

    /// Sees `message` from the client: true when it is answered here (its answer goes to `lines`
    /// when ready), false to pass it to rmcp.
    pub(crate) fn take_in(&self, message: &Value, lines: &mpsc::Sender<Vec<u8>>) -> bool {
        let method = message["method"].as_str().unwrap_or_default();
        if let (Some(m), Some(id)) = (AMENDED.iter().find(|m| **m == method), message.get("id")) {
            self.pending.lock().insert(id.to_string(), m);
        }
        if !self.on.load(Ordering::Acquire) || !self.ahead.takes(message) {
            return false;
        }
        let answer = self.ahead.answer(message.clone());
        let lines = lines.clone();
        tokio::spawn(async move {
            let mut line = answer.await.to_string().into_bytes();
            line.push(b'\n');
            let _ = lines.send(line).await;
        });
        true
    }

    /// Sees a line from rmcp to the client: the line, amended when it answers a request whose
    /// answer is (see [`Ahead::amend`]).
    pub(crate) fn amend_out(&self, line: Vec<u8>) -> Vec<u8> {
        if self.pending.lock().is_empty() {
            return line;
        }
        let Some(id) = serde_json::from_slice::<IdOnly>(&line)
            .ok()
            .and_then(|m| m.id)
        else {
            return line;
        };
        let Some(method) = self.pending.lock().remove(&id.to_string()) else {
            return line;
        };
        let Ok(mut message) = serde_json::from_slice::<Value>(&line) else {
            return line;
        };
        let Some(result) = message.get_mut("result") else {
            return line;
        };
        if self.ahead.amend(method, result) {
            self.on.store(true, Ordering::Release);
        }
        let mut amended = message.to_string().into_bytes();
        amended.push(b'\n');
        amended
    }
}
