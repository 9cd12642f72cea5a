//! The open requests of live call tasks to their clients (SEP-2663's in-task `input_required`), and
//! where each answer goes.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

/// One task's open requests.
#[derive(Default)]
struct Parked {
    requests: serde_json::Map<String, Value>,
    answers: HashMap<String, tokio::sync::oneshot::Sender<Value>>,
}

/// The open requests of every live call task, by task.
#[derive(Default)]
pub(super) struct Inputs(Mutex<HashMap<String, Parked>>);

/// One request opened: the caller's key, the key the client answers, and where the answer comes.
pub(super) type Opened = (String, String, tokio::sync::oneshot::Receiver<Value>);

impl Inputs {
    /// Opens `requests` (a caller's key to each) for `task`, each under a key unique over the
    /// task's life, as the extension asks.
    pub(super) fn open(&self, task: &str, requests: serde_json::Map<String, Value>) -> Vec<Opened> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let mut all = self.0.lock();
        let parked = all.entry(task.to_owned()).or_default();
        requests
            .into_iter()
            .map(|(key, request)| {
                let open = format!("{key}-{}", NEXT.fetch_add(1, Ordering::Relaxed));
                let (answer, answered) = tokio::sync::oneshot::channel();
                parked.requests.insert(open.clone(), request);
                parked.answers.insert(open.clone(), answer);
                (key, open, answered)
            })
            .collect()
    }

    /// Closes the requests `opened` of `task` (answered, or given up).
    pub(super) fn close(&self, task: &str, opened: &[String]) {
        if let Some(parked) = self.0.lock().get_mut(task) {
            for open in opened {
                parked.requests.remove(open);
                parked.answers.remove(open);
            }
        }
    }

    /// The open requests of `task`, if it has any.
    pub(super) fn requests(&self, task: &str) -> Option<serde_json::Map<String, Value>> {
        self.0
            .lock()
            .get(task)
            .filter(|p| !p.requests.is_empty())
            .map(|p| p.requests.clone())
    }

    /// Delivers each of `responses` to the request of `task` it answers; others are ignored.
    pub(super) fn answer(&self, task: &str, responses: impl IntoIterator<Item = (String, Value)>) {
        let mut all = self.0.lock();
        if let Some(parked) = all.get_mut(task) {
            for (key, response) in responses {
                if let Some(answer) = parked.answers.remove(&key) {
                    parked.requests.remove(&key);
                    let _ = answer.send(response);
                }
            }
        }
    }

    /// Forgets a task that ended.
    pub(super) fn forget(&self, task: &str) {
        self.0.lock().remove(task);
    }
}
