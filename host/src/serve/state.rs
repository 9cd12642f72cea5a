//! The durable state a host serves with: where it is, opened (and what a predecessor handed over
//! taken first), its retention applied hourly, and the policies it bounds its tasks with.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Config;

/// The durable state's directory: `state` (`--state`), else `[state] dir`, else the default
/// directory (its missing parents made 0700); none with `no_state` (`--no-state`) or `[state]
/// durable = false`. A directory another user could swap (on the way to it, or itself: see
/// [`taskhost_store::trusted_dir`]) is refused. The error is the message of an exit 2.
pub(super) fn state_dir(
    config: &Config,
    state: Option<&Path>,
    no_state: bool,
) -> Result<Option<PathBuf>, String> {
    if no_state || config.state.durable == Some(false) {
        return Ok(None);
    }
    let chosen = state
        .map(Path::to_path_buf)
        .or_else(|| config.state.dir.clone());
    let dir = match chosen {
        Some(dir) => dir,
        None => {
            let Some(dir) = crate::config::default_state_dir() else {
                tracing::warn!(
                    "neither XDG_STATE_HOME nor HOME is set: task records are kept in memory only (pass --state DIR to keep them)"
                );
                return Ok(None);
            };
            if let Some(parent) = dir.parent() {
                // Nothing is made under a directory another user could swap (`sudo -E` can point
                // XDG_STATE_HOME into another user's home).
                if let Some(existing) = parent.ancestors().find(|a| a.exists()) {
                    taskhost_store::trusted_dir_above(existing, &dir).map_err(|e| e.to_string())?;
                }
                std::os::unix::fs::DirBuilderExt::mode(
                    std::fs::DirBuilder::new().recursive(true),
                    0o700,
                )
                .create(parent)
                .map_err(|e| {
                    format!(
                        "cannot make the state directory's parent {}: {e}",
                        parent.display()
                    )
                })?;
            }
            dir
        }
    };
    // Refused before anything (the handover's socket) is looked for in it, as is a directory whose
    // database was removed while its hosts ran: a keeper's tasks are not taken to be refused then.
    let held = taskhost_store::trusted_dir(&dir).map_err(|e| e.to_string())?;
    taskhost_store::refuse_lost(&held).map_err(|e| e.to_string())?;
    Ok(Some(dir))
}

/// Opens (checks, recovers) the state in `dir`, first taking over what a predecessor's keeper
/// handed to this host (`takeover`). The error (a refused directory or database, named) is the
/// message of an exit 2.
pub(super) fn open_state(
    config: &Config,
    dir: &Path,
    takeover: Option<taskhost_store::Takeover>,
) -> Result<Arc<taskhost_store::Store>, String> {
    let store = match takeover {
        Some(takeover) => taskhost_store::Store::open_taking_over(dir, config.state.sync, takeover),
        None => taskhost_store::Store::open(dir, config.state.sync),
    }
    .map_err(|e| e.to_string())?;
    let recovered = store.recovered();
    if !recovered.lost.is_empty() || !recovered.killed.is_empty() {
        tracing::info!(
            lost = recovered.lost.len(),
            killed = recovered.killed.len(),
            "tasks of hosts that stopped are settled as lost or killed"
        );
    }
    Ok(Arc::new(store))
}

/// Applies the retention at once and then every hour for as long as the host runs, off the path
/// to serving (it looks at every kept file's size, which a client waiting for its first answer
/// should not wait for).
pub(super) fn retain_hourly(
    runtime: &tokio::runtime::Runtime,
    state: Arc<taskhost_store::Store>,
    keep: taskhost_store::Retention,
) {
    runtime.spawn(async move {
        let mut hourly = tokio::time::interval(std::time::Duration::from_secs(3600));
        loop {
            hourly.tick().await;
            let state = state.clone();
            let began = std::time::Instant::now();
            let expired = behind_live_work(move || state.retain(keep)).await;
            let ms = began.elapsed().as_millis();
            match expired {
                Some(expired) if !expired.is_empty() => tracing::info!(
                    expired = expired.len(),
                    ms,
                    "settled tasks' output expired (retention)"
                ),
                Some(_) => tracing::debug!(ms, "retention: nothing expired"),
                None => {}
            }
        }
    });
}

/// Runs `work` on a thread of its own, 10 steps nicer than the host's: on a busy machine the
/// live calls' threads come first. Its result; `None` when no thread could be made (logged) or
/// `work` panicked.
async fn behind_live_work<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    let (done, result) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("taskhost-retention".into())
        .spawn(move || {
            nicer_by(10);
            let _ = done.send(work());
        });
    if let Err(e) = spawned {
        tracing::warn!(error = %e, "no thread for retention: it waits for the next hour");
        return None;
    }
    result.await.ok()
}

/// Makes the calling thread `steps` nicer (at most 19); a refusal leaves it as it was.
fn nicer_by(steps: i32) {
    let thread = rustix::process::Pid::from_raw(nix::unistd::gettid().as_raw());
    let now = rustix::process::getpriority_process(thread).unwrap_or(0);
    if let Err(e) = rustix::process::setpriority_process(thread, (now + steps).min(19)) {
        tracing::debug!(error = %e, "retention runs at the host's priority");
    }
}

/// The config's policies for this host, its own paths hidden from each (its runtime and spill
/// directories, its state, its sockets) and its `code` ([`super::default_plugins::code`]) out of
/// their write roots; or why the host must not start (an exit 2).
pub(super) fn host_policies(
    (config, code): (&Config, Vec<std::path::PathBuf>),
    listen: &[String],
    run_dir: &crate::rundir::RunDir,
    state: Option<&Path>,
) -> Result<crate::policy::Resolved, String> {
    let sockets = listen
        .iter()
        .filter_map(|l| super::listeners::unix_path(l).ok());
    let paths = [run_dir.path().to_owned(), run_dir.spills()]
        .into_iter()
        .chain(state.map(Path::to_path_buf))
        .chain(config.tasks.spill_dir.clone())
        .chain(sockets);
    let host = crate::policy::HostPaths::new(paths).with_code(code);
    crate::policy::for_serve(&config.policy, &host)
        .map_err(|e| format!("{e}: the host does not start"))
}

#[cfg(test)]
mod tests {
    fn own_nice() -> i32 {
        let thread = rustix::process::Pid::from_raw(nix::unistd::gettid().as_raw());
        rustix::process::getpriority_process(thread).expect("getpriority")
    }

    #[tokio::test]
    async fn retention_runs_ten_steps_nicer_than_the_host_and_the_host_stays_as_it_was() {
        let host = own_nice();
        let inside = super::behind_live_work(own_nice).await;
        assert_eq!(inside, Some((host + 10).min(19)));
        assert_eq!(own_nice(), host);
    }
}
