//! One plain HTTP/1.1 exchange as the tests speak it: a request on a stream of its own
//! (`Connection: close`) and its response read whole, by `Content-Length`, by chunks, or to the
//! stream's end. The HTTP tests use it to see exactly what a host puts on the wire, the browser
//! tests to speak WebDriver (chromedriver keeps a connection open whatever the request says, so a
//! response with a length is read by its length).

use std::collections::HashMap;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};

use serde_json::Value;

/// One response: its status, its headers (names lower case) and its body (chunks joined).
#[derive(Debug)]
pub struct Response {
    /// The status code; 0 when the answer is not HTTP.
    pub status: u16,
    /// The headers, names in lower case.
    pub headers: HashMap<String, String>,
    /// The body, chunks joined, read as UTF-8 (lossily).
    pub body: String,
}

/// Sends one request with `headers` (a `Host` of `authority` unless they name one) and `body`,
/// and reads its response. A server may answer from the head alone (413 for a body over the
/// limit) and close before the body is all sent: that answer is still read. Errors are the
/// stream's.
pub fn exchange<S: Read + Write>(
    stream: &mut S,
    authority: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> std::io::Result<Response> {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        head.push_str(&format!("Host: {authority}\r\n"));
    }
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes())?;
    if let Err(e) = stream.write_all(body)
        && !matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset)
    {
        return Err(e);
    }
    read_response(&mut BufReader::new(stream))
}

/// Reads one response from `reader`.
pub fn read_response(reader: &mut impl BufRead) -> std::io::Result<Response> {
    let mut status_line = String::new();
    reader.read_line(&mut status_line)?;
    let status = status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut headers = HashMap::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line.trim_end().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_owned());
        }
    }
    let mut body = Vec::new();
    if let Some(length) = headers
        .get("content-length")
        .and_then(|l| l.parse::<u64>().ok())
    {
        // A body cut short is what the test sees: it is not an error here.
        let _ = reader.take(length).read_to_end(&mut body);
    } else if headers
        .get("transfer-encoding")
        .is_some_and(|v| v.contains("chunked"))
    {
        read_chunks(reader, &mut body);
    } else {
        // A response cut short is what the test sees: it is not an error here.
        let _ = reader.read_to_end(&mut body);
    }
    Ok(Response {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// Appends the chunks of a chunked body to `out`, up to the last chunk or the stream's end.
fn read_chunks(reader: &mut impl BufRead, out: &mut Vec<u8>) {
    loop {
        let mut size = String::new();
        if reader.read_line(&mut size).unwrap_or(0) == 0 {
            return;
        }
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            return;
        };
        if n == 0 {
            return;
        }
        let start = out.len();
        out.resize(start + n, 0);
        if reader.read_exact(&mut out[start..]).is_err() {
            return;
        }
        let mut end = String::new();
        let _ = reader.read_line(&mut end);
    }
}

impl Response {
    /// The JSON-RPC messages of the body: the `data:` lines of an event stream, or the body itself.
    pub fn messages(&self) -> Vec<Value> {
        if self.body.trim_start().starts_with('{') {
            return serde_json::from_str(&self.body).into_iter().collect();
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect()
    }

    /// The task the tool call in the body started, from its result's `_meta` ([`crate::started_task`]).
    pub fn started_task(&self) -> Option<String> {
        let message = self
            .messages()
            .into_iter()
            .find(|m| m.get("id").is_some())?;
        crate::started_task(&message["result"])
    }

    /// The text of the tool result in the body (its content blocks joined by `\n---\n`), or the
    /// JSON-RPC error's message.
    pub fn tool_text(&self) -> String {
        let Some(message) = self.messages().into_iter().find(|m| m.get("id").is_some()) else {
            return format!("(no answer: {} {})", self.status, self.body);
        };
        if let Some(error) = message.get("error") {
            return format!(
                "JSON-RPC error: {}",
                error["message"].as_str().unwrap_or("")
            );
        }
        message["result"]["content"]
            .as_array()
            .map(|blocks| {
                blocks
                    .iter()
                    .filter_map(|b| b["text"].as_str())
                    .collect::<Vec<_>>()
                    .join("\n---\n")
            })
            .unwrap_or_default()
    }
}
