//! The client of a call running as a task.

use std::sync::Arc;

use serde_json::Value;
use taskhost_registry::CancellationToken;

use super::inputs::Inputs;
use crate::services::ClientLink;

/// The client of a call running as a task: it cannot be logged to or told progress (the extension
/// carries neither), and what the call asks it becomes the task's open input requests, answered
/// through `tasks/update`.
pub(super) struct TaskClient {
    pub(super) task: String,
    pub(super) inputs: Arc<Inputs>,
    pub(super) runtime: tokio::runtime::Handle,
}

impl ClientLink for TaskClient {
    fn log(&self, _level: &str, _logger: &str, _data: Value) {}

    fn progress(&self, _progress: f64, _total: Option<f64>, _message: &str) {}

    fn ask_all(
        &self,
        requests: serde_json::Map<String, Value>,
        cancel: &CancellationToken,
    ) -> Result<serde_json::Map<String, Value>, String> {
        let waits = self.inputs.open(&self.task, requests);
        let opened: Vec<String> = waits.iter().map(|(_, open, _)| open.clone()).collect();
        let cancel = cancel.clone();
        let got = self.runtime.block_on(async move {
            let all = futures::future::try_join_all(waits.into_iter().map(
                |(key, _, answered)| async move {
                    answered
                        .await
                        .map(|v| (key, v))
                        .map_err(|_| "the task ended before it was answered".to_owned())
                },
            ));
            tokio::select! {
                got = all => got.map(|a| a.into_iter().collect()),
                () = cancel.cancelled() => Err("the task was cancelled".to_owned()),
            }
        });
        self.inputs.close(&self.task, &opened);
        got
    }
}
