//! What bounds are, as the host resolves them and the wrapper reads them, and why they fail: shared
//! by every mechanism of the room.

use std::path::{Path, PathBuf};

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
    /// `/tmp` is an empty tmpfs of the task's own, writable (default: the host's `/tmp`, readable
    /// and, without `write` listing it, read-only).
    #[serde(default)]
    pub private_tmp: bool,
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
    /// The wrapper was not called as the host calls it.
    #[error("usage: taskhost-bounded --bounds JSON -- PROGRAM [ARGS...]")]
    Usage,
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

/// The environment variable a test sets to simulate mechanisms missing: a comma-separated list of
/// `landlock`, `mount`, `seccomp`, `memory`, `pids`, `cpu`, `run_as`. [`super::probe`],
/// [`super::check`] and the wrapper then find that mechanism absent, so a bound that needs it is refused (never skipped). It can only refuse more.
pub const DENY_ENV: &str = "TASKHOST_BOUNDS_DENY";

/// Whether `mechanism` is denied by [`DENY_ENV`].
pub(super) fn denied(mechanism: &str) -> bool {
    std::env::var(DENY_ENV).is_ok_and(|v| v.split(',').any(|m| m.trim() == mechanism))
}

/// A part this machine cannot enforce, with the measured reason.
pub(super) fn unsupported(bounds: &Bounds, part: &'static str, why: String) -> BoundsError {
    BoundsError::Unsupported {
        policy: bounds.policy.clone(),
        part,
        why,
    }
}

/// Applying a part failed with the OS's error.
pub(super) fn failed(
    bounds: &Bounds,
    part: &'static str,
    source: impl Into<std::io::Error>,
) -> BoundsError {
    BoundsError::Failed {
        policy: bounds.policy.clone(),
        part,
        source: source.into(),
    }
}

/// `path` opened `O_PATH` (with `flags`) through no symlink at any of its components: `ELOOP` when
/// one is met. A write root is opened so wherever it is used (its Landlock rule, its place in a
/// private `/tmp`).
pub(super) fn open_unlinked(
    path: &std::path::Path,
    flags: nix::fcntl::OFlag,
) -> nix::Result<std::os::fd::OwnedFd> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC | flags)
        .resolve(ResolveFlag::RESOLVE_NO_SYMLINKS);
    openat2(nix::fcntl::AT_FDCWD, path, how)
}

/// The path through which this process reaches what `fd` opened (`/proc/self/fd/N`): a bind, a
/// remount or a reopening through it is of that very file, whatever its name holds by now.
pub(super) fn fd_path(fd: &impl std::os::fd::AsRawFd) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd()))
}

/// The file type (`S_IFDIR`, `S_IFREG`, ...) of what `fd` opened.
pub(super) fn file_kind(fd: impl std::os::fd::AsFd) -> nix::Result<libc::mode_t> {
    nix::sys::stat::fstat(fd.as_fd()).map(|st| st.st_mode & libc::S_IFMT)
}

/// The write root of `roots` in which `path` lies deeper than directly (or which `path` is): a task
/// that may write there could rename a directory above `path` and put another in its place, so a
/// mount made on `path` guards nothing. `None` for a path outside every root or directly in one.
pub fn movable_in<'a>(path: &Path, roots: &'a [PathBuf]) -> Option<&'a Path> {
    roots
        .iter()
        .map(PathBuf::as_path)
        .find(|root| path.starts_with(root) && path.parent() != Some(*root))
}
