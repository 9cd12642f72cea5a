//! The HTTP listener's bounds, each shown by the attack it stops: silent connections, a stalled
//! body, one principal's connections, `GET` streams and legacy sessions, the memory those took, a
//! revoked token's open streams, and a client resuming a stream that already finished.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::faults::status_kib;
use crate::fixtures::{eventually, scratch};
use crate::http_wire::{Client, HttpHost, LegacySession, open_event_stream, revoke_in};

/// A host whose config's `[http]` holds `section`.
fn host_with(dir: &Path, section: &str) -> HttpHost {
    let config = dir.join("config.toml");
    std::fs::write(&config, format!("[http]\n{section}\n")).expect("write the config");
    HttpHost::start(dir, &["--config", config.to_str().expect("a UTF-8 path")])
}

/// Opens a `GET /mcp` stream of `session`; the connection and its status.
fn mcp_stream(host: &HttpHost, session: &LegacySession) -> (TcpStream, u16) {
    let bearer = format!("Bearer {}", session.client.token.as_deref().unwrap_or(""));
    open_event_stream(
        host,
        "/mcp",
        &[
            ("Authorization", &bearer),
            ("Mcp-Session-Id", &session.id),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
    )
}

/// Whether the peer closed `stream` (end of file or a reset) before `limit`; data read is skipped.
pub(crate) fn closed_within(mut stream: &TcpStream, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return false;
        }
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

fn ping(session: &LegacySession) -> u16 {
    session
        .post(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}))
        .status
}

/// Proves: with a 1 s header timeout, 1,100 connections that send nothing (more than the 1,024
/// served at once) keep another client, who comes after them, waiting a few timeouts at most (it
/// waited for ever before), and each of them is closed.
#[test]
fn silent_connections_are_closed_and_never_keep_another_client_waiting() {
    let dir = scratch("http-silent");
    let host = host_with(&dir, "header_timeout_ms = 1000");
    let bob = Client::new(&host, &host.token("bob"));
    let silent: Vec<TcpStream> = (0..1100)
        .filter_map(|_| TcpStream::connect(host.authority()).ok())
        .collect();
    assert_eq!(silent.len(), 1100, "opened");
    let began = Instant::now();
    let answered = bob.call("bash", json!({"command": "echo served"}));
    let waited = began.elapsed();
    assert!(answered.starts_with("served\n"), "{answered}");
    assert!(waited < Duration::from_secs(10), "bob waited {waited:?}");
    let open = silent
        .iter()
        .filter(|s| !closed_within(s, Duration::from_secs(10)))
        .count();
    assert_eq!(open, 0, "silent connections still open");
}

/// Proves: a request whose body stops half way (its token good) is answered 408 and its connection
/// closed once the body timeout passes, not held.
#[test]
fn a_stalled_request_body_is_closed() {
    let dir = scratch("http-stalled-body");
    let host = host_with(&dir, "body_timeout_ms = 1000");
    let token = host.token("alice");
    let authority = host.authority();
    let mut stream = TcpStream::connect(&authority).expect("connect");
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n{{\"jsonrpc\""
    );
    stream.write_all(head.as_bytes()).expect("send");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let mut answer = Vec::new();
    let read = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        read.is_ok(),
        "the connection with a stalled body is still open after 10 s: {read:?}, {answer}"
    );
    assert!(answer.starts_with("HTTP/1.1 408 "), "{answer}");
}

/// Proves: one principal holds at most 16 `GET /mcp` streams across its sessions (429 past them),
/// another principal's are its own, and closed streams give their places back.
#[test]
fn a_principals_mcp_streams_past_sixteen_get_429() {
    let dir = scratch("http-get-cap");
    let host = HttpHost::start(&dir, &[]);
    let alice = host.token("alice");
    let sessions = [
        LegacySession::open(Client::new(&host, &alice)),
        LegacySession::open(Client::new(&host, &alice)),
    ];
    let open: Vec<_> = (0..16)
        .map(|n| mcp_stream(&host, &sessions[n % 2]))
        .collect();
    let codes: Vec<u16> = open.iter().map(|o| o.1).collect();
    assert!(codes.iter().all(|c| *c == 200), "{codes:?}");
    assert_eq!(mcp_stream(&host, &sessions[1]).1, 429, "the 17th stream");
    let bob = LegacySession::open(Client::new(&host, &host.token("bob")));
    assert_eq!(mcp_stream(&host, &bob).1, 200, "bob's streams are his own");
    drop(open);
    assert!(
        eventually(Duration::from_secs(20), || mcp_stream(&host, &sessions[0])
            .1
            == 200),
        "closed streams give their places back"
    );
}

/// Proves: with `max_connections_per_principal = 4`, a principal holding four connections gets 429
/// on a fifth, another principal is served, and a closed connection gives its place back.
#[test]
fn a_principals_connections_past_its_cap_get_429() {
    let dir = scratch("http-connection-cap");
    let host = host_with(&dir, "max_connections_per_principal = 4");
    let session = LegacySession::open(Client::new(&host, &host.token("alice")));
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut stream = None;
        assert!(
            eventually(Duration::from_secs(10), || {
                let (s, code) = mcp_stream(&host, &session);
                stream = (code == 200).then_some(s);
                stream.is_some()
            }),
            "a stream on a connection of its own"
        );
        held.extend(stream);
    }
    assert_eq!(ping(&session), 429, "a fifth connection");
    let bob = LegacySession::open(Client::new(&host, &host.token("bob")));
    assert_eq!(ping(&bob), 200, "bob is served");
    held.pop();
    assert!(
        eventually(Duration::from_secs(10), || ping(&session) == 200),
        "a closed connection gives its place back"
    );
}

/// Proves: with `max_sessions_per_principal = 3`, a fourth legacy session ends the principal's
/// session that went longest without a request (not the oldest opened), and the others live on.
#[test]
fn legacy_sessions_past_the_cap_end_the_principals_oldest_idle_one() {
    let dir = scratch("http-session-cap");
    let host = host_with(&dir, "max_sessions_per_principal = 3");
    let alice = host.token("alice");
    let open = || LegacySession::open(Client::new(&host, &alice));
    let (first, second, third) = (open(), open(), open());
    assert_eq!(ping(&first), 200);
    let fourth = open();
    assert_eq!(ping(&second), 404, "the oldest idle session ended");
    for (n, session) in [(1, &first), (3, &third), (4, &fourth)] {
        assert_eq!(ping(session), 200, "session {n} lives on");
    }
}

/// Proves: one principal opening 4,000 legacy sessions and never ending them (a client that goes
/// away without `DELETE`) leaves the host's RSS within twice what it was before, once the sessions
/// past the cap are gone and the host gave their memory back.
#[test]
fn memory_comes_back_after_four_thousand_legacy_sessions() {
    let dir = scratch("http-session-memory");
    let host = HttpHost::start(&dir, &[]);
    let alice = host.token("alice");
    let warm = LegacySession::open(Client::new(&host, &alice));
    assert!(
        warm.call("bash", json!({"command": "echo warm"}))
            .starts_with("warm")
    );
    let pid = host.child.id() as i32;
    let before = status_kib(pid, "VmRSS");
    let client = Client::new(&host, &alice);
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "taskhost-tests", "version": "1"}}})
    .to_string();
    for n in 0..4000 {
        let answer = client.post(&[], init.as_bytes());
        assert_eq!(answer.status, 200, "session {n}: {answer:?}");
    }
    let peak = status_kib(pid, "VmRSS");
    let mut now = peak;
    let back = eventually(Duration::from_secs(40), || {
        now = status_kib(pid, "VmRSS");
        now <= 2 * before
    });
    assert!(
        back,
        "RSS {before} KiB before, {peak} KiB after 4,000 sessions, {now} KiB 40 s later"
    );
}

/// Proves: revoking a token ends its open `GET /mcp` stream within a second.
#[test]
fn revoking_a_token_ends_its_mcp_streams_within_a_second() {
    let dir = scratch("http-revoke-streams");
    let host = HttpHost::start(&dir, &[]);
    let session = LegacySession::open(Client::new(&host, &host.token("alice")));
    let (stream, code) = mcp_stream(&host, &session);
    assert_eq!(code, 200);
    revoke_in(&host.state, "alice");
    let revoked = Instant::now();
    assert!(
        closed_within(&stream, Duration::from_secs(30)),
        "the stream is still open 30 s after its token was revoked"
    );
    let took = revoked.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "the stream ended after {took:?}"
    );
}

/// Proves: resuming a response stream that finished (`GET /mcp` with its last event's id, as Gemini
/// CLI does after every call) is answered 200 with a stream that ends at once, and the host logs no
/// warning for it.
#[test]
fn resuming_a_finished_stream_ends_at_once_and_logs_no_warning() {
    let dir = scratch("http-resume");
    let mut host = HttpHost::start(&dir, &[]);
    let session = LegacySession::open(Client::new(&host, &host.token("alice")));
    let answer = session.post(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": "echo resumed"}}}));
    let last = answer
        .body
        .lines()
        .filter_map(|l| l.strip_prefix("id:"))
        .next_back()
        .map(|id| id.trim().to_owned())
        .unwrap_or_else(|| panic!("an event id in {answer:?}"));
    let bearer = format!("Bearer {}", session.client.token.as_deref().unwrap_or(""));
    let (stream, code) = open_event_stream(
        &host,
        "/mcp",
        &[
            ("Authorization", &bearer),
            ("Mcp-Session-Id", &session.id),
            ("MCP-Protocol-Version", "2025-11-25"),
            ("Last-Event-ID", &last),
        ],
    );
    assert_eq!(code, 200);
    assert!(
        closed_within(&stream, Duration::from_secs(10)),
        "the resumed stream ends"
    );
    let warnings: Vec<String> = host
        .log_to_its_end()
        .into_iter()
        .filter(|l| l.contains("WARN"))
        .collect();
    assert!(warnings.is_empty(), "{warnings:#?}");
}

/// A host on HTTP in `dir` parking legacy sessions idle 100 ms, saying so at debug level.
pub(crate) fn parking_host(dir: &std::path::Path) -> HttpHost {
    let config = dir.join("config.toml");
    std::fs::write(&config, "[http]\nsession_park_ms = 100\n").expect("write the config");
    HttpHost::start_with_env(
        dir,
        "http://127.0.0.1:0",
        &[
            "--no-watch",
            "--config",
            config.to_str().expect("a UTF-8 path"),
        ],
        &[("RUST_LOG", "warn,taskhost::http::sessions=debug")],
    )
}

/// Proves: with `session_park_ms = 100`, a legacy session left idle is parked (the host says so at
/// debug level), and its next request brings it back in the same session: its tool call is
/// served, it is still its principal's alone, it is parked again once idle, and a `DELETE` of it
/// parked ends it for good.
#[test]
fn an_idle_legacy_session_is_parked_and_its_next_request_brings_it_back() {
    let dir = scratch("http-session-park");
    let host = parking_host(&dir);
    let said = |what: &str| {
        let log = host.log.lock().unwrap_or_else(|e| e.into_inner());
        log.iter().filter(|l| l.contains(what)).count()
    };
    let session = LegacySession::open(Client::new(&host, &host.token("alice")));
    let parked = "an idle legacy session is parked";
    assert!(
        eventually(Duration::from_secs(20), || said(parked) >= 1),
        "parked"
    );
    let back = session.call("bash", json!({"command": "echo back"}));
    assert!(back.starts_with("back\n"), "{back}");
    assert_eq!(said("a parked legacy session is restored"), 1);
    assert!(
        eventually(Duration::from_secs(20), || said(parked) >= 2),
        "parked again"
    );
    let bob = Client::new(&host, &host.token("bob"));
    let stranger = LegacySession {
        client: bob,
        id: session.id.clone(),
    };
    assert_eq!(ping(&stranger), 404, "another principal naming it");
    assert_eq!(ping(&session), 200, "its own principal");
    assert!(
        eventually(Duration::from_secs(20), || said(parked) >= 3),
        "parked once more"
    );
    let authority = host.authority();
    let bearer = format!("Bearer {}", session.client.token.as_deref().unwrap_or(""));
    let mut stream = TcpStream::connect(&authority).expect("connect");
    let deleted = taskhost_tests::http1::exchange(
        &mut stream,
        &authority,
        "DELETE",
        "/mcp",
        &[
            ("Authorization", &bearer),
            ("Mcp-Session-Id", &session.id),
            ("MCP-Protocol-Version", "2025-11-25"),
        ],
        b"",
    )
    .expect("an answer");
    assert_eq!(deleted.status, 202, "{deleted:?}");
    assert_eq!(ping(&session), 404, "ended for good");
}

/// Proves: a legacy session whose client subscribed to a resource is never parked (its handler
/// holds the subscription): another session, idle as long, is parked twice meanwhile, this one not
/// once after it subscribed, and its subscription answers on.
#[test]
fn a_legacy_session_holding_a_subscription_is_never_parked() {
    let dir = scratch("http-session-pinned");
    let host = parking_host(&dir);
    let parked_lines = |id: Option<&str>| {
        let log = host.log.lock().unwrap_or_else(|e| e.into_inner());
        log.iter()
            .filter(|l| l.contains("an idle legacy session is parked"))
            .filter(|l| id.is_none_or(|id| l.contains(id)))
            .count()
    };
    let subscribed = LegacySession::open(Client::new(&host, &host.token("alice")));
    let answer = subscribed.post(
        json!({"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe",
        "params": {"uri": "taskhost://tasks"}}),
    );
    assert_eq!(answer.status, 200, "{answer:?}");
    // A machine slow enough to let 100 ms pass between `initialize` and the subscription may park
    // the session before it; from the subscription on, never.
    let before = parked_lines(Some(&subscribed.id));
    let other = LegacySession::open(Client::new(&host, &host.token("bob")));
    assert!(
        eventually(Duration::from_secs(20), || parked_lines(Some(&other.id))
            >= 1),
        "the other session parked"
    );
    assert_eq!(ping(&other), 200);
    assert!(
        eventually(Duration::from_secs(20), || parked_lines(Some(&other.id))
            >= 2),
        "the other session parked again"
    );
    assert_eq!(
        parked_lines(Some(&subscribed.id)),
        before,
        "the subscribed one never"
    );
    assert_eq!(ping(&subscribed), 200);
}
