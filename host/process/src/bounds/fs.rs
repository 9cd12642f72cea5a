//! The filesystem part: writable roots, hidden paths, read-only `.git`, and the scopes that keep a
//! bounded process from signalling or reaching processes outside its bounds.
//!
//! Landlock does the rights, the mount namespace ([`super::mounts`]) the hiding and the read-only
//! `.git`: a read-only mount wins over a Landlock write right, and a Landlock domain that handles
//! the filesystem forbids every change of the mounts, so the task cannot undo them.
//!
//! Every bounded process gets a Landlock domain, even one whose policy sets no `write`: the signal
//! scope (a task cannot signal, nor ptrace, a process outside its domain, such as the keeper or the
//! host), the abstract Unix socket scope, and the freezing of the mounts come with it.
//!
//! What is readable and writable, with `write` set: every path is readable and executable except
//! the device nodes of `/dev` (a root task would otherwise read raw disks past `hide`); of `/dev`,
//! only `null`, `zero`, `full`, `random`, `urandom`, `tty`, `ptmx` and `pts/` may be opened, for
//! reading and writing, and `pts/` is a `devpts` of the task's own (see the mounts): another
//! principal's terminal, which a task of uid 0 could otherwise write into, is not there. `shm/`
//! is writable: a tmpfs of the task's own (see the mounts), another principal's objects out of sight. The `write` roots are writable, and nothing else: not `/tmp` (a shared
//! `/tmp` is where principals would tamper with each other's files; a policy that wants it lists
//! it, or better sets `private_tmp`: a `/tmp` of the task's own, writable). Without `write` (`Bounds::filesystem` false) every path but the devices is writable.
//!
//! Under every policy `/proc` and `/sys` are read-only, their directories included (no cgroup made,
//! renamed or removed there), and nothing is made, renamed or removed directly in `/`: a right
//! given on `/` would reach every directory beneath it, since Landlock adds the rights of every
//! rule on a path.

use std::os::fd::AsFd;
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, Scope,
};

use super::model::{Bounds, BoundsError, Mechanism, denied, failed, unsupported};
use super::mounts;

/// The Landlock ABI every bound needs (Linux 6.12): filesystem rights with truncation and device
/// ioctls, and the signal and abstract Unix socket scopes. Required, never best effort.
const NEEDED: ABI = ABI::V6;

/// The device nodes a shell needs, opened for reading and writing.
const DEVICES: [&str; 7] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];

pub(super) fn probe() -> Vec<Mechanism> {
    let landlock = landlock_here();
    vec![
        Mechanism {
            part: "write",
            how: landlock.clone(),
        },
        Mechanism {
            part: "hide",
            how: mounts::here().map(|m| format!("{m}: an empty read-only mount over each path")),
        },
        Mechanism {
            part: "git_read_only",
            how: mounts::here().map(|m| format!("{m}: a read-only bind mount of each .git")),
        },
        Mechanism {
            part: "private_tmp",
            how: mounts::here().map(|m| format!("{m}: an empty tmpfs over /tmp")),
        },
        Mechanism {
            part: "signals",
            how: landlock.map(|l| format!("{l} scopes: signals, ptrace, abstract Unix sockets")),
        },
    ]
}

/// Landlock with [`NEEDED`], measured by creating (and dropping) a ruleset that requires it.
fn landlock_here() -> Result<String, String> {
    if denied("landlock") {
        return Err(format!(
            "Landlock is denied by {} (a test's simulation of a kernel without it)",
            super::DENY_ENV
        ));
    }
    match ruleset() {
        Ok(_) => Ok("Landlock ABI 6 or later".to_owned()),
        Err(e) => Err(format!(
            "this kernel lacks Landlock ABI 6 (filesystem rights and signal scoping, Linux 6.12): {e}"
        )),
    }
}

pub(super) fn check(bounds: &Bounds) -> Result<(), BoundsError> {
    let part = if bounds.filesystem {
        "write"
    } else {
        "signals"
    };
    landlock_here().map_err(|why| unsupported(bounds, part, why))?;
    // Every bounded task has a mount namespace; the part named is the first that needs it.
    let part = if !bounds.hide.is_empty() {
        "hide"
    } else if bounds.filesystem && !bounds.git_writable && !bounds.write.is_empty() {
        "git_read_only"
    } else {
        "terminals"
    };
    mounts::here()
        .map(|_| ())
        .map_err(|why| unsupported(bounds, part, why))
}

/// The mounts (made while privileged): hidden paths, read-only `.git`, a private `/tmp`. The
/// kernel is asked what it lacks ([`check`]) only when they fail (or a test denies a mechanism),
/// so that the refusal names the cause.
pub(super) fn mount(bounds: &Bounds) -> Result<(), BoundsError> {
    if denied("landlock") || denied("mount") {
        check(bounds)?;
    }
    mounts::make(bounds).or_else(|e| {
        check(bounds)?;
        Err(e)
    })
}

/// Landlock, last before the exec (`no_new_privs` is already set); the kernel is asked what it
/// lacks ([`check`]) only when the rules are refused.
pub(super) fn restrict(bounds: &Bounds) -> Result<(), BoundsError> {
    let part = if bounds.filesystem {
        "write"
    } else {
        "signals"
    };
    let restricted = rules(bounds).and_then(|r| r.restrict_self().map_err(std::io::Error::other));
    restricted.map(|_| ()).or_else(|e| {
        check(bounds)?;
        Err(failed(bounds, part, e))
    })
}

/// A ruleset handling every filesystem right and scope of [`NEEDED`], as a hard requirement.
fn ruleset() -> Result<RulesetCreated, RulesetError> {
    Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(NEEDED))?
        .scope(Scope::from_all(NEEDED))?
        .create()
}

/// The rules of `bounds`: see the module's documentation.
fn rules(bounds: &Bounds) -> std::io::Result<RulesetCreated> {
    let landlock = std::io::Error::other;
    let all = AccessFs::from_all(NEEDED);
    let file = AccessFs::from_file(NEEDED);
    let everywhere = if bounds.filesystem {
        AccessFs::from_read(NEEDED)
    } else {
        all
    };
    // On `/` only its listing: any other right there would reach every path beneath it, `/sys`'s
    // cgroups (made, renamed away from their names) and the devices included.
    let mut rules = add(
        ruleset().map_err(landlock)?,
        Path::new("/"),
        AccessFs::ReadDir.into(),
    )
    .map_err(landlock)?;
    for entry in std::fs::read_dir("/").into_iter().flatten().flatten() {
        let name = entry.file_name();
        // The kernel's own files are read-only whatever the policy: a task of a root host (uid 0,
        // no capability) could otherwise raise its cgroup's limits, leave its cgroup, or write a
        // sysctl or `/proc/sysrq-trigger`, which check the file's mode alone.
        let access = if name == "proc" || name == "sys" {
            AccessFs::from_read(NEEDED)
        } else {
            everywhere
        };
        if name != "dev" {
            rules = add(rules, &entry.path(), access).map_err(landlock)?;
        }
    }
    for device in DEVICES {
        rules = add(rules, Path::new(device), file).map_err(landlock)?;
    }
    rules = add(rules, Path::new("/dev/pts"), all).map_err(landlock)?;
    rules = add(rules, Path::new(mounts::SHM), all).map_err(landlock)?;
    if bounds.filesystem {
        for root in &bounds.write {
            if let Some(fd) = write_root(root)? {
                rules = add_opened(rules, fd, all).map_err(landlock)?;
            }
        }
        if bounds.private_tmp {
            rules = add(rules, Path::new(super::tmp::TMP), all).map_err(landlock)?;
        }
    }
    Ok(rules)
}

/// Write root `root`, opened through no symlink: a root nested in another can be replaced by a task
/// with a link to anywhere, which a later task's rule would follow. `None` for a root that is not
/// there (it gets no rule, which only leaves it less reachable).
///
/// # Errors
/// A root reached through a symlink (`ELOOP`): the start is refused.
fn write_root(root: &Path) -> std::io::Result<Option<std::os::fd::OwnedFd>> {
    match super::model::open_unlinked(root, nix::fcntl::OFlag::empty()) {
        Ok(fd) => Ok(Some(fd)),
        Err(nix::errno::Errno::ELOOP) => Err(std::io::Error::other(format!(
            "write root {} is reached through a symbolic link (a root must be a real path; one \
             nested in another may have been replaced by a task)",
            root.display()
        ))),
        Err(_) => Ok(None),
    }
}

/// Adds `access` beneath `path` (only its file rights when it is not a directory); a path that
/// cannot be opened gets no rule, which only leaves it less reachable.
fn add(
    rules: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, RulesetError> {
    match PathFd::new(path) {
        Ok(fd) => add_opened(rules, fd, access),
        Err(_) => Ok(rules),
    }
}

/// Adds `access` beneath what `fd` opened (only its file rights when it is not a directory).
fn add_opened(
    rules: RulesetCreated,
    fd: impl AsFd,
    access: BitFlags<AccessFs>,
) -> Result<RulesetCreated, RulesetError> {
    // What was opened, not what the path names by now.
    let dir = super::model::file_kind(&fd).is_ok_and(|kind| kind == libc::S_IFDIR);
    let access = if dir {
        access
    } else {
        access & AccessFs::from_file(NEEDED)
    };
    if access.is_empty() {
        return Ok(rules);
    }
    rules.add_rule(PathBeneath::new(fd, access))
}
