//! The HTTP listener's caps a red team broke, each shown by its attack: an HTTP/2 connection idle
//! after a request, one principal's `subscriptions/listen` streams, and a request whose head came
//! before its token was revoked and whose body came after.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use crate::fixtures::scratch;
use crate::http_bounds::closed_within;
use crate::http_wire::HttpHost;

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
