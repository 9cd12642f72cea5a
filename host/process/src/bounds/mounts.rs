//! The private mount namespace of a bounded process: terminals and a `/dev/shm` of its own, each
//! `.git` of a writable root bound read-only over itself, each hidden path covered by an empty
//! read-only mount, and with `private_tmp` a `/tmp` of its own ([`super::tmp`]).
//!
//! A host run by root makes the namespace directly; any other host makes a user namespace first,
//! mapping its own user and group to themselves (so the task's `id` is unchanged), which gives the
//! wrapper the right to mount in it until it executes the program. Every mount is private: nothing
//! reaches the host's namespace. The mounts are made before Landlock, whose domain then forbids
//! any change of them (mount, umount, pivot_root), and the capabilities are given up before the
//! program runs.

use std::path::{Path, PathBuf};

use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use nix::sys::statvfs::{FsFlags, statvfs};

use super::git::GitDir;
use super::model::{Bounds, BoundsError, denied, failed};

/// How this process could make the namespace, or why it cannot.
pub(super) fn here() -> Result<String, String> {
    if denied("mount") {
        return Err(format!(
            "mount namespaces are denied by {} (a test's simulation)",
            super::DENY_ENV
        ));
    }
    if nix::unistd::geteuid().is_root() {
        return Ok("a private mount namespace".to_owned());
    }
    let max = std::fs::read_to_string("/proc/sys/user/max_user_namespaces").unwrap_or_default();
    match max.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok("a user and a private mount namespace".to_owned()),
        _ => Err(
            "a host not run by root needs user namespaces to mount, and this kernel has none \
             (/proc/sys/user/max_user_namespaces)"
                .to_owned(),
        ),
    }
}

/// Enters the namespace (every bounded task has one: its own terminals and IPC, [`own_terminals`])
/// and makes the mounts `bounds` asks for.
pub(super) fn make(bounds: &Bounds) -> Result<(), BoundsError> {
    enter().map_err(|e| failed(bounds, "mount namespace", e))?;
    own_terminals().map_err(|e| failed(bounds, "terminals", e))?;
    own_shared_memory().map_err(|e| failed(bounds, "shared memory", e))?;
    if bounds.filesystem && !bounds.git_writable {
        let dirs =
            super::git::of_roots(&bounds.write).map_err(|e| failed(bounds, "git_read_only", e))?;
        for git in &dirs {
            read_only(git).map_err(|e| {
                let why = format!("{}: {e}", git.path.display());
                failed(bounds, "git_read_only", std::io::Error::new(e.kind(), why))
            })?;
        }
    }
    for path in &bounds.hide {
        // The host refuses such a policy when it reads it; the wrapper does not rely on that.
        if let Some(root) = super::model::movable_in(path, &bounds.write) {
            let why = format!(
                "{} lies deeper than directly in the write root {}: a task could move the \
                 directory above it and uncover it",
                path.display(),
                root.display()
            );
            return Err(failed(bounds, "hide", std::io::Error::other(why)));
        }
        hide(path).map_err(|e| failed(bounds, "hide", e))?;
    }
    let cwd = std::env::current_dir().map_err(|e| failed(bounds, "working directory", e))?;
    if bounds.private_tmp {
        let keep: Vec<&Path> = bounds.write.iter().map(PathBuf::as_path).collect();
        super::tmp::make(&keep, &cwd).map_err(|e| failed(bounds, "private_tmp", e))?;
    }
    // The working directory was entered before the mounts: a directory inside a hidden path or a
    // `.git` would still be the one beneath them. Entered again by its path, it is what the mounts
    // show (an empty directory, a read-only `.git`, a private `/tmp`).
    nix::unistd::chdir(&cwd).map_err(|e| failed(bounds, "working directory", e))
}

/// Unshares the mount namespace (with a user namespace when not root) and makes it private.
fn enter() -> std::io::Result<()> {
    // With its own IPC namespace: System V shared memory, semaphores and message queues, and POSIX
    // message queues, are the task's alone (another principal's segment could otherwise be read,
    // and memory held past the task's limit and its end).
    if nix::unistd::geteuid().is_root() {
        unshare(CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWIPC)?;
    } else {
        let (uid, gid) = (nix::unistd::geteuid(), nix::unistd::getegid());
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS | CloneFlags::CLONE_NEWIPC)?;
        std::fs::write("/proc/self/setgroups", "deny")?;
        std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    }
    let none = None::<&str>;
    mount(none, "/", none, MsFlags::MS_REC | MsFlags::MS_PRIVATE, none)?;
    Ok(())
}

/// A `devpts` of the task's own over `/dev/pts`, with its `ptmx` over `/dev/ptmx`: the terminals
/// the task makes are the only ones it can open by path, so another principal's terminal (which a
/// task of uid 0 could otherwise write into) is out of its reach. The terminal it was started on
/// stays its own through its descriptors and `/dev/tty`.
fn own_terminals() -> std::io::Result<()> {
    let none = None::<&str>;
    mount(
        Some("devpts"),
        "/dev/pts",
        Some("devpts"),
        MsFlags::MS_NOSUID | MsFlags::MS_NOEXEC,
        Some("newinstance,ptmxmode=0666,mode=0620"),
    )?;
    mount(
        Some("/dev/pts/ptmx"),
        "/dev/ptmx",
        none,
        MsFlags::MS_BIND,
        none,
    )?;
    Ok(())
}

/// Where POSIX shared memory lives (`shm_open`, named semaphores).
pub(super) const SHM: &str = "/dev/shm";

/// A tmpfs of the task's own over [`SHM`], writable by it (its Landlock rule): another principal's
/// objects there are out of its sight (a task could read them, every path being readable), its own
/// are seen by no one else, charged to its memory limit, and gone with its namespace. A machine
/// without the directory gets none.
fn own_shared_memory() -> std::io::Result<()> {
    if !Path::new(SHM).is_dir() {
        return Ok(());
    }
    mount(
        Some("tmpfs"),
        SHM,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=1777"),
    )?;
    Ok(())
}

/// Binds what `git` opened read-only over itself: from its descriptor (`open_tree`, `move_mount`),
/// so the source, the place and the remount are one directory, whatever a path names meanwhile.
fn read_only(git: &GitDir) -> std::io::Result<()> {
    use rustix::mount::{MoveMountFlags, OpenTreeFlags, move_mount, open_tree};
    let tree = open_tree(
        &git.fd,
        "",
        OpenTreeFlags::OPEN_TREE_CLONE
            | OpenTreeFlags::OPEN_TREE_CLOEXEC
            | OpenTreeFlags::AT_EMPTY_PATH
            | OpenTreeFlags::AT_RECURSIVE,
    )?;
    move_mount(
        &tree,
        "",
        &git.fd,
        "",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )?;
    // The new mount, by its descriptor's link: the remount finds the mount's own root there.
    remount(&super::model::fd_path(&tree), MsFlags::MS_RDONLY)
}

/// Covers `path`: an empty read-only tmpfs over a directory, `/dev/null` on a mount that opens no
/// device over anything else (opening it fails with EACCES). A path that does not exist is left.
fn hide(path: &Path) -> std::io::Result<()> {
    let none = None::<&str>;
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    if meta.is_dir() {
        let flags =
            MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            flags,
            Some("size=4k,mode=0555"),
        )?;
        return Ok(());
    }
    mount(Some("/dev/null"), path, none, MsFlags::MS_BIND, none)?;
    remount(
        path,
        MsFlags::MS_RDONLY | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
    )
}

/// Remounts the bind mount at `path` with `extra` added to the flags it has (a user namespace may
/// not clear the flags its mounts were given).
fn remount(path: &Path, extra: MsFlags) -> std::io::Result<()> {
    let has = statvfs(path)?.flags();
    let kept = [
        (FsFlags::ST_NOSUID, MsFlags::MS_NOSUID),
        (FsFlags::ST_NODEV, MsFlags::MS_NODEV),
        (FsFlags::ST_NOEXEC, MsFlags::MS_NOEXEC),
        (FsFlags::ST_NOATIME, MsFlags::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, MsFlags::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, MsFlags::MS_RELATIME),
    ];
    let flags = kept.iter().filter(|(st, _)| has.contains(*st)).fold(
        MsFlags::MS_BIND | MsFlags::MS_REMOUNT | extra,
        |f, (_, ms)| f | *ms,
    );
    let none = None::<&str>;
    mount(none, path, none, flags, none)?;
    Ok(())
}
