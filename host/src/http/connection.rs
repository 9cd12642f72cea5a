//! One accepted connection, served until it closes: HTTP/1.1 or HTTP/2, in TLS when the listener
//! has a certificate. A connection with no request in progress (from the service's call until its
//! response body is finished or dropped) for the header timeout is closed, from its accept (TLS
//! handshake included) and between requests, HTTP/1 keep-alive and HTTP/2 alike: silent ones, and
//! HTTP/2 ones holding a request head that never ends, no longer hold one of the listener's places
//! for ever. An HTTP/2 connection has at most 32 requests in progress at once. Each request body must arrive within the body timeout of its head, or
//! reading it fails, the request is refused and the connection closed.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::service::Service as _;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use hyper_util::service::TowerToHyperService;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::bounds::ConnectionClaims;
use super::guarded::Guarded;
use super::section::HttpSection;

/// How long a connection may take to send a request head when `[http] header_timeout_ms` is not set.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a request body may take to arrive when `[http] body_timeout_ms` is not set.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// The time limits of a connection.
#[derive(Clone, Copy)]
pub(super) struct Timeouts {
    header: Duration,
    body: Duration,
}

impl Timeouts {
    /// The limits `section` sets, or the defaults.
    pub(super) fn of(section: &HttpSection) -> Self {
        Self {
            header: section
                .header_timeout_ms
                .map_or(DEFAULT_HEADER_TIMEOUT, Duration::from_millis),
            body: section
                .body_timeout_ms
                .map_or(DEFAULT_BODY_TIMEOUT, Duration::from_millis),
        }
    }
}

/// Serves one connection until it closes, or until it was idle (no request in progress) for the
/// header timeout.
pub(super) async fn serve_connection(
    router: Router,
    stream: tokio::net::TcpStream,
    tls: Option<TlsAcceptor>,
    timeouts: Timeouts,
) {
    let deadline = Instant::now() + timeouts.header;
    let busy = InProgress::default();
    let claims = ConnectionClaims::default();
    let inner = TowerToHyperService::new(router);
    let counted = busy.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        let working = counted.enter();
        let mut request = request.map(|body| TimedBody {
            body,
            deadline: Box::pin(tokio::time::sleep(timeouts.body)),
        });
        request.extensions_mut().insert(claims.clone());
        let answered = inner.call(request);
        async move {
            let response = answered.await?;
            Ok::<_, std::convert::Infallible>(
                response.map(|body| Body::new(Guarded::new(body, working))),
            )
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.header);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION);
    let served = match tls {
        Some(acceptor) => match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
            Ok(Ok(stream)) => {
                let connection =
                    builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                until_idle(connection, timeouts.header, &busy).await
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "a TLS handshake failed");
                return;
            }
            Err(_) => return,
        },
        None => {
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            until_idle(connection, timeouts.header, &busy).await
        }
    };
    if let Some(Err(e)) = served {
        tracing::debug!(error = %e, "an HTTP connection ended with an error");
    }
}

/// How many requests one HTTP/2 connection may have in progress at once.
const MAX_STREAMS_PER_CONNECTION: u32 = 32;

/// Runs `connection` to its end, or until it was idle for `idle`: then it is shut down gracefully
/// (HTTP/2's `GOAWAY`), and dropped if it is not closed within `idle` more. `None` when dropped.
async fn until_idle<F: GracefulConnection>(
    connection: F,
    idle: Duration,
    busy: &InProgress,
) -> Option<F::Output> {
    let mut connection = std::pin::pin!(connection);
    let mut working = busy.0.subscribe();
    loop {
        let quiet = *working.borrow_and_update() == 0;
        tokio::select! {
            served = connection.as_mut() => return Some(served),
            changed = working.changed() => {
                if changed.is_err() {
                    break;
                }
            }
            () = tokio::time::sleep(idle), if quiet => break,
        }
    }
    connection.as_mut().graceful_shutdown();
    tokio::time::timeout(idle, connection).await.ok()
}

/// How many requests one connection has in progress: each from the service's call until its
/// response body is finished or dropped.
#[derive(Clone, Default)]
struct InProgress(Arc<tokio::sync::watch::Sender<usize>>);

impl InProgress {
    /// One more request in progress, until the guard drops.
    fn enter(&self) -> Working {
        self.0.send_modify(|n| *n += 1);
        Working(self.0.clone())
    }
}

/// One request in progress.
struct Working(Arc<tokio::sync::watch::Sender<usize>>);

impl Drop for Working {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// A request body that fails once its deadline passes before its end.
struct TimedBody {
    body: Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

/// Why a request body was not read.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
struct BodyTimedOut;

/// Reads a request body of at most `limit` bytes; a refusal says why it was not read: 408 when it
/// did not arrive within the body timeout, 413 when it was larger.
pub(super) async fn read_body(body: axum::body::Body, limit: usize) -> Result<Bytes, Response> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(error) = cause {
            if error.is::<BodyTimedOut>() {
                return (
                    StatusCode::REQUEST_TIMEOUT,
                    "the request body did not arrive in time",
                )
                    .into_response();
            }
            cause = error.source();
        }
        (
            StatusCode::PAYLOAD_TOO_LARGE,
            "the request body is too large",
        )
            .into_response()
    })
}

impl hyper::body::Body for TimedBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(Into::into))),
            Poll::Pending if self.deadline.as_mut().poll(cx).is_ready() => {
                Poll::Ready(Some(Err(BodyTimedOut.into())))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }
}
