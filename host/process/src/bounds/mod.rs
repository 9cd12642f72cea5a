//! A principal's bounds on its task processes, enforced by the kernel (SPEC 9.2).
//!
//! The host never applies bounds inside its own (many-threaded) process, nor between a fork and an
//! exec: a bounded process is started as `taskhost bounded --bounds JSON -- PROGRAM ARGS...`, a
//! fresh single-threaded process of this binary ([`wrap`]) that applies the bounds to itself in a
//! fixed order ([`enter`]) and then executes the program. Every process the program starts
//! inherits them. A part that cannot be applied ends the wrapper with [`REFUSED_EXIT`] and a line
//! on the task's stderr before the program runs: a bound is never skipped (fail closed).

mod fs;
mod git;
pub mod limits;
pub(crate) mod model;
mod mounts;
mod privileges;
mod syscalls;
mod tmp;
mod user;

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::keeper::Launch;
pub use model::{Bounds, BoundsError, DENY_ENV, Mechanism, RunAs, movable_in};

/// The subcommand of the `taskhost` binary that applies bounds and executes a program.
pub const WRAPPER_COMMAND: &str = "bounded";

/// The small binary that does the wrapper's work alone (`taskhost-bounded --bounds JSON -- PROGRAM`):
/// it starts in a fraction of the time the whole host binary takes to be mapped and relocated.
pub const WRAPPER_BINARY: &str = "taskhost-bounded";

/// The program a bounded process is started through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wrapper {
    program: PathBuf,
    /// Whether `program` is the whole `taskhost` binary, which needs [`WRAPPER_COMMAND`] first.
    subcommand: bool,
}

impl Wrapper {
    /// The wrapper for the host binary `exe`: [`WRAPPER_BINARY`] in the same directory when it is a
    /// file there (a build or package of the `taskhost` package puts it there), else `exe` itself
    /// with its `bounded` subcommand: the same bounds, applied the same way, only slower to start.
    #[must_use]
    pub fn beside(exe: &Path) -> Self {
        let small = exe.with_file_name(WRAPPER_BINARY);
        if small.is_file() {
            Self {
                program: small,
                subcommand: false,
            }
        } else {
            Self::subcommand_of(exe)
        }
    }

    /// The host binary `exe`'s own `bounded` subcommand, whether or not the small binary is there.
    #[must_use]
    pub fn subcommand_of(exe: &Path) -> Self {
        Self {
            program: exe.to_owned(),
            subcommand: true,
        }
    }

    /// The program this wrapper runs.
    #[must_use]
    pub fn program(&self) -> &Path {
        &self.program
    }
}

/// The exit status of a bounded process whose bounds could not be applied (its program never ran).
pub const REFUSED_EXIT: u8 = 125;

/// How each part would be enforced on this machine, measured by probing (nothing is changed).
pub fn probe() -> Vec<Mechanism> {
    let mut all = fs::probe();
    all.extend(syscalls::probe());
    all.extend(privileges::probe());
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
    syscalls::check(bounds)?;
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
/// [`limits::TaskCgroups::for_spawn`]): the `wrapper` with the bounds and the program as its
/// arguments; the environment and directory are the program's.
///
/// # Errors
/// [`BoundsError::Malformed`] should the bounds not serialize.
pub fn wrap(
    wrapper: &Wrapper,
    launch: &Launch,
    bounds: &Bounds,
    cgroups: Option<&limits::TaskCgroups>,
) -> Result<Launch, BoundsError> {
    let passed = Passed {
        bounds: bounds.clone(),
        cgroups: cgroups.cloned(),
    };
    let json = serde_json::to_string(&passed).map_err(|e| BoundsError::Malformed(e.to_string()))?;
    let mut args: Vec<OsString> = Vec::new();
    if wrapper.subcommand {
        args.push(WRAPPER_COMMAND.into());
    }
    args.extend([
        "--bounds".into(),
        json.into(),
        "--".into(),
        launch.program.clone().into_os_string(),
    ]);
    args.extend(launch.args.iter().cloned());
    Ok(Launch {
        program: wrapper.program.clone(),
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
        .and_then(|()| privileges::give_up(&bounds))
        .and_then(|()| no_new_privs(&bounds))
        .and_then(|()| syscalls::restrict(&bounds))
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

/// The work of [`WRAPPER_BINARY`], whose arguments (after its name) are `--bounds JSON --
/// PROGRAM [ARGS...]`, as [`wrap`] writes them: [`enter`]. Returns only on failure, with the error to
/// print; the caller exits with [`REFUSED_EXIT`].
pub fn enter_args(args: &[OsString]) -> BoundsError {
    match args {
        [flag, bounds, dashes, program, rest @ ..] if flag == "--bounds" && dashes == "--" => {
            match bounds.to_str() {
                Some(bounds) => enter(bounds, program, rest),
                None => BoundsError::Malformed("they are not UTF-8".into()),
            }
        }
        _ => BoundsError::Usage,
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
