//! What `serve --listen` binds: at most one Unix socket and any number of HTTP addresses, all bound
//! before the host starts (a path or port that is not ours to take is an error at start), then
//! served side by side until the host stops.

use std::path::PathBuf;
use std::sync::Arc;

use crate::Taskhost;
use crate::http::{HttpAddress, HttpListener, HttpSection, HttpServing};
use crate::listen::{BoundSocket, PeerPolicy};
use crate::mcp::{self, Peers, PrincipalOwners};

/// The bound listeners; none means stdio.
#[derive(Default)]
pub(super) struct Listeners {
    pub(super) socket: Option<BoundSocket>,
    pub(super) http: Vec<HttpListener>,
}

/// How the HTTP listeners secure their connections.
pub(super) struct TlsChoice {
    pub(super) cert: Option<PathBuf>,
    pub(super) key: Option<PathBuf>,
    pub(super) insecure: bool,
}

impl Listeners {
    /// Binds every `--listen` spec: `unix:PATH` (once) or `http://HOST:PORT`. A socket a predecessor
    /// handed over comes first, then one systemd passed (socket activation), then a new bind.
    ///
    /// # Errors
    /// A bad spec, a second `unix:`, TLS half given, or a bind refused, as one message.
    pub(super) fn bind(
        specs: &[String],
        tls: &TlsChoice,
        mut inherited: std::collections::HashMap<String, std::os::fd::OwnedFd>,
    ) -> Result<Self, String> {
        let tls_files = match (&tls.cert, &tls.key) {
            (Some(cert), Some(key)) => Some((cert.clone(), key.clone())),
            (None, None) => None,
            _ => return Err("--tls-cert and --tls-key go together".to_owned()),
        };
        let mut bound = Self::default();
        for spec in specs {
            if spec.starts_with("unix:") {
                if bound.socket.is_some() {
                    return Err(format!("a second unix: listener ({spec}); give one"));
                }
                let path = unix_path(spec)?;
                let handed = inherited
                    .remove(&super::handover::normalized(spec))
                    .and_then(|fd| BoundSocket::inherit(&path, fd.into()).ok());
                let socket = match handed {
                    Some(socket) => socket,
                    None => match super::activation::socket_for(&path)? {
                        Some(listener) => BoundSocket::activated(&path, listener),
                        None => BoundSocket::bind(&path),
                    }
                    .map_err(|e| e.to_string())?,
                };
                bound.socket = Some(socket);
            } else {
                let address = HttpAddress::parse(spec)?;
                let handed = inherited
                    .remove(&super::handover::normalized(spec))
                    .map(std::net::TcpListener::from);
                bound.http.push(HttpListener::bind(
                    address,
                    tls_files.clone(),
                    tls.insecure,
                    handed,
                )?);
            }
        }
        if tls_files.is_some() && bound.http.is_empty() {
            return Err("--tls-cert and --tls-key need an http:// listener".to_owned());
        }
        Ok(bound)
    }

    /// Second handles of every listening socket by its normalized address, for the keeper to keep
    /// for a successor (before [`Listeners::serve`] takes them).
    pub(super) fn duplicates(&self, specs: &[String]) -> Vec<(String, std::os::fd::OwnedFd)> {
        let mut http = self.http.iter();
        specs
            .iter()
            .filter_map(|spec| {
                let fd = match spec.starts_with("unix:") {
                    true => self.socket.as_ref()?.duplicate(),
                    false => http.next()?.duplicate(),
                }?;
                Some((super::handover::normalized(spec), fd))
            })
            .collect()
    }

    /// Each place the host listens, as a client dials it (`unix:PATH`, `http://HOST:PORT/mcp`);
    /// `stdio` when nothing was bound.
    pub(super) fn addresses(&self) -> Vec<String> {
        if self.is_stdio() {
            return vec!["stdio".to_owned()];
        }
        let socket = self
            .socket
            .iter()
            .map(|s| format!("unix:{}", s.path().display()));
        socket
            .chain(self.http.iter().map(HttpListener::url))
            .collect()
    }

    /// True when nothing was bound: the host serves stdio.
    pub(super) fn is_stdio(&self) -> bool {
        self.socket.is_none() && self.http.is_empty()
    }

    /// Serves every listener (stdio when there is none) until one fails or, for stdio, the client
    /// leaves. HTTP needs the durable state (its tokens live there).
    ///
    /// # Errors
    /// No state for an HTTP listener, or a listener that failed.
    pub(super) async fn serve(
        &mut self,
        host: Arc<Taskhost>,
        peers: Peers,
        policy: PeerPolicy,
        section: HttpSection,
    ) -> Result<(), String> {
        if self.is_stdio() {
            return mcp::serve_stdio(host, peers).await;
        }
        let mut served = tokio::task::JoinSet::new();
        if !self.http.is_empty() {
            let state = host.services().state.clone().ok_or(
                "an HTTP listener needs the durable state, where its tokens live: drop --no-state (or [state] durable = false)",
            )?;
            let lookup = Arc::new(state.principal_lookup().map_err(|e| e.to_string())?);
            let owners = PrincipalOwners::new(host.clone());
            owners.end_revoked(state);
            let serving = HttpServing {
                host: host.clone(),
                peers: peers.clone(),
                owners,
                lookup,
                section,
            };
            for listener in self.http.drain(..) {
                eprintln!("taskhost: MCP over HTTP at {}", listener.url());
                served.spawn(crate::http::serve_http(serving.clone(), listener));
            }
        }
        if let Some(socket) = &mut self.socket {
            let listener = socket.take_listener().map_err(|e| e.to_string())?;
            served.spawn(mcp::serve_unix(host, peers, listener, policy));
        }
        match served.join_next().await {
            Some(Ok(result)) => result,
            Some(Err(e)) => Err(format!("a listener stopped: {e}")),
            None => Ok(()),
        }
    }
}

/// `unix:PATH` as a path; `unix:` alone is the default socket, `$XDG_RUNTIME_DIR/taskhost.sock`.
///
/// # Errors
/// The spec without its `unix:` prefix, `unix:` with no runtime directory, a socket directly in
/// `/` ([`crate::terminal::AddressError`]), named.
pub fn unix_path(spec: &str) -> Result<PathBuf, String> {
    let path = spec
        .strip_prefix("unix:")
        .ok_or_else(|| format!("expected unix:PATH, got {spec}"))?;
    crate::terminal::address::socket_path(path).map_err(|e| e.to_string())
}
