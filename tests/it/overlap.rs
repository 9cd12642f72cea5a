//! Two hosts on one socket path in overlap: a host started while the previous one is stopping
//! keeps its socket file, whatever number the filesystem gives the new file.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::fixtures::*;
use crate::mcp;

/// Starts `taskhost serve` on `socket` (no state, plugins not watched), its private directory
/// under `runtime`.
fn spawn_host(socket: &Path, runtime: &Path) -> std::process::Child {
    std::fs::create_dir_all(runtime).unwrap();
    std::process::Command::new(mcp::binary())
        .args(["serve", "--no-watch", "--no-state", "--listen"])
        .arg(format!("unix:{}", socket.display()))
        .env("RUST_LOG", "error")
        .env("XDG_RUNTIME_DIR", runtime)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn taskhost")
}

/// True when process `pid` holds a socket listening on `path` (`/proc/net/unix`).
fn listens_on(pid: u32, path: &Path) -> bool {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    let sockets: Vec<String> = fds
        .flatten()
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|l| {
            let l = l.to_str()?;
            Some(l.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let table = std::fs::read_to_string("/proc/net/unix").unwrap_or_default();
    let path = path.to_str().unwrap_or_default();
    table.lines().skip(1).any(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        // Num RefCount Protocol Flags Type St Inode Path; flag 0x10000 is a listener.
        f.len() == 8 && f[3] == "00010000" && f[7] == path && sockets.iter().any(|s| s == f[6])
    })
}

/// Starts a host on `socket` as soon as the path is free of a live one: each start refused
/// because the stopping host still listens is tried again.
fn start_when_free(socket: &Path, runtime: &Path) -> std::process::Child {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut next = spawn_host(socket, runtime);
        let settled = eventually(Duration::from_secs(20), || {
            matches!(next.try_wait(), Ok(Some(_))) || listens_on(next.id(), socket)
        });
        assert!(settled, "a host neither served nor was refused");
        if !matches!(next.try_wait(), Ok(Some(_))) {
            return next;
        }
        assert!(Instant::now() < deadline, "the path never came free");
    }
}

#[test]
fn a_host_started_while_the_previous_one_stops_keeps_its_socket_file() {
    let dir = scratch("socket-overlap");
    let socket = dir.path().join("taskhost.sock");
    // Stopped when dropped, so a failed round leaves no host behind.
    let host = |child| mcp::SocketHost {
        child,
        socket: socket.clone(),
    };
    let mut current = host(spawn_host(&socket, &dir.path().join("run-0")));
    for round in 1..=5 {
        assert!(
            eventually(Duration::from_secs(20), || {
                std::os::unix::net::UnixStream::connect(&socket).is_ok()
            }),
            "round {round}: the host never listened"
        );
        let pid = nix::unistd::Pid::from_raw(current.child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        let next = start_when_free(&socket, &dir.path().join(format!("run-{round}")));
        let _ = current.child.wait();
        current = host(next);
        assert!(
            socket.exists(),
            "round {round}: the stopping host removed its successor's socket file"
        );
        assert!(
            std::os::unix::net::UnixStream::connect(&socket).is_ok(),
            "round {round}: the successor does not answer on its socket"
        );
    }
    drop(current);
}
