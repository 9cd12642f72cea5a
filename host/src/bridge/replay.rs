//! What a bridge remembers of its client's conversation so a new host can serve it again, and
//! what it owes the client when a host goes away under its requests.

use std::collections::HashMap;

use serde_json::{Value, json};

/// The request id under which the bridge replays the client's `initialize`.
pub(super) const REINIT_ID: &str = "taskhost-bridge-reinitialize";

/// What the bridge reads of a JSON-RPC message: whether it is a request or an answer, and to what.
/// Its params and result are skipped, not built (an answer may be a large tool result).
#[derive(serde::Deserialize)]
struct Envelope {
    id: Option<Value>,
    method: Option<String>,
    #[serde(default)]
    result: Present,
    #[serde(default)]
    error: Present,
}

/// Whether a member is there, whatever its value (`"result": null` is an answer too).
#[derive(Default)]
struct Present(bool);

impl<'de> serde::Deserialize<'de> for Present {
    fn deserialize<D: serde::Deserializer<'de>>(value: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(value).map(|_| Present(true))
    }
}

/// What the client said that a new host must hear again.
#[derive(Default)]
pub(super) struct Replay {
    pub(super) initialize: Option<Value>,
    pub(super) initialized: Option<Vec<u8>>,
    /// Open `subscriptions/listen` requests by id.
    pub(super) listens: HashMap<String, Vec<u8>>,
    /// Requests the client waits on, by id, with their lines.
    in_flight: HashMap<String, InFlight>,
    /// The host said it took its last request ([`crate::drain::RESTARTING`]): what it did not
    /// answer, it never read.
    restarting: bool,
    /// Requests to send again to the next host (those the restarting host never read).
    pub(super) resend: Vec<Vec<u8>>,
}

impl Replay {
    /// Notes a line from the client.
    pub(super) fn client_line(&mut self, line: &[u8]) {
        let Ok(Envelope {
            id,
            method: Some(method),
            ..
        }) = serde_json::from_slice::<Envelope>(line)
        else {
            return;
        };
        match method.as_str() {
            "initialize" => self.initialize = serde_json::from_slice(line).ok(),
            "notifications/initialized" => self.initialized = Some(line.to_vec()),
            _ => {}
        }
        if let Some(id) = id {
            let key = id.to_string();
            if method == "subscriptions/listen" {
                self.listens.insert(key.clone(), line.to_vec());
            }
            let call = method == "tools/call";
            self.in_flight.insert(
                key,
                InFlight {
                    id,
                    line: line.to_vec(),
                    call,
                },
            );
        }
    }

    /// Notes a line from the host; false when the client must not see it (the answer to a replay).
    pub(super) fn host_line(&mut self, line: &[u8]) -> bool {
        if line.trim_ascii() == crate::drain::RESTARTING.as_bytes() {
            self.restarting = true;
            return false;
        }
        let Ok(message) = serde_json::from_slice::<Envelope>(line) else {
            return true;
        };
        let answer = message.method.is_none() && (message.result.0 || message.error.0);
        let Some(id) = message.id.filter(|_| answer) else {
            return true;
        };
        if id == REINIT_ID {
            return false;
        }
        let key = id.to_string();
        self.in_flight.remove(&key);
        self.listens.remove(&key);
        true
    }

    /// The answers owed to the client for its requests the gone host took (listens excepted: they
    /// are replayed). After the host said it was restarting, none: every request it did not
    /// answer is sent again to the next host.
    pub(super) fn orphaned(&mut self) -> Owed {
        let listens = &self.listens;
        let mut owed = Owed::default();
        let restarting = std::mem::take(&mut self.restarting);
        let resend = &mut self.resend;
        self.in_flight.retain(|key, request| {
            if listens.contains_key(key) {
                return true;
            }
            if restarting {
                resend.push(request.line.clone());
                return true;
            }
            if request.call {
                owed.calls.push(request.id.clone());
            } else {
                owed.now.push(host_gone(&request.id, None));
            }
            false
        });
        owed
    }
}

/// A request the client waits on.
struct InFlight {
    id: Value,
    line: Vec<u8>,
    /// A `tools/call`: the command it ran may continue as a task under the next host.
    call: bool,
}

/// What the client is owed when its host went away.
#[derive(Default)]
pub(super) struct Owed {
    /// Errors to answer at once.
    pub(super) now: Vec<Vec<u8>>,
    /// Tool calls, answered once the next host says which of them continue as tasks (or once
    /// none came).
    pub(super) calls: Vec<Value>,
}

/// The error line answering request `id` of a host that went away; `task` is the background task
/// the command it ran continues as.
pub(super) fn host_gone(id: &Value, task: Option<&str>) -> Vec<u8> {
    let mut error =
        json!({"code": -32603, "message": taskhost_abi::wording::host_gone_error(task)});
    if let Some(task) = task {
        error["data"] = json!({ "task": task });
    }
    line_of(&json!({"jsonrpc": "2.0", "id": id, "error": error}))
}

pub(super) fn line_of(value: &Value) -> Vec<u8> {
    let mut line = value.to_string().into_bytes();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lost_host_owes_an_error_now_for_each_request_later_for_each_tool_call_none_for_listens() {
        let mut replay = Replay::default();
        replay.client_line(br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#);
        assert!(replay.host_line(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        replay.client_line(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        replay.client_line(br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{}}"#);
        replay.client_line(br#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen"}"#);
        replay.client_line(br#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#);
        assert!(replay.host_line(br#"{"jsonrpc":"2.0","id":4,"result":null}"#));
        replay.client_line(br#"{"jsonrpc":"2.0","id":5,"method":"resources/read"}"#);
        let owed = replay.orphaned();
        assert_eq!(owed.calls, vec![json!("a")]);
        let owed: Vec<Value> = owed
            .now
            .iter()
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect();
        assert_eq!(owed.len(), 1);
        assert_eq!(owed[0]["id"], 5);
        assert_eq!(owed[0]["error"]["code"], -32603);
        assert!(replay.initialize.is_some() && replay.initialized.is_some());
        assert_eq!(replay.listens.len(), 1);
        assert!(!replay.host_line(
            format!(r#"{{"jsonrpc":"2.0","id":"{REINIT_ID}","result":{{}}}}"#).as_bytes()
        ));
    }

    #[test]
    fn a_welcome_names_the_calls_that_continue_as_tasks_whatever_their_ids_hold() {
        let admission = crate::owners::Admission {
            session: "session-1".to_owned(),
            secret: Some(taskhost_store::OwnerSecret::generate().unwrap()),
            came_back: crate::owners::CameBack::FromRecords,
            lease: 1,
            continued: vec![
                (json!("a b=c"), "bash-3".to_owned()),
                (json!(7), "bash-4".to_owned()),
            ],
        };
        let welcome = admission.welcome().unwrap();
        assert_eq!(welcome.lines().count(), 1);
        assert_eq!(crate::owners::continued_in(&welcome), admission.continued);
        assert!(
            crate::owners::continued_in("#taskhost welcome session=s owner=o resumed=yes")
                .is_empty()
        );
        let error: Value = serde_json::from_slice(&host_gone(&json!(7), Some("bash-4"))).unwrap();
        assert_eq!(error["error"]["data"]["task"], "bash-4");
        assert!(
            error["error"]["message"]
                .as_str()
                .unwrap()
                .contains("background task bash-4")
        );
    }
}
