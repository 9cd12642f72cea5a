//! [`Layered`]: an rmcp transport whose outgoing messages pass the layer.

use std::borrow::Cow;
use std::sync::Arc;

use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::{Layer, Negotiated};

/// rmcp's transport `T` for one session: what rmcp sends passes [`Layer::outbound`] first;
/// what it receives comes as `T` gives it.
pub struct Layered<T> {
    inner: T,
    layer: Layer,
    negotiated: Arc<Negotiated>,
}

impl<T> Layered<T> {
    /// `inner`, for a session that `negotiated`.
    pub(super) fn new(inner: T, layer: Layer, negotiated: Arc<Negotiated>) -> Self {
        Self {
            inner,
            layer,
            negotiated,
        }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for Layered<T> {
    type Error = T::Error;

    fn name() -> Cow<'static, str> {
        T::name()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let item = self.layer.outbound(&self.negotiated, item);
        self.inner.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleServer>>> + Send {
        self.inner.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
