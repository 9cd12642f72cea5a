//! The JSON-RPC line guard in front of every MCP session: what rmcp would drop in silence or answer
//! wrongly is answered here, as JSON-RPC says, and the session goes on.
//!
//! - a line that is not JSON: `-32700` (parse error), `id: null`;
//! - a line longer than [`MAX_LINE`]: `-32600` (invalid request), `id: null`, the line discarded;
//! - `tools/call` whose `arguments` is not an object: `-32602` (invalid params), with the call's id.
//!
//! Everything else passes to rmcp unchanged, a line at a time, unless the session's `Ahead` (the
//! MCP layer's in side) answers it; the replies of all go out whole lines at a time, so they never
//! interleave. One line is not JSON and is not passed on: the bridge's
//! farewell ([`GOODBYE`]), which says the client left on purpose and ends the session's input.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use tokio::io::{
    AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

pub(crate) use ahead::Ahead;

mod ahead;
pub(crate) mod stdio;

/// The longest line a session may send, its newline included: rmcp's own limit (16 MiB), past which
/// it would drop the line without a word.
pub const MAX_LINE: usize = 16 << 20;

/// The line a `taskhost connect` bridge sends when its client closed its input: the owner ends now,
/// not after a grace for coming back.
pub const GOODBYE: &str = "#taskhost goodbye";

/// A guarded transport: the stream rmcp serves, and what the guard saw of the client's end.
pub struct Guarded {
    /// What rmcp serves.
    pub stream: DuplexStream,
    /// Cancelled as soon as the client's side closes: what the session still runs can be ended
    /// then, without waiting for rmcp to wind down its handlers.
    pub client_gone: CancellationToken,
    /// Set when the client said [`GOODBYE`] before its side closed.
    pub goodbye: Arc<AtomicBool>,
}

/// Puts the guard between `transport` (whose first bytes, already read, are `prefix`) and the
/// stream rmcp serves. Runs until both directions are closed. With `pausing` (a bridge's session),
/// an upgrade's pause stops the session taking requests and tells the bridge once all it took are
/// answered ([`crate::drain`]). With `ahead`, the messages it takes are answered ahead of rmcp.
pub(crate) fn guard<T>(
    transport: T,
    prefix: Vec<u8>,
    pausing: Option<crate::drain::Pausing>,
    ahead: Option<Arc<dyn Ahead>>,
) -> Guarded
where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let client_gone = CancellationToken::new();
    let goodbye = Arc::new(AtomicBool::new(false));
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let (from_client, to_client) = tokio::io::split(transport);
    let from_client = std::io::Cursor::new(prefix).chain(from_client);
    let (from_rmcp, to_rmcp) = tokio::io::split(ours);
    let (lines, outgoing) = mpsc::channel::<Vec<u8>>(64);
    let restarting_written = Arc::new(tokio::sync::Notify::new());
    tokio::spawn(write_out(outgoing, to_client, restarting_written.clone()));
    let in_flight = pausing.as_ref().map(|p| p.in_flight.clone());
    tokio::spawn(forward_tracked(from_rmcp, lines.clone(), in_flight));
    let (gone, said) = (client_gone.clone(), goodbye.clone());
    tokio::spawn(async move {
        let both = Both {
            lines,
            restarting_written,
            ahead,
        };
        if read_in(from_client, to_rmcp, both, pausing).await {
            said.store(true, Ordering::Release);
        }
        gone.cancel();
    });
    Guarded {
        stream: theirs,
        client_gone,
        goodbye,
    }
}

/// Writes each line it is handed to the client.
/// Writes each line it is handed to the client. Once it has written an upgrade's
/// [`crate::drain::RESTARTING`], `written` is told (a permit, if nobody waits yet).
async fn write_out(
    mut lines: mpsc::Receiver<Vec<u8>>,
    mut to_client: impl AsyncWrite + Unpin,
    written: Arc<tokio::sync::Notify>,
) {
    while let Some(line) = lines.recv().await {
        if to_client.write_all(&line).await.is_err() || to_client.flush().await.is_err() {
            break;
        }
        if line.trim_ascii_end() == crate::drain::RESTARTING.as_bytes() {
            written.notify_one();
        }
    }
    // The client is gone: nothing will be written, nobody waits for it.
    written.notify_one();
    let _ = to_client.shutdown().await;
}

/// Hands what `from` says to `lines` a whole line at a time (each with its newline), until it ends
/// or nobody takes the lines.
pub(crate) async fn forward_lines(from: impl AsyncRead + Unpin, lines: mpsc::Sender<Vec<u8>>) {
    forward_tracked(from, lines, None).await;
}

/// As [`forward_lines`], noting each answer in `in_flight`.
async fn forward_tracked(
    from: impl AsyncRead + Unpin,
    lines: mpsc::Sender<Vec<u8>>,
    in_flight: Option<std::sync::Arc<crate::drain::InFlight>>,
) {
    let mut reader = BufReader::new(from);
    loop {
        let mut line = Vec::new();
        match reader.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {
                let answered = in_flight
                    .as_ref()
                    .and_then(|_| crate::drain::answer_to(&line));
                if lines.send(line).await.is_err() {
                    break;
                }
                // Only once the answer is queued for the client: an upgrade's notice, queued
                // after it, is written after it, so no answer is left unwritten at the `exec`.
                if let (Some(f), Some(id)) = (&in_flight, answered) {
                    f.answered(&id);
                }
            }
        }
    }
}

/// Reads the client's lines: answers the bad ones, passes the rest to rmcp. Closes rmcp's input at
/// the client's end or its [`GOODBYE`]; true for a goodbye.
async fn read_in(
    from_client: impl AsyncRead + Unpin,
    mut to_rmcp: impl AsyncWrite + Unpin,
    both: Both,
    mut pausing: Option<crate::drain::Pausing>,
) -> bool {
    let Both {
        lines,
        restarting_written,
        ahead,
    } = both;
    let mut goodbye = false;
    let mut reader = BufReader::with_capacity(64 * 1024, from_client);
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = tokio::select! {
            biased;
            () = pause_asked(pausing.as_ref()) => {
                // A line being read now is dropped whole: its bridge sends it again.
                if let Some(p) = pausing.as_mut() {
                    pause(p, &lines, &restarting_written).await;
                }
                // Nothing more is taken; the host re-executes itself.
                std::future::pending::<()>().await;
                break;
            }
            read = read_line_bounded(&mut reader, &mut line) => read,
        };
        let (read, complete) = match read {
            Ok(r) => r,
            Err(_) => break,
        };
        if read == 0 {
            break;
        }
        if !complete {
            tracing::warn!(bytes = read, "refused a JSON-RPC line over the limit");
            let reply = error(
                Value::Null,
                -32600,
                &format!(
                    "Invalid Request: a line of more than {} bytes (the limit is {MAX_LINE})",
                    MAX_LINE
                ),
            );
            if lines.send(reply).await.is_err() {
                break;
            }
            continue;
        }
        if line.trim_ascii_end() == GOODBYE.as_bytes() {
            goodbye = true;
            break;
        }
        match check(&line) {
            Verdict::Pass(message) => {
                if let Some(answer) = ahead.as_ref().and_then(|a| a.take(&message)) {
                    answer_ahead(answer, &lines);
                    continue;
                }
                if let Some(p) = &pausing {
                    p.in_flight.took(&line);
                }
                if pass_on(&mut to_rmcp, &line).await.is_err() {
                    break;
                }
            }
            Verdict::Skip => {}
            Verdict::Reply(reply) => {
                if lines.send(reply).await.is_err() {
                    break;
                }
            }
        }
    }
    let _ = to_rmcp.shutdown().await;
    goodbye
}

/// Sends `answer` to the client as one line once it is ready, while the session goes on.
fn answer_ahead(answer: futures::future::BoxFuture<'static, Value>, lines: &mpsc::Sender<Vec<u8>>) {
    let lines = lines.clone();
    tokio::spawn(async move {
        let mut line = answer.await.to_string().into_bytes();
        line.push(b'\n');
        let _ = lines.send(line).await;
    });
}

/// Writes one whole line to rmcp.
async fn pass_on(to_rmcp: &mut (impl AsyncWrite + Unpin), line: &[u8]) -> std::io::Result<()> {
    to_rmcp.write_all(line).await?;
    if !line.ends_with(b"\n") {
        to_rmcp.write_all(b"\n").await?;
    }
    let _ = to_rmcp.flush().await;
    Ok(())
}

/// An upgrade's pause of one session: once what it took is answered, it tells its bridge
/// ([`crate::drain::RESTARTING`]), and is counted paused once that line is written.
async fn pause(
    pausing: &mut crate::drain::Pausing,
    lines: &mpsc::Sender<Vec<u8>>,
    written: &tokio::sync::Notify,
) {
    pausing.answered().await;
    let line = format!("{}\n", crate::drain::RESTARTING).into_bytes();
    if lines.send(line).await.is_ok() {
        written.notified().await;
    }
    pausing.paused();
}

/// Resolves when the host asks `pausing`'s session to pause; never without one.
async fn pause_asked(pausing: Option<&crate::drain::Pausing>) {
    match pausing {
        Some(p) => p.asked().await,
        None => std::future::pending().await,
    }
}

/// Reads one line into `line`, keeping at most [`MAX_LINE`] bytes: returns the bytes read and
/// whether the line fit (a longer one is consumed to its end and dropped).
async fn read_line_bounded(
    reader: &mut (impl AsyncBufReadExt + Unpin),
    line: &mut Vec<u8>,
) -> std::io::Result<(usize, bool)> {
    let mut total = 0;
    let mut fits = true;
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok((total, fits));
        }
        let (chunk, done) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let n = chunk.len();
        if fits && line.len() + n <= MAX_LINE {
            line.extend_from_slice(chunk);
        } else {
            fits = false;
            line.clear();
        }
        reader.consume(n);
        total += n;
        if done {
            return Ok((total, fits));
        }
    }
}

/// What the reading side shares with the writing side.
struct Both {
    /// Lines to the client.
    lines: mpsc::Sender<Vec<u8>>,
    /// Told once an upgrade's notice is written.
    restarting_written: Arc<tokio::sync::Notify>,
    ahead: Option<Arc<dyn Ahead>>,
}

enum Verdict {
    /// A message for rmcp (or for what is answered ahead of it).
    Pass(Value),
    Skip,
    Reply(Vec<u8>),
}

fn check(line: &[u8]) -> Verdict {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Skip;
    }
    let message: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "refused a line that is not JSON");
            return Verdict::Reply(error(Value::Null, -32700, &format!("Parse error: {e}")));
        }
    };
    let bad_arguments = message["method"] == "tools/call"
        && message["params"]
            .get("arguments")
            .is_some_and(|a| !a.is_object() && !a.is_null());
    if bad_arguments {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        return Verdict::Reply(error(
            id,
            -32602,
            "Invalid params: tools/call arguments must be a JSON object",
        ));
    }
    Verdict::Pass(message)
}

/// A JSON-RPC error reply, as one line.
fn error(id: Value, code: i64, message: &str) -> Vec<u8> {
    let mut line = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        .to_string()
        .into_bytes();
    line.push(b'\n');
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(line: &str) -> Option<Value> {
        match check(line.as_bytes()) {
            Verdict::Reply(r) => Some(serde_json::from_slice(&r).expect("a JSON reply")),
            _ => None,
        }
    }

    #[test]
    fn bad_lines_get_the_json_rpc_error_and_good_ones_pass() {
        let parse = reply("{not json").expect("a reply");
        assert_eq!(parse["error"]["code"], -32700);
        assert_eq!(parse["id"], Value::Null);
        let params = reply(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"bash","arguments":[1]}}"#,
        )
        .expect("a reply");
        assert_eq!(params["error"]["code"], -32602);
        assert_eq!(params["id"], 7);
        assert!(
            reply(r#"{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"bash","arguments":{}}}"#)
                .is_none()
        );
        assert!(reply(r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#).is_none());
        assert!(matches!(check(b"  \n"), Verdict::Skip));
    }
}
