//! `taskhost connect`: the bridge between an MCP client on stdio and a host's socket, which keeps
//! its owner through a restart of the host.
//!
//! The bridge says hello with an owner secret ([`crate::owners`]): a new owner the first time, the
//! one the host gave it on every reconnection. It relays newline-delimited JSON-RPC both ways and
//! remembers what a new host must hear to serve the same client: the client's `initialize` and
//! `notifications/initialized` (replayed under the bridge's own request id, whose answer the
//! client never sees) and its open `subscriptions/listen` streams (replayed as they were). When the
//! host's side closes without the client having left, each request the client still waits on is
//! answered with an error (the host that took it is gone), and the bridge dials again for up to
//! `--reconnect-for-ms`; the client sees one tools-changed notice and goes on. When the client
//! closes its input, the bridge says goodbye ([`crate::wire::GOODBYE`]): the owner ends at once.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;

use crate::owners::{Claim, MAX_WELCOME, WELCOME};
use taskhost_store::OwnerSecret;

/// The request id under which the bridge replays the client's `initialize`.
const REINIT_ID: &str = "taskhost-bridge-reinitialize";

/// The default of `connect --reconnect-for-ms`.
pub const DEFAULT_RECONNECT_FOR: Duration = Duration::from_secs(60);

/// What the bridge connects to.
#[derive(Clone, Debug)]
pub struct BridgeOptions {
    /// The host's socket.
    pub path: PathBuf,
    /// Server uids trusted besides this user and root.
    pub allowed_server_uids: Vec<u32>,
    /// How long to keep dialing after the host's side closed; zero exits at once.
    pub reconnect_for: Duration,
}

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
struct Replay {
    initialize: Option<Value>,
    initialized: Option<Vec<u8>>,
    /// Open `subscriptions/listen` requests by id.
    listens: HashMap<String, Vec<u8>>,
    /// Requests the client waits on, by id, with their lines.
    in_flight: HashMap<String, InFlight>,
    /// The host said it took its last request ([`crate::drain::RESTARTING`]): what it did not
    /// answer, it never read.
    restarting: bool,
    /// Requests to send again to the next host (those the restarting host never read).
    resend: Vec<Vec<u8>>,
}

impl Replay {
    /// Notes a line from the client.
    fn client_line(&mut self, line: &[u8]) {
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
    fn host_line(&mut self, line: &[u8]) -> bool {
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
    fn orphaned(&mut self) -> Owed {
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
struct Owed {
    /// Errors to answer at once.
    now: Vec<Vec<u8>>,
    /// Tool calls, answered once the next host says which of them continue as tasks (or once
    /// none came).
    calls: Vec<Value>,
}

/// The error line answering request `id` of a host that went away; `task` is the background task
/// the command it ran continues as.
fn host_gone(id: &Value, task: Option<&str>) -> Vec<u8> {
    let mut error =
        json!({"code": -32603, "message": taskhost_abi::wording::host_gone_error(task)});
    if let Some(task) = task {
        error["data"] = json!({ "task": task });
    }
    line_of(&json!({"jsonrpc": "2.0", "id": id, "error": error}))
}

fn line_of(value: &Value) -> Vec<u8> {
    let mut line = value.to_string().into_bytes();
    line.push(b'\n');
    line
}

/// One connection to the host, welcomed.
struct Link {
    from_host: BufReader<OwnedReadHalf>,
    to_host: OwnedWriteHalf,
}

/// Relays stdin and stdout to the host until the client leaves (Ok) or the host is gone for
/// longer than `reconnect_for` (Err).
///
/// # Errors
/// The first connection failed, or the host stayed gone; one message naming the socket.
pub async fn run(options: BridgeOptions) -> Result<(), String> {
    let (lines, mut from_client) = mpsc::channel::<Vec<u8>>(16);
    tokio::spawn(crate::wire::forward_lines(tokio::io::stdin(), lines));
    let mut stdout = tokio::io::stdout();
    let mut replay = Replay::default();
    let (mut link, mut secret, _) = open(&options, &Claim::New).await?;
    loop {
        match relay(&mut link, &mut from_client, &mut stdout, &mut replay).await {
            Relayed::ClientLeft => return Ok(()),
            Relayed::HostGone => {}
        }
        let owed = replay.orphaned();
        for line in &owed.now {
            write_line(&mut stdout, line).await?;
        }
        let continued = match reopen(&options, secret).await {
            Ok((l, s, continued)) => {
                (link, secret) = (l, s);
                continued
            }
            Err(e) => {
                for id in &owed.calls {
                    write_line(&mut stdout, &host_gone(id, None)).await?;
                }
                return Err(e);
            }
        };
        for id in &owed.calls {
            let task = continued.iter().find(|(call, _)| call == id);
            let answer = host_gone(id, task.map(|(_, task)| task.as_str()));
            write_line(&mut stdout, &answer).await?;
        }
        resume(&mut link, &mut stdout, &mut replay).await?;
    }
}

/// A welcomed link, the owner's secret, and the calls its host says continue as tasks.
type Opened = (Link, OwnerSecret, Vec<(Value, String)>);

/// Dials the host and says hello.
async fn open(options: &BridgeOptions, claim: &Claim) -> Result<Opened, String> {
    let stream = crate::dial::dial(&options.path, &options.allowed_server_uids)
        .await
        .map_err(|e| e.to_string())?;
    let (read, mut to_host) = stream.into_split();
    to_host
        .write_all(claim.hello().as_bytes())
        .await
        .map_err(|e| format!("{}: {e}", options.path.display()))?;
    let mut from_host = BufReader::new(read);
    let welcome = read_welcome(&mut from_host, &options.path).await?;
    let secret = welcome
        .split_ascii_whitespace()
        .find_map(|w| w.strip_prefix("owner="))
        .and_then(OwnerSecret::parse)
        .ok_or_else(|| {
            format!(
                "{}: the host's welcome names no owner",
                options.path.display()
            )
        })?;
    if let Claim::Resume(_) = claim
        && welcome.contains("resumed=no")
    {
        tracing::warn!(
            "the host did not know this session's owner (another state directory?): the tasks started before are not visible"
        );
    }
    let continued = crate::owners::continued_in(&welcome);
    Ok((Link { from_host, to_host }, secret, continued))
}

async fn read_welcome(
    from_host: &mut BufReader<OwnedReadHalf>,
    path: &Path,
) -> Result<String, String> {
    let mut line = Vec::new();
    (&mut *from_host)
        .take(MAX_WELCOME as u64)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&line).into_owned();
    if !text.starts_with(WELCOME) {
        return Err(format!(
            "{}: the host did not welcome this bridge (an older taskhost?)",
            path.display()
        ));
    }
    Ok(text)
}

/// Dials again, as the same owner, until the host answers or `reconnect_for` passes.
async fn reopen(options: &BridgeOptions, secret: OwnerSecret) -> Result<Opened, String> {
    let deadline = Instant::now() + options.reconnect_for;
    let mut pause = Duration::from_millis(20);
    let claim = Claim::Resume(secret);
    loop {
        match open(options, &claim).await {
            Ok(opened) => {
                tracing::info!("reconnected to the host");
                return Ok(opened);
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(format!("the host is gone ({e})"));
            }
            Err(_) => {
                // Retry pacing while the host restarts, not a wait for an event.
                tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now())))
                    .await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
        }
    }
}

/// Tells a new host what the client told the old one: its `initialize` (answer swallowed), then
/// `notifications/initialized`, then its open listens; and tells the client the tools may have
/// changed.
async fn resume(
    link: &mut Link,
    stdout: &mut (impl AsyncWrite + Unpin),
    replay: &mut Replay,
) -> Result<(), String> {
    let gone = |e: std::io::Error| format!("the host closed while resuming: {e}");
    if let Some(initialize) = &replay.initialize {
        let mut again = initialize.clone();
        again["id"] = json!(REINIT_ID);
        link.to_host
            .write_all(&line_of(&again))
            .await
            .map_err(gone)?;
        loop {
            let mut line = Vec::new();
            if link
                .from_host
                .read_until(b'\n', &mut line)
                .await
                .map_err(gone)?
                == 0
            {
                return Err("the host closed while resuming".to_owned());
            }
            if !replay.host_line(&line) {
                break;
            }
            write_line(stdout, &line).await?;
        }
        if let Some(initialized) = &replay.initialized {
            link.to_host.write_all(initialized).await.map_err(gone)?;
        }
        let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        write_line(stdout, &line_of(&changed)).await?;
    }
    for listen in replay.listens.values() {
        link.to_host.write_all(listen).await.map_err(gone)?;
    }
    for request in std::mem::take(&mut replay.resend) {
        link.to_host.write_all(&request).await.map_err(gone)?;
    }
    Ok(())
}

enum Relayed {
    ClientLeft,
    HostGone,
}

/// Relays until one side closes. The client's end says goodbye and waits for the host to close.
async fn relay(
    link: &mut Link,
    from_client: &mut mpsc::Receiver<Vec<u8>>,
    stdout: &mut (impl AsyncWrite + Unpin),
    replay: &mut Replay,
) -> Relayed {
    // Kept across turns: a read the other branch interrupted has left its part of a line here.
    let mut line = Vec::new();
    loop {
        tokio::select! {
            read = link.from_host.read_until(b'\n', &mut line) => {
                match read {
                    Ok(0) | Err(_) => return Relayed::HostGone,
                    Ok(_) => {
                        let shown = replay.host_line(&line);
                        if shown && write_line(stdout, &line).await.is_err() {
                            return Relayed::ClientLeft;
                        }
                        line.clear();
                    }
                }
            }
            next = from_client.recv() => {
                let Some(line) = next else {
                    goodbye(link, stdout).await;
                    return Relayed::ClientLeft;
                };
                replay.client_line(&line);
                if link.to_host.write_all(&line).await.is_err() {
                    return Relayed::HostGone;
                }
            }
        }
    }
}

/// The client closed its input: the host is told so, and what it still says is relayed until it
/// closes.
async fn goodbye(link: &mut Link, stdout: &mut (impl AsyncWrite + Unpin)) {
    let farewell = format!("\n{}\n", crate::wire::GOODBYE);
    let _ = link.to_host.write_all(farewell.as_bytes()).await;
    let _ = link.to_host.shutdown().await;
    let _ = tokio::io::copy(&mut link.from_host, stdout).await;
    let _ = stdout.flush().await;
}

async fn write_line(out: &mut (impl AsyncWrite + Unpin), line: &[u8]) -> Result<(), String> {
    out.write_all(line)
        .await
        .map_err(|e| format!("stdout: {e}"))?;
    out.flush().await.map_err(|e| format!("stdout: {e}"))
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
            secret: Some(OwnerSecret::generate().unwrap()),
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
