//! `SIGHUP` to a `--listen` host that hands over: an upgrade in place. The host lets go of its
//! keeper (which then holds the running tasks, the host's lock and its listening sockets for a
//! successor, as after a crash), makes every queued record durable, and re-executes the binary
//! found at its path (a new build) with the same arguments and pid. The new image takes the tasks
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
pub(super) async fn hand_over_in_place(host: &Taskhost) {
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

/// Re-executes the binary at this process's path with its arguments; returns only when that
/// failed, saying why.
pub(super) fn exec_self() -> String {
    use std::os::unix::process::CommandExt;
    let path = match std::env::current_exe() {
        Ok(path) => path,
        Err(e) => return format!("cannot find the taskhost binary to re-execute: {e}"),
    };
    // A binary replaced on disk (a rebuild renames a new file over it) reads as "... (deleted)".
    let path = match path.to_str().and_then(|p| p.strip_suffix(" (deleted)")) {
        Some(p) => std::path::PathBuf::from(p),
        None => path,
    };
    let mut args = std::env::args_os();
    let mut command = std::process::Command::new(&path);
    if let Some(arg0) = args.next() {
        command.arg0(arg0);
    }
    let e = command.args(args).exec();
    format!("cannot re-execute {}: {e}", path.display())
}
