//! Socket activation: a listening socket that systemd (a `.socket` unit, or
//! `systemd-socket-activate`) bound for this process and passed from descriptor 3 on, announced by
//! `LISTEN_FDS` and `LISTEN_PID`. `serve --listen unix:PATH` serves the one bound at PATH instead of
//! binding PATH itself, and leaves the file to systemd when it stops.
//!
//! The descriptors are taken through `listenfd`, which checks each is a socket of the kind asked
//! before it owns it (and marks it close-on-exec, so no task inherits it); the workspace's rule
//! against `unsafe` holds here.

use std::os::unix::net::UnixListener;
use std::path::Path;

/// The passed Unix listening socket bound at `path`, when systemd passed sockets to this process
/// (`LISTEN_PID` is its pid); `None` when it passed none.
///
/// # Errors
/// Sockets were passed to this process but none of them is a Unix stream socket bound at `path`.
pub(super) fn socket_for(path: &Path) -> Result<Option<UnixListener>, String> {
    let for_us = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|pid| pid.parse::<u32>().ok())
        == Some(std::process::id());
    if !for_us {
        return Ok(None);
    }
    let mut passed = listenfd::ListenFd::from_env();
    let wanted = std::path::absolute(path).unwrap_or_else(|_| path.to_owned());
    let mut seen = Vec::new();
    for index in 0..passed.len() {
        let Ok(Some(listener)) = passed.take_unix_listener(index) else {
            continue;
        };
        let bound = listener
            .local_addr()
            .ok()
            .and_then(|a| a.as_pathname().map(Path::to_path_buf));
        match bound {
            Some(bound) if bound == wanted => return Ok(Some(listener)),
            Some(bound) => seen.push(bound.display().to_string()),
            None => seen.push("(unnamed)".to_owned()),
        }
    }
    Err(format!(
        "systemd passed {} socket(s) (LISTEN_FDS), none a Unix socket bound at {} (passed: {}); \
         make the .socket unit's ListenStream= and --listen unix: name the same path",
        passed.len(),
        wanted.display(),
        if seen.is_empty() {
            "none of them a Unix stream socket".to_owned()
        } else {
            seen.join(", ")
        }
    ))
}
