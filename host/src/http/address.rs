//! `http://HOST:PORT` as `--listen` takes it.

use std::net::{SocketAddr, ToSocketAddrs};

/// An HTTP listen address: the host as written (for the URLs the listener names) and the socket
/// address it resolves to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpAddress {
    /// The host as written: an IP address (IPv6 in brackets) or a name.
    pub host: String,
    /// Where to bind (port 0: any free port).
    pub addr: SocketAddr,
}

impl HttpAddress {
    /// Parses `http://HOST:PORT` (a trailing `/` allowed; no other path).
    ///
    /// # Errors
    /// What is wrong with `spec`, naming it.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let bad = |why: &str| format!("bad --listen {spec}: {why}");
        let rest = spec
            .strip_prefix("http://")
            .ok_or_else(|| bad("expected unix:PATH or http://HOST:PORT"))?;
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains('/') {
            return Err(bad("MCP is served at /mcp; give no path"));
        }
        let (host, port) = authority
            .rsplit_once(':')
            .ok_or_else(|| bad("no port (http://127.0.0.1:8080)"))?;
        let port: u16 = port.parse().map_err(|_| bad("the port is not a number"))?;
        if host.is_empty() {
            return Err(bad("no host"));
        }
        let bare = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let addr = (bare, port)
            .to_socket_addrs()
            .map_err(|e| bad(&format!("cannot resolve {host}: {e}")))?
            .next()
            .ok_or_else(|| bad(&format!("{host} resolves to no address")))?;
        Ok(Self {
            host: host.to_owned(),
            addr,
        })
    }

    /// True for an address only this machine can reach.
    pub fn is_loopback(&self) -> bool {
        self.addr.ip().is_loopback()
    }
}

#[cfg(test)]
mod tests {
    use super::HttpAddress;

    #[test]
    fn an_address_is_http_host_and_port_without_a_path() {
        let a = HttpAddress::parse("http://127.0.0.1:8080").expect("parses");
        assert_eq!(a.addr.port(), 8080);
        assert!(a.is_loopback());
        assert!(HttpAddress::parse("http://[::1]:0/").is_ok_and(|a| a.is_loopback()));
        assert!(HttpAddress::parse("http://0.0.0.0:1").is_ok_and(|a| !a.is_loopback()));
        for bad in [
            "127.0.0.1:80",
            "http://127.0.0.1",
            "http://127.0.0.1:x",
            "http://127.0.0.1:80/mcp",
            "http://:80",
        ] {
            assert!(HttpAddress::parse(bad).is_err(), "{bad}");
        }
    }
}
