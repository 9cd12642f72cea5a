//! A response body that keeps what it holds (its request counted in progress, its principal's
//! places) until it is finished or dropped.

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use hyper::body::{Frame, SizeHint};
use tokio_util::sync::WaitForCancellationFutureOwned;

/// A response body that keeps `guard` (its request counted in progress, its principal's places)
/// until it is finished or dropped, and ends early once `ended`, when given, is cancelled.
pub(super) struct Guarded<G> {
    body: Body,
    _guard: G,
    ended: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
}

impl<G> Guarded<G> {
    /// `body`, keeping `guard` until it ends.
    pub(super) fn new(body: Body, guard: G) -> Self {
        Self {
            body,
            _guard: guard,
            ended: None,
        }
    }

    /// `body`, keeping `guard`, ending once `ended` is cancelled.
    pub(super) fn ending(body: Body, guard: G, ended: WaitForCancellationFutureOwned) -> Self {
        Self {
            body,
            _guard: guard,
            ended: Some(Box::pin(ended)),
        }
    }
}

impl<G: Unpin> hyper::body::Body for Guarded<G> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Some(ended) = self.ended.as_mut()
            && ended.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(None);
        }
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }
}
