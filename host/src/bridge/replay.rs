//! What a bridge remembers of its client's conversation so a new host can serve it again, and
//! what it owes the client when a host goes away under its requests.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

/// The request id under which the bridge replays the client's `initialize`.
pub(super) const REINIT_ID: &str = "taskhost-bridge-reinitialize";

/// What the bridge reads of a JSON-RPC message: whether it is a request or an answer, and to what.
/// Its params and result are skipped, not built (an answer may be a large tool result).
#[derive(serde::Deserialize)]
struct Envelope {
    id: Option<Value>,
    /// Any JSON: a request whose method is not a string is still the client's, and so its answer.
    method: Option<Value>,
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

/// The notification that opens a `subscriptions/listen` stream, naming the filter it accepted.
const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// The `_meta` member naming the stream (its listen request's id) a notification belongs to.
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// What becomes of a line from the host.
#[derive(Debug, PartialEq)]
pub(super) enum Heard {
    /// The client is told it as it is.
    Relay,
    /// Not for the client: the answer to a request it did not make, a replayed stream's
    /// acknowledgement (it saw the first host's), or the bridge's own notice.
    Swallow,
    /// The client is told this instead: a replayed stream's acknowledgement becomes the tools
    /// change on that stream, when it accepted tool changes.
    Instead(Vec<u8>),
    /// The answer to the bridge's replayed `initialize`, not for the client either.
    Reinitialized,
}

/// What the client said that a new host must hear again.
#[derive(Default)]
pub(super) struct Replay {
    pub(super) initialize: Option<Value>,
    pub(super) initialized: Option<Vec<u8>>,
    /// Open `subscriptions/listen` requests by id.
    listens: HashMap<String, Vec<u8>>,
    /// Open streams the client saw acknowledged, by id.
    acknowledged: HashSet<String>,
    /// Of those, the ones replayed to a new host whose acknowledgement has not come yet.
    reopened: HashSet<String>,
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
        let method = method.as_str().unwrap_or_default();
        match method {
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

    /// Notes a line from the host and says what the client is told of it.
    pub(super) fn host_line(&mut self, line: &[u8]) -> Heard {
        if line.trim_ascii() == crate::drain::RESTARTING.as_bytes() {
            self.restarting = true;
            return Heard::Swallow;
        }
        let Ok(message) = serde_json::from_slice::<Envelope>(line) else {
            return Heard::Relay;
        };
        let method = message.method.as_ref().and_then(Value::as_str);
        if method == Some(ACKNOWLEDGED) && !self.listens.is_empty() {
            return self.acknowledges(line);
        }
        let answer = message.method.is_none() && (message.result.0 || message.error.0);
        let Some(id) = message.id.filter(|_| answer) else {
            return Heard::Relay;
        };
        if id == REINIT_ID {
            return Heard::Reinitialized;
        }
        let key = id.to_string();
        self.listens.remove(&key);
        self.acknowledged.remove(&key);
        self.reopened.remove(&key);
        match self.in_flight.remove(&key) {
            Some(_) => Heard::Relay,
            None => Heard::Swallow,
        }
    }

    /// A stream's acknowledgement: swallowed when it opens again a stream the client saw
    /// acknowledged, whose client is told instead, on that stream, that the tools may have changed
    /// (when the stream accepted that).
    fn acknowledges(&mut self, line: &[u8]) -> Heard {
        let Ok(ack) = serde_json::from_slice::<Value>(line) else {
            return Heard::Relay;
        };
        let stream = &ack["params"]["_meta"][SUBSCRIPTION_ID];
        let key = stream.to_string();
        if !self.reopened.remove(&key) {
            if self.listens.contains_key(&key) {
                self.acknowledged.insert(key);
            }
            return Heard::Relay;
        }
        if ack["params"]["notifications"]["toolsListChanged"] != true {
            return Heard::Swallow;
        }
        let changed = json!({
            "jsonrpc": "2.0",
            "method": "notifications/tools/list_changed",
            "params": {"_meta": {SUBSCRIPTION_ID: stream}},
        });
        Heard::Instead(line_of(&changed))
    }

    /// The client's open `subscriptions/listen` requests, to send to a new host; the
    /// acknowledgement each gets there is the client's only if it saw none before
    /// ([`Replay::host_line`]).
    pub(super) fn replayed_listens(&mut self) -> Vec<Vec<u8>> {
        self.reopened.clone_from(&self.acknowledged);
        self.listens.values().cloned().collect()
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
        assert_eq!(
            replay.host_line(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Heard::Relay
        );
        replay.client_line(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        replay.client_line(br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{}}"#);
        replay.client_line(br#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen"}"#);
        replay.client_line(br#"{"jsonrpc":"2.0","id":4,"method":"tools/list"}"#);
        assert_eq!(
            replay.host_line(br#"{"jsonrpc":"2.0","id":4,"result":null}"#),
            Heard::Relay
        );
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
        assert_eq!(
            replay.host_line(
                format!(r#"{{"jsonrpc":"2.0","id":"{REINIT_ID}","result":{{}}}}"#).as_bytes()
            ),
            Heard::Reinitialized
        );
    }

    #[test]
    fn a_replayed_streams_acknowledgement_becomes_its_tools_change_and_stray_answers_vanish() {
        let ack = |id: u64, tools: bool| {
            line_of(
                &json!({"jsonrpc": "2.0", "method": ACKNOWLEDGED, "params": {
                "_meta": {SUBSCRIPTION_ID: id}, "notifications": {"toolsListChanged": tools}}}),
            )
        };
        let mut replay = Replay::default();
        replay.client_line(br#"{"jsonrpc":"2.0","id":2,"method":"subscriptions/listen"}"#);
        replay.client_line(br#"{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen"}"#);
        replay.client_line(br#"{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen"}"#);
        assert_eq!(
            replay.host_line(&ack(2, true)),
            Heard::Relay,
            "the first host's"
        );
        assert_eq!(replay.host_line(&ack(3, false)), Heard::Relay);
        assert!(replay.orphaned().now.is_empty());
        assert_eq!(replay.replayed_listens().len(), 3);
        assert_eq!(
            replay.host_line(&ack(4, true)),
            Heard::Relay,
            "the first acknowledgement the client sees of its stream"
        );
        let Heard::Instead(told) = replay.host_line(&ack(2, true)) else {
            panic!("the replayed stream's acknowledgement is not relayed");
        };
        let told: Value = serde_json::from_slice(&told).unwrap();
        assert_eq!(told["method"], "notifications/tools/list_changed");
        assert_eq!(told["params"]["_meta"][SUBSCRIPTION_ID], 2);
        assert_eq!(replay.host_line(&ack(3, false)), Heard::Swallow);
        assert_eq!(
            replay.host_line(&ack(3, false)),
            Heard::Relay,
            "acknowledged once"
        );
        assert_eq!(
            replay.host_line(br#"{"jsonrpc":"2.0","id":9,"result":{}}"#),
            Heard::Swallow,
            "an answer to a request the client did not make"
        );
        assert_eq!(
            replay.host_line(br#"{"jsonrpc":"2.0","id":2,"result":{}}"#),
            Heard::Relay,
            "the end of the client's stream"
        );
        assert_eq!(
            replay.host_line(br#"{"jsonrpc":"2.0","id":null,"error":{}}"#),
            Heard::Relay,
            "an error that names no request"
        );
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
