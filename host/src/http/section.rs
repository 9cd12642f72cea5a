//! `[http]` in the config file.

/// `[http]`: what the HTTP listeners accept.
///
/// ```toml
/// [http]
/// allowed_hosts = ["build.example.com"]           # Host headers accepted besides the listen address and loopback names
/// allowed_origins = ["https://app.example.com:443"] # browser Origins accepted besides the listener's own
/// authorization_servers = ["https://auth.example.com"] # named in the metadata, for a team's OAuth front
/// max_body_bytes = 4194304                        # a larger request body gets 413
/// max_connections = 1024                          # connections past this wait to be accepted
/// header_timeout_ms = 10000                       # a connection with no request in progress for this long is closed
/// body_timeout_ms = 30000                         # a request body not all sent by then is refused, its connection closed
/// max_connections_per_principal = 256             # a principal's connections past this get 429
/// max_sessions_per_principal = 64                 # past this, the principal's oldest idle legacy session ends
/// session_park_ms = 30000                         # a legacy session with nothing open this long leaves memory until its next request
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
    /// How long a connection may go with no request in progress, from its accept or its last
    /// answer (default 10 s).
    pub header_timeout_ms: Option<u64>,
    /// How long a request body may take to arrive, from its head (default 30 s).
    pub body_timeout_ms: Option<u64>,
    /// How many connections one principal's requests may hold at once (default 256).
    pub max_connections_per_principal: Option<usize>,
    /// How many legacy sessions one principal may hold (default 64).
    pub max_sessions_per_principal: Option<usize>,
    /// How long a legacy session may go with no request or stream open before it is parked: its
    /// handler and rmcp's worker end, and its next request restores them (default 30 s).
    pub session_park_ms: Option<u64>,
}
