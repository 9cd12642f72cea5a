//! What a running tool call carries into the services it uses: a cancellation (the call's end ends
//! what it started in the foreground) and, when the caller asked, a progress report.

use std::sync::Arc;

use taskhost_registry::CancellationToken;

use crate::process::Process;

/// Reports a running call's progress: a number that grows (bytes of output so far) and a message
/// (the latest line).
pub type Progress = Arc<dyn Fn(f64, String) + Send + Sync>;

/// A running call, as the services see it.
#[derive(Clone, Default)]
pub struct CallContext {
    /// Cancelled when the call ends early (the client cancelled, the session closed).
    pub cancel: CancellationToken,
    /// Where progress goes, if the caller asked for it.
    pub progress: Option<Progress>,
    /// The call's MCP client, when it came from one.
    pub client: Option<Arc<dyn ClientLink>>,
    /// The call's JSON-RPC id, when it came from an MCP request its client waits on.
    pub request_id: Option<serde_json::Value>,
}

/// The MCP client of a call, as plugin code running the call reaches it.
pub trait ClientLink: Send + Sync {
    /// Sends a log message at `level` (`debug` ... `emergency`), when the client asked for such.
    fn log(&self, level: &str, logger: &str, data: serde_json::Value);
    /// Reports the call's progress, when the client asked for it.
    fn progress(&self, progress: f64, total: Option<f64>, message: &str);
    /// Sends the client a request (`sampling/createMessage`, `elicitation/create`, `roots/list`)
    /// and blocks the calling thread (a plugin's, never the runtime's) until it answers or `cancel`
    /// is cancelled.
    ///
    /// # Errors
    /// The client cannot be asked, answered with an error, or the call was cancelled.
    fn ask(
        &self,
        method: &str,
        params: serde_json::Value,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Value, String> {
        let requests = serde_json::json!({"0": {"method": method, "params": params}});
        let serde_json::Value::Object(requests) = requests else {
            return Err("unreachable: a literal object".to_owned());
        };
        let mut answers = self.ask_all(requests, cancel)?;
        answers
            .remove("0")
            .ok_or_else(|| "the client gave no answer".to_owned())
    }
    /// Sends the client every request of `requests` (a key to each `{"method", "params"}`) and
    /// blocks until all are answered: each key's result.
    ///
    /// # Errors
    /// As [`ClientLink::ask`]; the first failure fails them all.
    fn ask_all(
        &self,
        requests: serde_json::Map<String, serde_json::Value>,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Map<String, serde_json::Value>, String>;
}

/// Tells `progress` (when the caller asked for it) how `process` is doing, at most ten times a second
/// and only when its output grew. Never ends: the caller drops it when the process settles.
pub(crate) async fn report_progress(
    process: &Process,
    progress: Option<&Progress>,
) -> std::convert::Infallible {
    let Some(progress) = progress else {
        return std::future::pending().await;
    };
    let mut reported = 0;
    let mut tick = tokio::time::interval(std::time::Duration::from_millis(100));
    loop {
        tick.tick().await;
        let (bytes, line) = process.progress();
        if bytes > reported {
            reported = bytes;
            progress(bytes as f64, line);
        }
    }
}
