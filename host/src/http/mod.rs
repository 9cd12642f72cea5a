//! MCP over Streamable HTTP (`serve --listen http://HOST:PORT`): rmcp's service at `/mcp`, both
//! protocol eras (a 2026-07-28 request is served on its own, statelessly; earlier versions get
//! sessions), behind a bearer-token gate that names each request's principal, the owner of the tasks
//! it starts (see [`crate::mcp::PrincipalOwners`]). The resource's RFC 9728 metadata is served at
//! its well-known path, and a refused request is told where to find it. Loopback addresses serve
//! plain HTTP; any other needs TLS (`--tls-cert`, `--tls-key`) or `--insecure-http`.

mod address;
mod auth;
mod serving;
mod tls;

pub use address::HttpAddress;
pub use serving::{HttpListener, HttpServing, serve_http};

/// `[http]`: what the HTTP listeners accept.
///
/// ```toml
/// [http]
/// allowed_hosts = ["build.example.com"]           # Host headers accepted besides the listen address and loopback names
/// allowed_origins = ["https://app.example.com:443"] # browser Origins accepted besides the listener's own
/// authorization_servers = ["https://auth.example.com"] # named in the metadata, for a team's OAuth front
/// max_body_bytes = 4194304                        # a larger request body gets 413
/// max_connections = 1024                          # connections past this wait to be accepted
/// ```
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSection {
    /// `Host` header values accepted besides the listen address's and the loopback names.
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// `Origin` header values accepted besides the listener's own origins; a request with any other
    /// `Origin` is refused (one without is not: only browsers send it).
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// Authorization servers named in the protected resource metadata.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// The largest request body accepted (default 4 MiB).
    pub max_body_bytes: Option<usize>,
    /// How many connections are served at once (default 1024).
    pub max_connections: Option<usize>,
}
