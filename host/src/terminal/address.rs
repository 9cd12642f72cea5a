//! Where a client command finds its host: `--connect`, else `$TASKHOST_CONNECT`, else the default
//! socket `$XDG_RUNTIME_DIR/taskhost.sock` (which `serve --listen unix:` binds too).

use std::path::PathBuf;

/// The variable that names the host of every client command without `--connect`.
pub const CONNECT_VAR: &str = "TASKHOST_CONNECT";
/// The variable that holds the bearer token for an `http://` host.
pub const TOKEN_VAR: &str = "TASKHOST_TOKEN";
/// The variable whose directory holds the default socket.
pub const RUNTIME_DIR_VAR: &str = "XDG_RUNTIME_DIR";
/// The default socket's name in `$XDG_RUNTIME_DIR`.
pub const SOCKET_NAME: &str = "taskhost.sock";

/// A host's address, as a client dials it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Address {
    /// `unix:PATH`: a socket of this machine.
    Unix(PathBuf),
    /// `http://HOST:PORT`: MCP Streamable HTTP at `/mcp`, with a bearer token.
    Http {
        /// The MCP endpoint, `.../mcp`.
        url: String,
        /// The bearer token (`$TASKHOST_TOKEN`).
        token: String,
    },
}

/// Why no address could be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AddressError {
    /// `unix:` with no path, or no address at all, and no runtime directory to put the default in.
    #[error(
        "no socket given and {RUNTIME_DIR_VAR} is not set: the default socket is ${RUNTIME_DIR_VAR}/{SOCKET_NAME}; set {RUNTIME_DIR_VAR}, or give unix:PATH"
    )]
    NoRuntimeDir,
    /// A socket directly in `/`: what `unix:$XDG_RUNTIME_DIR/taskhost.sock` becomes when the variable
    /// is unset.
    #[error(
        "refusing the socket {0} at the filesystem root ({RUNTIME_DIR_VAR} unset when the path was written?): give unix: for ${RUNTIME_DIR_VAR}/{SOCKET_NAME}, or a path in a private directory"
    )]
    AtRoot(PathBuf),
    /// An address that is neither `unix:` nor `http://`.
    #[error("expected unix:PATH or http://HOST:PORT, got {0}")]
    Unknown(String),
    /// An `http://` address without a token.
    #[error("{0} needs a bearer token: set {TOKEN_VAR} (taskhost token create NAME prints one)")]
    NoToken(String),
}

/// The default socket, `$XDG_RUNTIME_DIR/taskhost.sock`.
///
/// # Errors
/// [`AddressError::NoRuntimeDir`] when the variable is unset or empty.
pub fn default_socket() -> Result<PathBuf, AddressError> {
    match std::env::var_os(RUNTIME_DIR_VAR) {
        Some(dir) if !dir.is_empty() => Ok(PathBuf::from(dir).join(SOCKET_NAME)),
        _ => Err(AddressError::NoRuntimeDir),
    }
}

/// The socket `unix:PATH` names: the default one for `unix:` with no path.
///
/// # Errors
/// No runtime directory for the default, or a path directly in `/`.
pub fn socket_path(path: &str) -> Result<PathBuf, AddressError> {
    if path.is_empty() {
        return default_socket();
    }
    let path = PathBuf::from(path);
    if path.parent() == Some(std::path::Path::new("/")) {
        return Err(AddressError::AtRoot(path));
    }
    Ok(path)
}

/// The address a client command dials: `connect` (its `--connect`), else `$TASKHOST_CONNECT`, else
/// the default socket; an `http://` one with `$TASKHOST_TOKEN`.
///
/// # Errors
/// As [`parse`]; no runtime directory for the default socket.
pub fn resolve(connect: Option<&str>) -> Result<Address, AddressError> {
    let from_env = std::env::var(CONNECT_VAR).ok().filter(|v| !v.is_empty());
    match connect.map(str::to_owned).or(from_env) {
        Some(spec) => parse(&spec, std::env::var(TOKEN_VAR).ok()),
        None => Ok(Address::Unix(default_socket()?)),
    }
}

/// `spec` as an address: `unix:PATH` (`unix:` alone: the default socket) or `http://HOST:PORT`
/// (its path, if any, replaced by `/mcp`), with `token` for the latter.
///
/// # Errors
/// An unknown form, a socket path refused by [`socket_path`], an HTTP address without a token.
pub fn parse(spec: &str, token: Option<String>) -> Result<Address, AddressError> {
    if let Some(path) = spec.strip_prefix("unix:") {
        return socket_path(path).map(Address::Unix);
    }
    let Some((scheme, rest)) = spec.split_once("://") else {
        return Err(AddressError::Unknown(spec.to_owned()));
    };
    if scheme != "http" {
        return Err(AddressError::Unknown(spec.to_owned()));
    }
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() {
        return Err(AddressError::Unknown(spec.to_owned()));
    }
    let token = token
        .filter(|t| !t.trim().is_empty())
        .ok_or_else(|| AddressError::NoToken(spec.to_owned()))?;
    Ok(Address::Http {
        url: format!("{scheme}://{authority}/mcp"),
        token: token.trim().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_at_the_root_is_refused_naming_the_runtime_directory() {
        let refused = socket_path("/taskhost.sock").unwrap_err();
        assert!(refused.to_string().contains(RUNTIME_DIR_VAR), "{refused}");
        assert_eq!(
            socket_path("/run/user/7/taskhost.sock"),
            Ok(PathBuf::from("/run/user/7/taskhost.sock"))
        );
    }

    #[test]
    fn an_http_address_needs_a_token_and_serves_mcp_at_its_endpoint() {
        assert_eq!(
            parse("http://127.0.0.1:8765", None),
            Err(AddressError::NoToken("http://127.0.0.1:8765".to_owned()))
        );
        assert_eq!(
            parse("http://127.0.0.1:8765/", Some("t0k".to_owned())),
            Ok(Address::Http {
                url: "http://127.0.0.1:8765/mcp".to_owned(),
                token: "t0k".to_owned()
            })
        );
        assert_eq!(
            parse("tcp:1", None),
            Err(AddressError::Unknown("tcp:1".to_owned()))
        );
    }
}
