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
