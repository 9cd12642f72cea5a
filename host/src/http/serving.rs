//! One HTTP listener: bound before the host starts (a taken port is an error at start, not later),
//! then served until dropped: each connection on a task of its own ([`super::connection`]), at most
//! `max_connections` at once, and what each principal holds of it bounded ([`super::bounds`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_rustls::TlsAcceptor;

use super::address::HttpAddress;
use super::auth::{Gate, metadata, require_bearer};
use super::authority::Authorities;
use super::bounds::{Bounds, DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL};
use super::connection::{Timeouts, serve_connection};
use super::section::HttpSection;
use super::sessions::{DEFAULT_MAX_SESSIONS, DEFAULT_PARK_AFTER, Sessions};
use crate::Taskhost;
use crate::mcp::{McpSession, Peers, PrincipalOwners};

/// The largest request body accepted when `[http] max_body_bytes` is not set.
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;

/// How many connections are served at once when `[http] max_connections` is not set.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// A bound HTTP listener.
pub struct HttpListener {
    listener: std::net::TcpListener,
    address: HttpAddress,
    tls: Option<TlsAcceptor>,
}

impl HttpListener {
    /// Binds `address` (or serves on `inherited`, the listening socket a predecessor of this host
    /// bound there); with `tls` (a certificate chain and its key, PEM) it serves HTTPS. A
    /// non-loopback address without TLS is refused unless `insecure` (tokens would cross the
    /// network in the clear).
    ///
    /// # Errors
    /// The refusal, a bad certificate or key, or a failed bind, naming the address.
    pub fn bind(
        address: HttpAddress,
        tls: Option<(PathBuf, PathBuf)>,
        insecure: bool,
        inherited: Option<std::net::TcpListener>,
    ) -> Result<Self, String> {
        if !address.is_loopback() && tls.is_none() && !insecure {
            return Err(format!(
                "refusing plain HTTP on {}, which other machines can reach: bearer tokens would cross the network in the clear; give --tls-cert and --tls-key, or --insecure-http behind a proxy that terminates TLS",
                address.addr
            ));
        }
        let tls = tls
            .map(|(cert, key)| super::tls::acceptor(&cert, &key))
            .transpose()?;
        let listener = match inherited {
            Some(listener) => listener,
            None => std::net::TcpListener::bind(address.addr)
                .map_err(|e| format!("cannot listen on {}: {e}", address.addr))?,
        };
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("cannot listen on {}: {e}", address.addr))?;
        Ok(Self {
            listener,
            address,
            tls,
        })
    }

    /// The listener's origin: scheme, host as given, and the port bound (the one chosen for port 0).
    pub fn origin(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}:{}", self.address.host, self.port())
    }

    /// The port bound.
    fn port(&self) -> u16 {
        self.listener
            .local_addr()
            .map_or(self.address.addr.port(), |a| a.port())
    }

    /// The `Host` values it answers to, with `[http] allowed_hosts`.
    fn authorities(&self, section: &HttpSection) -> Authorities {
        Authorities::of(&self.address.host, self.port(), &section.allowed_hosts)
    }

    /// A second handle of the listening socket (for a handover).
    pub fn duplicate(&self) -> Option<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        self.listener.as_fd().try_clone_to_owned().ok()
    }

    /// The URL of its MCP endpoint.
    pub fn url(&self) -> String {
        format!("{}/mcp", self.origin())
    }
}

/// What every HTTP listener of a host serves.
#[derive(Clone)]
pub struct HttpServing {
    /// The host.
    pub host: Arc<Taskhost>,
    /// Who is told of tool changes.
    pub peers: Peers,
    /// The principals' owners.
    pub owners: Arc<PrincipalOwners>,
    /// Where tokens are checked.
    pub lookup: Arc<taskhost_store::PrincipalLookup>,
    /// `[http]`.
    pub section: HttpSection,
}

impl HttpServing {
    /// rmcp's service configuration for `listener` (of `origin`): the hosts and origins it accepts.
    fn mcp_config(&self, listener: &HttpListener, origin: &str) -> StreamableHttpServerConfig {
        let hosts = listener.authorities(&self.section).names_at_any_port();
        let mut origins = vec![origin.to_owned()];
        if listener.address.is_loopback() {
            // Pages of this machine, on any port (a local proxy or dev server in front): a page can
            // send no bearer token it was not given, so the check is against pages of other sites
            // reaching a loopback listener through a rebound name.
            for scheme in ["http", "https"] {
                for name in ["localhost", "127.0.0.1", "[::1]"] {
                    origins.push(format!("{scheme}://{name}:*"));
                }
            }
        }
        origins.extend(self.section.allowed_origins.iter().cloned());
        // No SSE priming event (an event with an id and no data, for SEP-1699 resumption): Gemini
        // CLI 0.61's client parses its empty data as JSON and drops its connection.
        StreamableHttpServerConfig::default()
            .with_sse_retry(None)
            .with_allowed_hosts(hosts)
            .with_allowed_origins(origins)
            .enforce_origin_validation()
            .with_max_request_body_bytes(
                self.section
                    .max_body_bytes
                    .unwrap_or(DEFAULT_MAX_BODY_BYTES),
            )
    }

    /// A listener's legacy sessions, capped and parked as `[http]` says.
    fn sessions(&self) -> Arc<Sessions> {
        Sessions::new(
            self.section
                .max_sessions_per_principal
                .unwrap_or(DEFAULT_MAX_SESSIONS),
            self.section
                .session_park_ms
                .map_or(DEFAULT_PARK_AFTER, Duration::from_millis),
        )
    }

    /// rmcp's service at `/mcp`: a handler per session (or per 2026-07-28 request), `sessions`
    /// run in the MCP `layer`.
    fn mcp_service(
        &self,
        sessions: Arc<Sessions>,
        layer: crate::mcp::Layer,
        config: StreamableHttpServerConfig,
    ) -> StreamableHttpService<McpSession, super::layer::LayeredSessions> {
        let (host, peers, owners) = (self.host.clone(), self.peers.clone(), self.owners.clone());
        StreamableHttpService::new(
            move || {
                Ok(McpSession::for_http(
                    host.clone(),
                    peers.clone(),
                    owners.clone(),
                ))
            },
            Arc::new(super::layer::LayeredSessions { sessions, layer }),
            config,
        )
    }

    /// The routes of one listener: `/mcp` behind the gate, and the metadata at the resource's
    /// well-known path (and at the bare one, for clients that look there).
    fn router(&self, listener: &HttpListener) -> Router {
        let origin = listener.origin();
        let sessions = self.sessions();
        let mut config = self.mcp_config(listener, &origin);
        // Where a parked session's `initialize` is kept, for rmcp to restore it.
        config.session_store = Some(sessions.clone());
        let bounds = Bounds::new(
            sessions.clone(),
            super::routes::MAX_STREAMS,
            self.section
                .max_connections_per_principal
                .unwrap_or(DEFAULT_MAX_CONNECTIONS_PER_PRINCIPAL),
            self.owners.revoked(),
        );
        let layer = crate::mcp::Layer::new(self.host.clone(), self.peers.tasks().clone());
        let service = self.mcp_service(sessions.clone(), layer.clone(), config);
        let resource = listener.url();
        let well_known = format!("{origin}/.well-known/oauth-protected-resource/mcp");
        let document = metadata(&resource, &self.section.authorization_servers);
        let gate = Gate {
            lookup: self.lookup.clone(),
            policies: self.host.services().policies.clone(),
            metadata_url: well_known.into(),
            bounds,
            max_body_bytes: self
                .section
                .max_body_bytes
                .unwrap_or(DEFAULT_MAX_BODY_BYTES),
        };
        let serve_document = move || {
            let document = document.clone();
            async move { axum::Json(document) }
        };
        let front = super::layer::LayerHttp::new(
            layer,
            self.owners.clone(),
            sessions,
            self.section
                .max_body_bytes
                .unwrap_or(DEFAULT_MAX_BODY_BYTES),
        );
        // Layers run outside in: the gate first, then the MCP layer's in side, then rmcp.
        Router::new()
            .route_service("/mcp", service)
            .route_layer(axum::middleware::from_fn_with_state(
                front,
                super::layer::layer,
            ))
            .route_layer(axum::middleware::from_fn_with_state(gate, require_bearer))
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                get(serve_document.clone()),
            )
            .route("/.well-known/oauth-protected-resource", get(serve_document))
            .fallback(super::routes::serve)
            .with_state(super::routes::Routes::new(super::routes::RoutesOf {
                host: self.host.clone(),
                owners: self.owners.clone(),
                lookup: self.lookup.clone(),
                max_body_bytes: self
                    .section
                    .max_body_bytes
                    .unwrap_or(DEFAULT_MAX_BODY_BYTES),
                tls: listener.tls.is_some(),
                authorities: listener.authorities(&self.section),
            }))
    }
}

/// Serves `listener` until the future is dropped.
///
/// # Errors
/// When the listener cannot be handed to the runtime.
///
/// # Cancel safety
/// Dropping the future stops accepting; connections already open go on until they close.
pub async fn serve_http(serving: HttpServing, listener: HttpListener) -> Result<(), String> {
    let router = serving.router(&listener);
    let url = listener.url();
    let tcp = tokio::net::TcpListener::from_std(
        listener
            .listener
            .try_clone()
            .map_err(|e| format!("{url}: {e}"))?,
    )
    .map_err(|e| format!("{url}: {e}"))?;
    let timeouts = Timeouts::of(&serving.section);
    let limit = Arc::new(tokio::sync::Semaphore::new(
        serving
            .section
            .max_connections
            .unwrap_or(DEFAULT_MAX_CONNECTIONS)
            .max(1),
    ));
    loop {
        let Ok(permit) = limit.clone().acquire_owned().await else {
            return Ok(());
        };
        let stream = match tcp.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of descriptors, or a connection reset before it was accepted: the next one
                // may do; wait a moment so a persistent failure does not spin.
                tracing::warn!(error = %e, %url, "accepting an HTTP connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let (router, tls) = (router.clone(), listener.tls.clone());
        tokio::spawn(async move {
            let _permit = permit;
            serve_connection(router, stream, tls, timeouts).await;
        });
    }
}
