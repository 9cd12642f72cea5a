//! The HTTP listener's caps a red team broke, each shown by its attack: an HTTP/2 connection idle
//! after a request, one principal's `subscriptions/listen` streams, and a request whose head came
//! before its token was revoked and whose body came after.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::fixtures::{eventually, scratch};
use crate::http_bounds::closed_within;
use crate::http_wire::{Client, HttpHost, revoke_in};

/// A host whose config's `[http]` holds `section`.
fn host_with(dir: &Path, section: &str) -> HttpHost {
    let config = dir.join("config.toml");
    std::fs::write(&config, format!("[http]\n{section}\n")).expect("write the config");
    HttpHost::start(dir, &["--config", config.to_str().expect("a UTF-8 path")])
}

/// An HTTP/2 frame: its type, flags, stream and payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len())
        .expect("a small frame")
        .to_be_bytes();
    let mut out = vec![len[1], len[2], len[3], kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A request head in HPACK, every field a literal without indexing (names and values short).
fn hpack(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.push(0);
        for text in [name, value] {
            out.push(u8::try_from(text.len()).expect("shorter than 127"));
            out.extend_from_slice(text.as_bytes());
        }
    }
    out
}

/// An h2c (prior knowledge) connection that made one unauthenticated `GET` and read its answer's
/// head.
fn h2c_after_one_request(host: &HttpHost) -> TcpStream {
    let authority = host.authority();
    let mut stream = TcpStream::connect(&authority).expect("connect");
    let head = hpack(&[
        (":method", "GET"),
        (":scheme", "http"),
        (":path", "/.well-known/oauth-protected-resource"),
        (":authority", &authority),
    ]);
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(frame(4, 0, 0, &[]));
    hello.extend(frame(1, 0x5, 1, &head));
    stream.write_all(&hello).expect("send the request");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    loop {
        let mut header = [0u8; 9];
        stream.read_exact(&mut header).expect("a frame");
        let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let mut payload = vec![0u8; len];
        stream.read_exact(&mut payload).expect("its payload");
        let on = u32::from_be_bytes([header[5], header[6], header[7], header[8]]) & 0x7fff_ffff;
        if header[3] == 1 && on == 1 {
            return stream;
        }
    }
}

/// Proves: with a 1 s header timeout, an h2c connection that made one request and then says
/// nothing is closed (it was held open for ever).
#[test]
fn an_h2c_connection_silent_after_a_request_is_closed() {
    let dir = scratch("http-h2-idle");
    let host = host_with(&dir, "header_timeout_ms = 1000");
    let stream = h2c_after_one_request(&host);
    assert!(
        closed_within(&stream, Duration::from_secs(10)),
        "the idle h2c connection is still open 10 s later"
    );
}

/// Proves: with a 1 s header timeout, an h2c connection that made one request and then sent a
/// request head that never ends (`HEADERS` without `END_HEADERS`, no `CONTINUATION`) is closed.
#[test]
fn an_h2c_connection_with_an_unfinished_request_head_is_closed() {
    let dir = scratch("http-h2-partial");
    let host = host_with(&dir, "header_timeout_ms = 1000");
    let mut stream = h2c_after_one_request(&host);
    let head = hpack(&[(":method", "GET"), (":scheme", "http")]);
    stream
        .write_all(&frame(1, 0x1, 3, &head))
        .expect("send half a head");
    assert!(
        closed_within(&stream, Duration::from_secs(10)),
        "the h2c connection holding half a head is still open 10 s later"
    );
}

/// A 2026-07-28 request of `method` as its head (with `Content-Length`) and its body.
fn modern_request(
    host: &HttpHost,
    token: &str,
    method: &str,
    name: Option<&str>,
    params: Value,
) -> (String, Vec<u8>) {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let authority = host.authority();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\nContent-Length: {}\r\n",
        body.len()
    );
    if let Some(name) = name {
        head.push_str(&format!("Mcp-Name: {name}\r\n"));
    }
    head.push_str("\r\n");
    (head, body.into_bytes())
}

/// The status of the answer on `stream` (0 when none came).
fn status_of(stream: &TcpStream) -> u16 {
    let mut status = String::new();
    let _ = BufReader::new(stream).read_line(&mut status);
    status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Opens a `subscriptions/listen` stream of `token`; the connection and its status.
fn listen(host: &HttpHost, token: &str) -> (TcpStream, u16) {
    let (head, body) = modern_request(
        host,
        token,
        "subscriptions/listen",
        None,
        json!({"notifications": {"toolsListChanged": true}}),
    );
    let mut stream = TcpStream::connect(host.authority()).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    stream.write_all(head.as_bytes()).expect("send the head");
    stream.write_all(&body).expect("send the body");
    let code = status_of(&stream);
    (stream, code)
}

/// Proves: one principal holds at most 16 `subscriptions/listen` streams (429 past them, as for
/// `GET` streams), another principal's are its own, and a closed stream gives its place back.
#[test]
fn a_principals_listen_streams_past_sixteen_get_429() {
    let dir = scratch("http-listen-cap");
    let host = HttpHost::start(&dir, &[]);
    let alice = host.token("alice");
    let open: Vec<_> = (0..16).map(|_| listen(&host, &alice)).collect();
    let codes: Vec<u16> = open.iter().map(|o| o.1).collect();
    assert!(codes.iter().all(|c| *c == 200), "{codes:?}");
    assert_eq!(listen(&host, &alice).1, 429, "the 17th stream");
    assert_eq!(
        listen(&host, &host.token("bob")).1,
        200,
        "bob's are his own"
    );
    let mut open = open;
    open.pop();
    let mut stream = None;
    assert!(
        eventually(Duration::from_secs(20), || {
            let (s, code) = listen(&host, &alice);
            stream = Some(s);
            code == 200
        }),
        "a closed stream gives its place back"
    );
}

/// Proves: a `tools/call` whose head and most of its body came before its token was revoked, and
/// its last byte after the host saw the revocation, is answered 401 and its command never runs.
#[test]
fn a_request_finished_after_its_token_was_revoked_is_refused() {
    let dir = scratch("http-revoke-midway");
    let host = HttpHost::start(&dir, &[]);
    let token = host.token("alice");
    let client = Client::new(&host, &token);
    assert!(
        client
            .call("bash", json!({"command": "echo up"}))
            .starts_with("up")
    );
    let file = dir.join("ran");
    let command = format!("date > {}", file.display());
    let (head, body) = modern_request(
        &host,
        &token,
        "tools/call",
        Some("bash"),
        json!({"name": "bash", "arguments": {"command": command}}),
    );
    let mut stream = TcpStream::connect(host.authority()).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let (most, last) = body.split_at(body.len() - 1);
    stream.write_all(head.as_bytes()).expect("send the head");
    stream.write_all(most).expect("send most of the body");
    revoke_in(&host.state, "alice");
    assert!(
        eventually(Duration::from_secs(10), || {
            client.post(&[], b"{}").status == 401
        }),
        "the host saw the revocation"
    );
    stream.write_all(last).expect("send the last byte");
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 401 "), "{answer}");
    assert!(!file.exists(), "the command ran after the revocation");
}

/// Proves: clients that close their `subscriptions/listen` streams leave no ERROR line in the
/// host's log (a client going away is not the host's error).
#[test]
fn closing_listen_streams_logs_no_error() {
    let dir = scratch("http-listen-close");
    let mut host = HttpHost::start(&dir, &[]);
    let alice = host.token("alice");
    let open: Vec<_> = (0..8).map(|_| listen(&host, &alice)).collect();
    assert!(open.iter().all(|o| o.1 == 200));
    drop(open);
    let client = Client::new(&host, &alice);
    assert!(
        eventually(Duration::from_secs(20), || (0..8)
            .map(|_| listen(&host, &alice))
            .all(|o| o.1 == 200)),
        "the closed streams gave their places back"
    );
    assert!(
        client
            .call("bash", json!({"command": "echo up"}))
            .starts_with("up")
    );
    let errors: Vec<String> = host
        .log_to_its_end()
        .into_iter()
        .filter(|l| l.contains("ERROR"))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
}
