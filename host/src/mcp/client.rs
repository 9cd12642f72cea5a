//! The MCP client of one tool call, as plugin code running the call reaches it (see
//! [`ClientLink`]): log messages at the level the client asked for, progress against the call's
//! token, and requests to the client (sampling, elicitation, roots). Each is sent before the call
//! goes on, so a message the plugin sent before returning reaches the client before the result.
#![allow(
    deprecated,
    reason = "MCP logging notifications carry the messages (SEP-2577 deprecates them in rmcp)"
)]

use std::sync::Arc;

use rmcp::model::{
    LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam, ProgressToken,
    ServerRequest,
};
use rmcp::service::{Peer, RoleServer};
use serde_json::{Value, json};
use taskhost_registry::CancellationToken;

use super::hub::{Listener, wants};
use crate::services::ClientLink;

/// One call's client.
pub(super) struct CallClient {
    pub(super) peer: Peer<RoleServer>,
    pub(super) progress_token: Option<ProgressToken>,
    /// The session the call came in: the log level it asked for.
    pub(super) listener: Arc<Listener>,
    pub(super) runtime: tokio::runtime::Handle,
}

impl CallClient {
    /// Runs `future` to its end from a plugin's thread (which is not one of the runtime's), or, on
    /// a runtime thread, sends it off.
    fn finish(&self, future: impl Future<Output = ()> + Send + 'static) {
        if tokio::runtime::Handle::try_current().is_ok() {
            self.runtime.spawn(future);
        } else {
            self.runtime.block_on(future);
        }
    }
}

impl ClientLink for CallClient {
    fn log(&self, level: &str, logger: &str, data: Value) {
        let Ok(level) = serde_json::from_value::<LoggingLevel>(json!(level)) else {
            return;
        };
        if !wants(*self.listener.level.lock(), level) {
            return;
        }
        let param = LoggingMessageNotificationParam::new(level, data).with_logger(logger);
        let peer = self.peer.clone();
        self.finish(async move {
            let _ = peer.notify_logging_message(param).await;
        });
    }

    fn progress(&self, progress: f64, total: Option<f64>, message: &str) {
        let Some(token) = self.progress_token.clone() else {
            return;
        };
        let mut param = ProgressNotificationParam::new(token, progress);
        if let Some(total) = total {
            param = param.with_total(total);
        }
        if !message.is_empty() {
            param = param.with_message(message);
        }
        let peer = self.peer.clone();
        self.finish(async move {
            let _ = peer.notify_progress(param).await;
        });
    }

    fn ask_all(
        &self,
        requests: serde_json::Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Map<String, Value>, String> {
        if tokio::runtime::Handle::try_current().is_ok() {
            return Err("a client can be asked only from a plugin's thread".to_owned());
        }
        let mut sent = Vec::with_capacity(requests.len());
        for (key, request) in requests {
            let method = request["method"].as_str().unwrap_or_default().to_owned();
            let typed: ServerRequest = serde_json::from_value(request)
                .map_err(|e| format!("{method} is not a request a server may send: {e}"))?;
            sent.push((key, method, typed));
        }
        let peer = self.peer.clone();
        let cancel = cancel.clone();
        self.runtime.block_on(async move {
            let asks = sent.into_iter().map(|(key, method, request)| {
                let peer = peer.clone();
                async move {
                    let answer = peer
                        .send_request(request)
                        .await
                        .map_err(|e| format!("the client did not answer {method}: {e}"))?;
                    serde_json::to_value(answer)
                        .map(|v| (key, v))
                        .map_err(|e| e.to_string())
                }
            });
            tokio::select! {
                answers = futures::future::try_join_all(asks) => answers.map(|a| a.into_iter().collect()),
                () = cancel.cancelled() => Err("the call was cancelled".to_owned()),
            }
        })
    }
}
