//! Socket activation: a host started by `systemd-socket-activate` (as `taskhost.socket` starts
//! `taskhost.service`) serves the listening socket it was passed for its `--listen unix:` path.

use std::time::Duration;

use crate::fixtures::*;
use crate::mcp::{binary, stop_host};

/// `systemd-socket-activate`, when this machine has it.
fn activator() -> Option<std::path::PathBuf> {
    [
        "/usr/bin/systemd-socket-activate",
        "/bin/systemd-socket-activate",
    ]
    .into_iter()
    .map(std::path::PathBuf::from)
    .find(|p| p.is_file())
}

/// Proves: a host whose socket systemd bound and passed (`LISTEN_FDS`) serves a client's call on it,
/// started by that first connection, and leaves the socket file (systemd's) when it stops.
#[test]
fn a_socket_activated_host_serves_the_passed_socket_and_leaves_its_file() {
    let Some(activator) = activator() else {
        eprintln!("skipped: systemd-socket-activate is not installed");
        return;
    };
    let dir = scratch("activation");
    let socket = dir.join("taskhost.sock");
    let listen = format!("unix:{}", socket.display());
    let plugin = |stem: &str| built(stem).display().to_string();
    let mut host = std::process::Command::new(activator)
        .arg("--listen")
        .arg(&socket)
        // The activator passes on only the variables it is told to.
        .args([
            "-E",
            "XDG_RUNTIME_DIR",
            "-E",
            "XDG_STATE_HOME",
            "-E",
            "RUST_LOG",
        ])
        .arg(binary())
        .args(["serve", "--no-watch", "--listen", &listen])
        .args(["--plugin", &plugin("taskhost_plugin_tasks")])
        .args(["--plugin", &plugin("taskhost_plugin_bash")])
        .env("RUST_LOG", "warn")
        .env("XDG_RUNTIME_DIR", dir.path())
        .env("XDG_STATE_HOME", dir.join("state-home"))
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("spawn systemd-socket-activate");
    assert!(
        eventually(Duration::from_secs(20), || socket.exists()),
        "the activator never listened on {}",
        socket.display()
    );
    let called = output_within(
        std::process::Command::new(binary()).args([
            "call",
            "--connect",
            &listen,
            "bash",
            r#"{"command": "echo served by an activated host"}"#,
        ]),
        Duration::from_secs(60),
    );
    assert!(
        String::from_utf8_lossy(&called.stdout).contains("served by an activated host"),
        "{}{}",
        String::from_utf8_lossy(&called.stdout),
        String::from_utf8_lossy(&called.stderr)
    );
    stop_host(&mut host);
    assert!(socket.exists(), "the host removed the socket systemd made");
}
