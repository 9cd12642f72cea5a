//! A client command's MCP session with its host, as the person at the terminal: over the host's
//! socket with the person's hello ([`crate::mcp::person`]), or over HTTP as the principal its token
//! names (an owner that outlives the command either way, so a task one command starts is there
//! for the next).
//!
//! rmcp's HTTP client speaks through a Unix socket; an `http://` host is reached through a relay this
//! process serves on an abstract socket with a random name, which admits only this user and
//! carries each connection to the host's TCP address as it is (the token never passes through
//! anything but this process and the host).

use std::path::Path;

use rmcp::ServiceExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::address::Address;
use crate::mcp::person::{PERSON_HELLO, PERSON_WELCOMED};

/// A client command's session.
pub type Client = rmcp::service::RunningService<rmcp::RoleClient, ()>;

/// The host a command talks to, and whom it trusts to serve it.
#[derive(Clone, Debug)]
pub struct Target {
    /// Where the host is.
    pub address: Address,
    /// Server uids trusted besides this user and root (a socket's server).
    pub allowed_server_uids: Vec<u32>,
}

impl Target {
    /// The address as people read it.
    pub fn shown(&self) -> String {
        match &self.address {
            Address::Unix(path) => format!("unix:{}", path.display()),
            Address::Http { url, .. } => url.clone(),
        }
    }
}

/// Opens a session with the host as the person (the user's owner on a socket, the token's
/// principal over HTTP).
///
/// # Errors
/// The host cannot be reached, is not trusted, did not welcome the person, or the MCP handshake
/// failed; one message naming the address.
pub async fn open(target: &Target) -> Result<Client, String> {
    match &target.address {
        Address::Unix(path) => open_socket(path, &target.allowed_server_uids).await,
        Address::Http { url, token } => open_http(url, token).await,
    }
}

async fn open_socket(path: &Path, allowed: &[u32]) -> Result<Client, String> {
    let mut stream = crate::dial::dial(path, allowed)
        .await
        .map_err(|e| e.to_string())?;
    let closed = format!(
        "{}: the host closed the connection before its welcome (a host refuses users other than its own unless started with --allow-uid)",
        path.display()
    );
    let at = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe => closed.clone(),
        _ => format!("{}: {e}", path.display()),
    };
    stream
        .write_all(PERSON_HELLO.as_bytes())
        .await
        .map_err(at)?;
    let welcome = read_line(&mut stream).await.map_err(at)?;
    if welcome.is_empty() {
        return Err(closed);
    }
    if !welcome.starts_with(crate::owners::WELCOME) {
        return Err(format!(
            "{}: the host did not welcome this command (an older taskhost?)",
            path.display()
        ));
    }
    if !welcome
        .split_ascii_whitespace()
        .any(|w| w == PERSON_WELCOMED)
    {
        return Err(format!(
            "{}: the host does not serve a person's commands (an older taskhost?)",
            path.display()
        ));
    }
    ().serve(stream)
        .await
        .map_err(|e| format!("MCP handshake with {} failed: {e}", path.display()))
}

/// The welcome line, read a byte at a time: what follows it is MCP and stays in the socket.
async fn read_line(stream: &mut tokio::net::UnixStream) -> std::io::Result<String> {
    let mut line = Vec::new();
    while line.len() < crate::owners::MAX_WELCOME && line.last() != Some(&b'\n') {
        let mut byte = [0u8; 1];
        if stream.read(&mut byte).await? == 0 {
            break;
        }
        line.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&line).into_owned())
}

async fn open_http(url: &str, token: &str) -> Result<Client, String> {
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    use rmcp::transport::{StreamableHttpClientTransport, UnixSocketHttpClient};
    let authority = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split('/').next())
        .unwrap_or_default()
        .to_owned();
    let relay = relay(authority).map_err(|e| format!("{url}: cannot start its relay: {e}"))?;
    let client = UnixSocketHttpClient::new(&relay, url);
    let config = StreamableHttpClientTransportConfig::with_uri(url).auth_header(token);
    let transport = StreamableHttpClientTransport::with_client(client, config);
    ().serve(transport)
        .await
        .map_err(|e| format!("MCP handshake with {url} failed: {e}"))
}

/// Serves the relay to `authority` on a new abstract socket until the process ends; its name in
/// rmcp's `@name` form.
fn relay(authority: String) -> std::io::Result<String> {
    use std::os::linux::net::SocketAddrExt;
    let mut random = [0u8; 16];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut random)?;
    let hex: String = random.iter().map(|b| format!("{b:02x}")).collect();
    let name = format!("taskhost-client-{}-{hex}", std::process::id());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    let listener = std::os::unix::net::UnixListener::bind_addr(&address)?;
    listener.set_nonblocking(true)?;
    let listener = tokio::net::UnixListener::from_std(listener)?;
    let me = crate::rundir::euid();
    tokio::spawn(async move {
        while let Ok((mut local, _)) = listener.accept().await {
            if local.peer_cred().map(|c| c.uid()).ok() != Some(me) {
                continue;
            }
            let authority = authority.clone();
            tokio::spawn(async move {
                if let Ok(mut remote) = tokio::net::TcpStream::connect(authority.as_str()).await {
                    let _ = tokio::io::copy_bidirectional(&mut local, &mut remote).await;
                }
            });
        }
    });
    Ok(format!("@{name}"))
}
