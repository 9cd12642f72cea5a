//! The authorities (`Host` values) a listener answers to: its own address and the loopback names
//! at its port, and those `[http] allowed_hosts` adds. A page of another site that reached a
//! loopback listener by rebinding its own name to `127.0.0.1` sends that name as `Host`, and is
//! refused. `/mcp` gets the same list (rmcp checks it); the plugins' routes check it here.

use axum::http::uri::Authority;
use axum::http::{HeaderMap, Uri, header};

/// The `Host` values a listener accepts: `name:port`, or a bare `name` for any port (as
/// `allowed_hosts` may give it, for a proxy in front).
#[derive(Clone, Debug)]
pub(super) struct Authorities(Vec<String>);

impl Authorities {
    /// The authorities of a listener on `listen_host` (as given to `--listen`) bound at `port`,
    /// with `configured` (`[http] allowed_hosts`).
    pub(super) fn of(listen_host: &str, port: u16, configured: &[String]) -> Self {
        let mut names: Vec<String> = ["localhost", "127.0.0.1", "[::1]", listen_host]
            .into_iter()
            .map(|name| format!("{name}:{port}"))
            .collect();
        names.extend(configured.iter().cloned());
        Self(names)
    }

    /// The list, as rmcp's `allowed_hosts` takes it.
    pub(super) fn names(&self) -> &[String] {
        &self.0
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
        self.0.iter().any(|allowed| {
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
    }
}
