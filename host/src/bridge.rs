//! `taskhost connect`: the bridge between an MCP client on stdio and a host's socket, which keeps
//! its owner through a restart of the host.
//!
//! The bridge says hello with an owner secret ([`crate::owners`]): a new owner the first time, the
//! one the host gave it on every reconnection. It relays newline-delimited JSON-RPC both ways and
//! remembers what a new host must hear to serve the same client: the client's `initialize` and
//! `notifications/initialized` (replayed under the bridge's own request id, whose answer the
//! client never sees) and its open `subscriptions/listen` streams (replayed as they were; the new
//! host's acknowledgement of each reaches the client as that stream's tools change, not as a second
//! acknowledgement). No answer to a request the client did not make reaches it. When the
//! host's side closes without the client having left, each request the client still waits on is
//! answered with an error (the host that took it is gone): at once, or for a tool call once the
//! next host's welcome said whether its command continues as a task (which the error then names);
//! the bridge dials again for up to `--reconnect-for-ms`; the client sees one tools-changed notice
//! and goes on. When the client
//! closes its input, the bridge says goodbye ([`crate::wire::GOODBYE`]): the owner ends at once.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;

use crate::owners::{Claim, MAX_WELCOME, WELCOME};
use replay::{Heard, REINIT_ID, Replay, host_gone, line_of};

mod replay;
use taskhost_store::OwnerSecret;

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
    let (stdin, mut stdout) = crate::wire::stdio::client_streams();
    tokio::spawn(crate::wire::forward_lines(stdin, lines));
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
/// changed (an initialized client at once, a listening one on each stream once it is open again).
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
            if hear(replay, &line, stdout).await? {
                break;
            }
        }
        if let Some(initialized) = &replay.initialized {
            link.to_host.write_all(initialized).await.map_err(gone)?;
        }
        let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
        write_line(stdout, &line_of(&changed)).await?;
    }
    for listen in replay.replayed_listens() {
        link.to_host.write_all(&listen).await.map_err(gone)?;
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
                        if hear(replay, &line, stdout).await.is_err() {
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

/// Tells the client what it hears of `line` from the host; true when the line answered the
/// bridge's replayed `initialize`.
async fn hear(
    replay: &mut Replay,
    line: &[u8],
    stdout: &mut (impl AsyncWrite + Unpin),
) -> Result<bool, String> {
    match replay.host_line(line) {
        Heard::Relay => write_line(stdout, line).await?,
        Heard::Instead(told) => write_line(stdout, &told).await?,
        Heard::Swallow => {}
        Heard::Reinitialized => return Ok(true),
    }
    Ok(false)
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
