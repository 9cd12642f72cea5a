//! One accepted connection, served until it closes: HTTP/1.1 or HTTP/2, in TLS when the listener
//! has a certificate. A connection that has not sent a whole request head within the header timeout
//! of its accept (TLS handshake included) is closed: silent ones no longer hold one of the
//! listener's places for ever (hyper's own header timeout starts only once HTTP/1 is chosen, and the
//! choice waits for bytes). Each request body must arrive within the body timeout of its head, or
//! reading it fails, the request is refused and the connection closed.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use hyper::body::{Frame, Incoming, SizeHint};
use hyper::service::Service as _;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;

use super::bounds::ConnectionClaims;
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

/// Serves one connection until it closes, or until the header timeout when no request came.
pub(super) async fn serve_connection(
    router: Router,
    stream: tokio::net::TcpStream,
    tls: Option<TlsAcceptor>,
    timeouts: Timeouts,
) {
    let deadline = Instant::now() + timeouts.header;
    let requested = Arc::new(AtomicBool::new(false));
    let claims = ConnectionClaims::default();
    let inner = TowerToHyperService::new(router);
    let seen = requested.clone();
    let service = hyper::service::service_fn(move |request: hyper::Request<Incoming>| {
        seen.store(true, Ordering::Relaxed);
        let mut request = request.map(|body| TimedBody {
            body,
            deadline: Box::pin(tokio::time::sleep(timeouts.body)),
        });
        request.extensions_mut().insert(claims.clone());
        inner.call(request)
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.header);
    let served = match tls {
        Some(acceptor) => match tokio::time::timeout_at(deadline, acceptor.accept(stream)).await {
            Ok(Ok(stream)) => {
                let connection =
                    builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                until_first_request(connection, deadline, &requested).await
            }
            Ok(Err(e)) => {
                tracing::debug!(error = %e, "a TLS handshake failed");
                return;
            }
            Err(_) => return,
        },
        None => {
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            until_first_request(connection, deadline, &requested).await
        }
    };
    if let Some(Err(e)) = served {
        tracing::debug!(error = %e, "an HTTP connection ended with an error");
    }
}

/// Runs `connection` to its end; `None` when it was dropped at `deadline` without a request.
async fn until_first_request<F: Future>(
    connection: F,
    deadline: Instant,
    requested: &AtomicBool,
) -> Option<F::Output> {
    let mut connection = std::pin::pin!(connection);
    match tokio::time::timeout_at(deadline, connection.as_mut()).await {
        Ok(served) => Some(served),
        Err(_) if requested.load(Ordering::Relaxed) => Some(connection.await),
        Err(_) => None,
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
