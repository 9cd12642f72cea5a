//! The user part: `run_as`, for a host run by root.
//!
//! The wrapper takes the user's supplementary groups (`initgroups`), its gid and its uid, in that
//! order (each step needs the privilege the next one gives up), after the cgroup and the mounts and
//! before `no_new_privs`. Only root may become another user, so a host not run by root refuses a
//! policy with `run_as` at its start: it could not switch, and running the tasks as the host's own
//! user instead would skip the bound. The program starts with `HOME` (the user's home directory from
//! the password database), `USER` and `LOGNAME` set to the user's; the rest of the environment is
//! the task's as for any task.

use std::ffi::{CString, OsString};

use nix::unistd::{Gid, Uid};

use super::{Bounds, BoundsError, Mechanism, RunAs, denied};

/// Why this process cannot switch users, if it cannot.
fn unable() -> Option<String> {
    if denied("run_as") {
        return Some("denied by TASKHOST_BOUNDS_DENY".into());
    }
    let euid = nix::unistd::geteuid();
    (!euid.is_root()).then(|| {
        format!("the host runs as uid {euid}, not root: only root may switch to another user")
    })
}

pub(super) fn probe() -> Vec<Mechanism> {
    vec![Mechanism {
        part: "run_as",
        how: match unable() {
            None => Ok("initgroups, setgid, setuid (the host runs as root)".into()),
            Some(why) => Err(why),
        },
    }]
}

pub(super) fn check(bounds: &Bounds) -> Result<(), BoundsError> {
    match (&bounds.run_as, unable()) {
        (Some(_), Some(why)) => Err(BoundsError::Unsupported {
            policy: bounds.policy.clone(),
            part: "run_as",
            why,
        }),
        _ => Ok(()),
    }
}

/// The environment the program starts with under `run_as`: `HOME`, `USER`, `LOGNAME` (none
/// without it). A user with no entry in the password database gets `HOME=/`.
pub(super) fn environment(bounds: &Bounds) -> Vec<(&'static str, OsString)> {
    let Some(user) = &bounds.run_as else {
        return Vec::new();
    };
    let home = nix::unistd::User::from_uid(Uid::from_raw(user.uid))
        .ok()
        .flatten()
        .map_or_else(|| OsString::from("/"), |u| u.dir.into_os_string());
    vec![
        ("HOME", home),
        ("USER", user.name.clone().into()),
        ("LOGNAME", user.name.clone().into()),
    ]
}

/// Switches to the user (groups, gid, uid), after the privileged parts; then enters the working
/// directory again as that user, so one it may not enter fails here with the OS's error.
pub(super) fn switch(bounds: &Bounds) -> Result<(), BoundsError> {
    let Some(user) = &bounds.run_as else {
        return Ok(());
    };
    check(bounds)?;
    let failed = |what: &str, e: std::io::Error| BoundsError::Failed {
        policy: bounds.policy.clone(),
        part: "run_as",
        source: std::io::Error::new(e.kind(), format!("{what} for user '{}': {e}", user.name)),
    };
    let name = CString::new(user.name.as_bytes())
        .map_err(|e| failed("initgroups", std::io::Error::other(e)))?;
    let gid = Gid::from_raw(user.gid);
    nix::unistd::initgroups(&name, gid).map_err(|e| failed("initgroups", e.into()))?;
    nix::unistd::setgid(gid).map_err(|e| failed("setgid", e.into()))?;
    nix::unistd::setuid(Uid::from_raw(user.uid)).map_err(|e| failed("setuid", e.into()))?;
    enter_cwd(bounds, user)
}

/// Enters the working directory again, now as `user`.
fn enter_cwd(bounds: &Bounds, user: &RunAs) -> Result<(), BoundsError> {
    let cwd = std::env::current_dir().map_err(|e| BoundsError::Failed {
        policy: bounds.policy.clone(),
        part: "run_as",
        source: e,
    })?;
    nix::unistd::chdir(&cwd).map_err(|e| BoundsError::Failed {
        policy: bounds.policy.clone(),
        part: "run_as",
        source: std::io::Error::new(
            std::io::Error::from(e).kind(),
            format!(
                "the working directory {} is not accessible to user '{}': {e}",
                cwd.display(),
                user.name
            ),
        ),
    })
}
