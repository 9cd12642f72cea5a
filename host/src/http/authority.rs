//! The authorities (`Host` values) a listener answers to: its own address and the loopback names
//! at its port, and those `[http] allowed_hosts` adds. A page of another site that reached a
//! loopback listener by rebinding its own name to `127.0.0.1` sends that name as `Host`, and is
//! refused. The plugins' routes check them here; `/mcp` gets the same names from rmcp's check, at
//! any port: MCP clients on this machine reach it through local proxies on ports of their own (the
//! conformance suite does).

use axum::http::uri::Authority;
use axum::http::{HeaderMap, Uri, header};

/// The `Host` values a listener accepts: its own names at its port, and `[http] allowed_hosts`
/// as given (`name:port`, or a bare `name` for any port, for a proxy in front).
#[derive(Clone, Debug)]
pub(super) struct Authorities {
    own: Vec<String>,
    configured: Vec<String>,
}

/// The names every listener answers to besides its listen host.
const LOOPBACK_NAMES: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

impl Authorities {
    /// The authorities of a listener on `listen_host` (as given to `--listen`) bound at `port`,
    /// with `configured` (`[http] allowed_hosts`).
    pub(super) fn of(listen_host: &str, port: u16, configured: &[String]) -> Self {
        let own = LOOPBACK_NAMES
            .into_iter()
            .chain([listen_host])
            .map(|name| format!("{name}:{port}"))
            .collect();
        Self {
            own,
            configured: configured.to_vec(),
        }
    }

    /// The names, at any port, as rmcp's `allowed_hosts` takes them for `/mcp`.
    pub(super) fn names_at_any_port(&self) -> Vec<String> {
        self.own
            .iter()
            .filter_map(|a| a.rsplit_once(':').map(|(name, _)| name.to_owned()))
            .chain(self.configured.iter().cloned())
            .collect()
    }

    /// True when the request's `Host` (or, over HTTP/2, its URI's authority) is one of them.
    pub(super) fn allow(&self, headers: &HeaderMap, uri: &Uri) -> bool {
        let presented = match headers.get(header::HOST) {
            Some(value) => value
                .to_str()
                .ok()
                .and_then(|v| v.parse::<Authority>().ok()),
            None => uri.authority().cloned(),
        };
        let Some(presented) = presented else {
            return false;
        };
        let (host, port) = (bare(presented.host()), presented.port_u16());
        self.own.iter().chain(&self.configured).any(|allowed| {
            allowed.parse::<Authority>().is_ok_and(|a| {
                bare(a.host()) == host && a.port_u16().is_none_or(|p| port == Some(p))
            })
        })
    }
}

/// A host name as compared: lower case, an IPv6 address without its brackets.
fn bare(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::Authorities;
    use axum::http::{HeaderMap, HeaderValue, Uri, header};

    fn allows(authorities: &Authorities, host: &str) -> bool {
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_str(host).unwrap());
        authorities.allow(&headers, &Uri::from_static("/"))
    }

    #[test]
    fn a_listener_answers_to_its_own_names_at_its_own_port_only() {
        let own = Authorities::of("127.0.0.1", 8765, &["build.example.com".to_owned()]);
        for host in [
            "127.0.0.1:8765",
            "LOCALHOST:8765",
            "[::1]:8765",
            "build.example.com",
            "build.example.com:443",
        ] {
            assert!(allows(&own, host), "{host}");
        }
        for host in [
            "evil.example:8765",
            "127.0.0.1:8766",
            "127.0.0.1",
            "localhost.evil.example:8765",
            "",
            "127.0.0.1:8765/x",
        ] {
            assert!(!allows(&own, host), "{host}");
        }
        let none = HeaderMap::new();
        assert!(own.allow(&none, &Uri::from_static("http://localhost:8765/")));
        assert!(!own.allow(&none, &Uri::from_static("/")));
        assert_eq!(
            own.names_at_any_port(),
            [
                "localhost",
                "127.0.0.1",
                "[::1]",
                "127.0.0.1",
                "build.example.com"
            ]
        );
    }
}
