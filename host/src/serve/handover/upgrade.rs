//! `SIGHUP` to a `--listen` host that hands over: an upgrade in place. The host lets go of its
//! keeper (which then holds the running tasks, the host's lock and its listening sockets for a
//! successor, as after a crash), makes every queued record durable, and re-executes the binary
//! found at its path (a new build) with the same arguments and pid. A binary another user could
//! have written (the file, or a directory on its path) is refused before anything is let go of:
//! the host logs why and serves on with the image it runs. The new image takes the tasks
//! back through the keeper exactly as a host started after a crash would.
//!
//! Connections open at that moment: a `taskhost connect` bridge's session first stops taking
//! requests, answers those it took (an open `subscriptions/listen` stream aside, which the bridge
//! opens again) and tells the bridge ([`crate::drain`]), which sends what was
//! not taken to the next image after it reconnects as the same owner: its client sees no error.
//! Any other connection (a raw socket client, HTTP) closes; an HTTP client's next request goes to
//! the next image. Clients that connect meanwhile wait in the listening sockets' backlog (the
//! keeper holds them), so none is refused.

use std::time::Duration;

use crate::Taskhost;

/// How long the bridges' sessions get to answer the requests they took before the host goes on.
const PAUSE: Duration = Duration::from_secs(10);

/// Hands the running tasks to the keeper for the next image: the bridges' sessions pause (each
/// answers what it took and tells its bridge), the records are made durable and the keeper is let
/// go of. Nothing is cancelled.
pub(crate) async fn hand_over_in_place(host: &Taskhost) {
    tracing::info!("SIGHUP: handing the running tasks to the binary on disk");
    // Foreground commands in flight become their callers' background tasks, so the calls answer
    // now and the tasks go on under the new image.
    host.services().restarting.cancel();
    if !host.drain().pause_all(PAUSE).await {
        tracing::warn!(
            "a session had not answered what it took within {} s: its bridge answers it with an error",
            PAUSE.as_secs()
        );
    }
    if let Some(state) = host.services().state.clone() {
        let _ = tokio::task::spawn_blocking(move || state.sync()).await;
    }
    host.services().processes.leave_keeper();
}

/// The binary at this process's path (a rebuild renames a new file over it), opened once the walk
/// of [`open_trusted_file`] found that only this user or root could have laid it there: what is
/// checked is what [`exec_self`] runs. `Err` says why it is refused.
///
/// [`open_trusted_file`]: taskhost_process::trusted_path::open_trusted_file
pub(crate) fn binary_on_disk() -> Result<std::fs::File, String> {
    let path = match std::env::current_exe() {
        Ok(path) => path,
        Err(e) => {
            return Err(format!(
                "cannot find the taskhost binary to re-execute: {e}"
            ));
        }
    };
    // A binary replaced on disk reads as "... (deleted)".
    let path = match path.to_str().and_then(|p| p.strip_suffix(" (deleted)")) {
        Some(p) => std::path::PathBuf::from(p),
        None => path,
    };
    taskhost_process::trusted_path::open_trusted_file(&path).map_err(|e| e.to_string())
}

/// Re-executes `binary` (see [`binary_on_disk`]) with this process's arguments; returns only when
/// that failed, saying why.
pub(crate) fn exec_self(binary: &std::fs::File) -> String {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    // The descriptor's own file, whatever is at the path by now.
    let path = format!("/proc/self/fd/{}", binary.as_raw_fd());
    let mut args = std::env::args_os();
    let mut command = std::process::Command::new(&path);
    if let Some(arg0) = args.next() {
        command.arg0(arg0);
    }
    // Its listening sockets come back through the keeper: the successor (this same pid) must not
    // take descriptor numbers that systemd's variables name for sockets this process had.
    for name in ["LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"] {
        command.env_remove(name);
    }
    let e = command.args(args).exec();
    format!("cannot re-execute the taskhost binary: {e}")
}
