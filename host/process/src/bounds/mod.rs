//! A principal's bounds on its task processes, enforced by the kernel (SPEC 9.2).
//!
//! The host never applies bounds inside its own (many-threaded) process, nor between a fork and an
//! exec: a bounded process is started as `taskhost bounded --bounds JSON -- PROGRAM ARGS...`, a
//! fresh single-threaded process of this binary ([`wrap`]) that applies the bounds to itself in a
//! fixed order ([`enter`]) and then executes the program. Every process the program starts
//! inherits them. A part that cannot be applied ends the wrapper with [`REFUSED_EXIT`] and a line
//! on the task's stderr before the program runs: a bound is never skipped (fail closed).

mod fs;
pub mod limits;
mod net;
mod user;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::keeper::Launch;

/// The subcommand of the `taskhost` binary that applies bounds and executes a program.
pub const WRAPPER_COMMAND: &str = "bounded";

/// The exit status of a bounded process whose bounds could not be applied (its program never ran).
pub const REFUSED_EXIT: u8 = 125;

/// What one owner's task processes may do: the resolved form of a `[policy.NAME]` table, with the
/// host's own paths already added to `hide` (see the host's policy room).
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Bounds {
    /// The policy's name, for messages.
    pub policy: String,
    /// The writable roots; every other path is read-only. Empty: nothing is writable (but see
    /// [`Bounds::filesystem`]).
    pub write: Vec<PathBuf>,
    /// Paths the processes cannot read at all (they see an empty directory or file).
    pub hide: Vec<PathBuf>,
    /// `.git` directories inside writable roots stay writable (default: read-only).
    pub git_writable: bool,
    /// Whether the processes may open network sockets (`network = "all"`); `false`: only Unix
    /// sockets.
    pub network: bool,
    /// The most memory the task's processes may use together, in bytes.
    pub memory_max: Option<u64>,
    /// The most processes (and threads) the task may have at once.
    pub pids_max: Option<u64>,
    /// The most CPU time per second of wall time, in thousandths of a core (1.5 cores: 1500).
    pub cpu_max_millis: Option<u64>,
    /// The user the processes run as (a host run by root only).
    pub run_as: Option<RunAs>,
    /// Whether the filesystem is bounded at all: `false` only for a policy that sets no `write`
    /// (every path stays writable as for an unbounded task; `hide` and the host's paths still
    /// apply).
    pub filesystem: bool,
}

/// A user to run as, resolved by the host when it starts (a name that does not resolve refuses the
/// start).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RunAs {
    /// The user's name, for messages and `initgroups`.
    pub name: String,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
}

/// Why bounds could not be applied (in the wrapper) or cannot be enforced here (at the host's
/// start).
#[derive(Debug, thiserror::Error)]
pub enum BoundsError {
    /// This kernel or this host's privileges lack the mechanism a part needs.
    #[error("policy '{policy}': {part} cannot be enforced here: {why}")]
    Unsupported {
        /// The policy.
        policy: String,
        /// The part (`write`, `hide`, `network`, `memory_max`, ...).
        part: &'static str,
        /// What is missing, as measured.
        why: String,
    },
    /// Applying a part failed with the OS's error.
    #[error("policy '{policy}': applying {part} failed: {source}")]
    Failed {
        /// The policy.
        policy: String,
        /// The part.
        part: &'static str,
        /// The OS's error.
        source: std::io::Error,
    },
    /// The bounds passed to the wrapper do not parse.
    #[error("the bounds passed to `taskhost bounded` do not parse: {0}")]
    Malformed(String),
}

/// How one part of the bounds is enforced on this machine, for `taskhost policy-check`.
#[derive(Clone, Debug)]
pub struct Mechanism {
    /// The part (`write`, `hide`, `network`, `memory_max`, `pids_max`, `cpu_max`, `run_as`,
    /// `signals`, `no_new_privs`).
    pub part: &'static str,
    /// What enforces it here (`Landlock ABI 7`, `cgroup v1 memory`, ...), or why nothing can.
    pub how: Result<String, String>,
}

/// How each part would be enforced on this machine, measured by probing (nothing is changed).
pub fn probe() -> Vec<Mechanism> {
    let mut all = fs::probe();
    all.extend(net::probe());
    all.extend(limits::probe());
    all.extend(user::probe());
    all
}

/// Checks, at the host's start, that every part `bounds` sets can be enforced here.
///
/// # Errors
/// [`BoundsError::Unsupported`] for the first part that cannot.
pub fn check(bounds: &Bounds) -> Result<(), BoundsError> {
    fs::check(bounds)?;
    net::check(bounds)?;
    limits::check(bounds)?;
    user::check(bounds)
}

/// What the host passes to the wrapper: the owner's bounds and this process's own cgroups.
#[derive(serde::Serialize, serde::Deserialize)]
struct Passed {
    #[serde(flatten)]
    bounds: Bounds,
    #[serde(default)]
    cgroups: Option<limits::TaskCgroups>,
}

/// The launch that runs `launch` under `bounds`, in `cgroups` (made for this launch alone, see
/// [`limits::TaskCgroups::for_spawn`]): the wrapper `exe` (this binary) with the bounds and the program as
/// its arguments; the environment and directory are the program's.
///
/// # Errors
/// [`BoundsError::Malformed`] should the bounds not serialize.
pub fn wrap(
    exe: &Path,
    launch: &Launch,
    bounds: &Bounds,
    cgroups: Option<&limits::TaskCgroups>,
) -> Result<Launch, BoundsError> {
    let passed = Passed {
        bounds: bounds.clone(),
        cgroups: cgroups.cloned(),
    };
    let json = serde_json::to_string(&passed).map_err(|e| BoundsError::Malformed(e.to_string()))?;
    let mut args: Vec<OsString> = vec![
        WRAPPER_COMMAND.into(),
        "--bounds".into(),
        json.into(),
        "--".into(),
        launch.program.clone().into_os_string(),
    ];
    args.extend(launch.args.iter().cloned());
    Ok(Launch {
        program: exe.to_owned(),
        args,
        env: launch.env.clone(),
        cwd: launch.cwd.clone(),
    })
}

/// The wrapper's work (`taskhost bounded`): applies `bounds` (JSON, from [`wrap`]) to this process
/// and executes `program` with `args`. Returns only when that failed, with the error to print;
/// the caller exits with [`REFUSED_EXIT`].
///
/// The order is fixed: the cgroup is joined and the mounts made while the process still has its
/// privileges, then the user is switched, privileges are given up for good (`no_new_privs`), and
/// the system-call filter and Landlock come last, just before the `exec`.
pub fn enter(bounds: &str, program: &OsStr, args: &[OsString]) -> BoundsError {
    let Passed { bounds, cgroups } = match serde_json::from_str(bounds) {
        Ok(b) => b,
        Err(e) => return BoundsError::Malformed(e.to_string()),
    };
    let env = user::environment(&bounds);
    let applied = limits::join(&bounds, cgroups.as_ref())
        .and_then(|()| fs::mount(&bounds))
        .and_then(|()| user::switch(&bounds))
        .and_then(|()| no_new_privs(&bounds))
        .and_then(|()| net::restrict(&bounds))
        .and_then(|()| fs::restrict(&bounds));
    if let Err(e) = applied {
        return e;
    }
    let error = exec(program, args, env);
    BoundsError::Failed {
        policy: bounds.policy,
        part: "exec",
        source: error,
    }
}

/// Replaces this process with `program`, with `env` added to its environment.
fn exec(program: &OsStr, args: &[OsString], env: Vec<(&str, OsString)>) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    std::process::Command::new(program)
        .args(args)
        .envs(env)
        .exec()
}

/// `PR_SET_NO_NEW_PRIVS`: no exec gains privileges (set-user-id programs, file capabilities).
fn no_new_privs(bounds: &Bounds) -> Result<(), BoundsError> {
    nix::sys::prctl::set_no_new_privs().map_err(|e| BoundsError::Failed {
        policy: bounds.policy.clone(),
        part: "no_new_privs",
        source: e.into(),
    })
}

/// What a bound ended: the detail of a task whose process `exit` (in `cgroups`, read before they
/// are removed) was caused by one of its bounds (`memory limit 256 MiB`), `None` otherwise.
pub fn ended_by(
    bounds: &Bounds,
    cgroups: Option<&limits::TaskCgroups>,
    exit: &crate::Exit,
) -> Option<String> {
    limits::ended_by(bounds, cgroups, exit)
}

/// The environment variable a test sets to simulate mechanisms missing: a comma-separated list of
/// `memory`, `pids`, `cpu`, `run_as`. [`probe`], [`check`] and the wrapper then find that mechanism
/// absent, so a bound that needs it is refused (never skipped). It can only refuse more.
pub const DENY_ENV: &str = "TASKHOST_BOUNDS_DENY";

/// Whether `mechanism` is denied by [`DENY_ENV`].
fn denied(mechanism: &str) -> bool {
    std::env::var(DENY_ENV).is_ok_and(|v| v.split(',').any(|m| m.trim() == mechanism))
}

/// A part not built yet: refused, never skipped.
fn not_built(bounds: &Bounds, part: &'static str) -> BoundsError {
    BoundsError::Unsupported {
        policy: bounds.policy.clone(),
        part,
        why: "this build of taskhost does not enforce it yet".into(),
    }
}
