//! Serving sessions: stdio (one owner for the session's life) and a Unix socket (one session per
//! connection, whose owner may come back, see [`crate::owners`], or is the person's, see
//! [`super::person`]).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use rmcp::ServiceExt;
use rmcp::transport::async_rw::AsyncRwTransport;

use super::layer::{Negotiated, SessionAhead};
use super::peers::Peers;
use super::person::Persons;
use super::session::McpSession;
use crate::Taskhost;
use crate::owners::{Admission, CameBack, Claim, Leaving};

/// How a served connection ended.
struct Ended {
    outcome: Result<(), String>,
    /// The client said goodbye (its bridge's client closed its input).
    goodbye: bool,
}

/// How a connection's session is served.
struct Served {
    /// The first bytes of the connection, already read, that belong to MCP.
    prefix: Vec<u8>,
    /// Its place in an upgrade's pause (a bridge's).
    pausing: Option<crate::drain::Pausing>,
    /// Other connections serve the same owner at once (a person's): the client's end cancels its
    /// own calls only, not every call of the owner.
    shared: bool,
}

/// Serves session `id` (opened by the caller) over `transport` until the client leaves. The
/// session stays open: what happens to its owner is the caller's to decide.
async fn run_session<T>(
    host: Arc<Taskhost>,
    peers: Peers,
    id: &str,
    transport: T,
    served: Served,
) -> Ended
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + 'static,
{
    let layer = super::Layer::new(host.clone(), peers.tasks().clone());
    let negotiated = Arc::new(Negotiated::default());
    let ahead = SessionAhead {
        layer: layer.clone(),
        negotiated: negotiated.clone(),
        owner: id.to_owned(),
    };
    let guarded = crate::wire::guard(
        transport,
        served.prefix,
        served.pausing,
        Some(Arc::new(ahead)),
    );
    let session = McpSession::new(
        host.clone(),
        id.to_owned(),
        peers.clone(),
        guarded.client_gone.clone(),
    );
    if !served.shared {
        // The client's end ends the session's calls at once (rmcp lets handlers run on for a while).
        let (host, id, gone) = (host.clone(), id.to_owned(), guarded.client_gone.clone());
        tokio::spawn(async move {
            gone.cancelled().await;
            host.sessions().cancel_calls(&id);
        });
    }
    let (read, write) = tokio::io::split(guarded.stream);
    let transport = layer.wrap(AsyncRwTransport::new_server(read, write), negotiated);
    let outcome = match session.serve(transport).await {
        Ok(running) => running
            .waiting()
            .await
            .map(|_| ())
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    Ended {
        outcome,
        goodbye: guarded.goodbye.load(Ordering::Acquire),
    }
}

/// Admits a connection as an owner (off the runtime's workers: it may write the records).
async fn admit(host: &Arc<Taskhost>, claim: Claim) -> Result<Admission, String> {
    let host = host.clone();
    tokio::task::spawn_blocking(move || host.owners().admit(claim, |s| host.sessions().is_open(s)))
        .await
        .map_err(|e| format!("admitting a connection: {e}"))?
}

/// Serves one session on stdin/stdout: an owner for the session's life, its tasks cancelled and
/// awaited when the client leaves.
///
/// # Errors
/// When the MCP handshake fails or no owner could be named.
///
/// # Cancel safety
/// Not cancel safe: dropped mid-session, the session's calls are not cancelled and its agent is not
/// disposed until the host shuts down. Run it to completion (it ends when the client leaves).
pub async fn serve_stdio(host: Arc<Taskhost>, peers: Peers) -> Result<(), String> {
    let (stdin, stdout) = crate::wire::stdio::client_streams();
    let admission = admit(&host, Claim::Anonymous).await?;
    let id = admission.session;
    host.sessions().open(&id);
    let ended = run_session(
        host.clone(),
        peers,
        &id,
        tokio::io::join(stdin, stdout),
        Served {
            prefix: Vec::new(),
            pausing: None,
            shared: false,
        },
    )
    .await;
    host.end_owner(&id).await;
    tracing::info!(session = %id, "session ended");
    ended.outcome
}

/// Serves one session per connection on `listener` (see [`crate::listen::BoundSocket`]), until the
/// future is dropped. A peer that `peers_allowed` does not admit (checked by `SO_PEERCRED` before
/// anything is read from it) is refused: its connection is closed at once.
///
/// # Errors
/// When accepting fails.
///
/// # Cancel safety
/// Dropping the future stops accepting; sessions already running go on until their client leaves.
pub async fn serve_unix(
    host: Arc<Taskhost>,
    peers: Peers,
    listener: tokio::net::UnixListener,
    peers_allowed: crate::listen::PeerPolicy,
) -> Result<(), String> {
    let persons = Arc::new(Persons::default());
    loop {
        let (stream, _) = listener
            .accept()
            .await
            .map_err(|e| format!("accept: {e}"))?;
        let uid = match stream.peer_cred() {
            Ok(cred) if peers_allowed.admits(cred.uid()) => cred.uid(),
            Ok(cred) => {
                tracing::warn!(
                    uid = cred.uid(),
                    pid = cred.pid(),
                    "refused a connection from another user"
                );
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "refused a connection whose peer is unknown");
                continue;
            }
        };
        let (host, peers, persons) = (host.clone(), peers.clone(), persons.clone());
        tokio::spawn(async move {
            if let Err(e) = serve_connection(host, peers, stream, (uid, &persons)).await {
                tracing::warn!(error = %e, "connection failed");
            }
        });
    }
}

/// Serves one socket connection: its hello read (if it sends one), its owner admitted and
/// welcomed, its session served; then its owner ends, or is away for its grace (a connection that
/// may come back and left without a goodbye), or stays (a person's).
async fn serve_connection(
    host: Arc<Taskhost>,
    peers: Peers,
    mut stream: tokio::net::UnixStream,
    (uid, persons): (u32, &Persons),
) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    let (claim, prefix) = match read_claim(&mut stream).await? {
        // Closed before its first byte (a probe of whether the socket accepts): nobody to serve.
        None => return Ok(()),
        Some(Hello::Person) => return serve_person(host, peers, stream, uid, persons).await,
        Some(Hello::Claim(claim, prefix)) => (claim, prefix),
    };
    let may_return = claim != Claim::Anonymous;
    let mut admission = admit(&host, claim).await?;
    if admission.came_back != CameBack::No {
        admission.continued = host.services().continued_calls(&admission.session);
    }
    if let Some(welcome) = admission.welcome() {
        stream
            .write_all(welcome.as_bytes())
            .await
            .map_err(|e| format!("welcoming {}: {e}", admission.session))?;
    }
    let id = admission.session.clone();
    match admission.came_back {
        CameBack::Here => {}
        CameBack::No => {
            host.sessions().open(&id);
        }
        CameBack::FromRecords => {
            // Open already when this host took over external work of its.
            if !host.sessions().is_open(&id) {
                host.sessions().open(&id);
            }
            let (h, i) = (host.clone(), id.clone());
            let restored = tokio::task::spawn_blocking(move || h.restore_owner(&i))
                .await
                .unwrap_or(0);
            tracing::info!(session = %id, restored, "an owner came back from an earlier host");
        }
    }
    // A bridge's session pauses for an upgrade (its bridge sends again what was not taken).
    let pausing = may_return.then(|| host.drain().enter());
    let served = Served {
        prefix,
        pausing,
        shared: false,
    };
    let ended = run_session(host.clone(), peers, &id, stream, served).await;
    match host
        .owners()
        .leave(&id, admission.lease, ended.goodbye, may_return)
    {
        Leaving::Superseded => {}
        Leaving::End => {
            host.end_owner(&id).await;
            tracing::info!(session = %id, "session ended");
        }
        Leaving::Away => {
            tracing::info!(session = %id, grace_ms = host.owners().grace().as_millis() as u64, "a connection was lost; its owner may come back");
            host.away(&id, admission.lease);
        }
    }
    ended.outcome
}

/// Serves a person's command ([`super::person`]): its owner stays when the connection ends.
async fn serve_person(
    host: Arc<Taskhost>,
    peers: Peers,
    mut stream: tokio::net::UnixStream,
    uid: u32,
    persons: &Persons,
) -> Result<(), String> {
    use tokio::io::AsyncWriteExt;
    let id = persons.admit(&host, uid).await;
    stream
        .write_all(super::person::welcome(&id).as_bytes())
        .await
        .map_err(|e| format!("welcoming {id}: {e}"))?;
    let served = Served {
        prefix: Vec::new(),
        pausing: None,
        shared: true,
    };
    run_session(host, peers, &id, stream, served).await.outcome
}

/// What a connection's first line says.
enum Hello {
    /// A bridge's claim (or none: an anonymous connection), and the bytes read that belong to MCP.
    Claim(Claim, Vec<u8>),
    /// A person's command.
    Person,
}

/// Reads a connection's hello, if its first byte starts one (the first byte of a connection
/// without a hello belongs to MCP); `None` for a connection closed before its first byte.
async fn read_claim(stream: &mut tokio::net::UnixStream) -> Result<Option<Hello>, String> {
    let Some(first) = next_byte(stream).await? else {
        return Ok(None);
    };
    if first != b'#' {
        return Ok(Some(Hello::Claim(Claim::Anonymous, vec![first])));
    }
    // A byte at a time: what follows the hello's newline is MCP, and stays in the socket.
    let mut line = vec![first];
    while line.len() < crate::owners::MAX_LINE && line.last() != Some(&b'\n') {
        let Some(byte) = next_byte(stream).await? else {
            break;
        };
        line.push(byte);
    }
    let text = String::from_utf8_lossy(&line);
    if super::person::is_hello(&text) {
        return Ok(Some(Hello::Person));
    }
    Claim::parse(&text)
        .map(|claim| Some(Hello::Claim(claim, Vec::new())))
        .ok_or_else(|| {
            format!(
                "refused a connection whose first line is not a hello: {}",
                text.trim_end()
            )
        })
}

/// The connection's next byte; `None` at its end.
async fn next_byte(stream: &mut tokio::net::UnixStream) -> Result<Option<u8>, String> {
    use tokio::io::AsyncReadExt;
    let mut byte = [0u8; 1];
    let n = stream
        .read(&mut byte)
        .await
        .map_err(|e| format!("reading a connection: {e}"))?;
    Ok((n == 1).then_some(byte[0]))
}
