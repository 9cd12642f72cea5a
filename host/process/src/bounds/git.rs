//! Which git directories of the write roots a bounded task gets read-only (`git_writable` unset),
//! found so that no task of the policy can redirect or move them between starts.
//!
//! Each is the root's own `.git` (a directory, or a worktree's `.git` file), the `gitdir:` that file
//! names and that one's `commondir`, opened once through no symbolic link: the mount is made from
//! the descriptor ([`super::mounts`]), so what is guarded is what was checked. A start is refused
//! when one is reached through a link, named through `..` below a write root, or lies deeper than
//! directly in a write root outside that root's own `.git`: a task writing there could replace the
//! link or move the directory above it, and the person's next `git` would run the task's hooks.
//! A `.git` that is neither a directory nor a regular file (a named pipe, say) is no repository.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::OFlag;

use super::model::{fd_path, file_kind, movable_in, open_unlinked};

/// A git directory (or `.git` file) to bind read-only, opened `O_PATH`.
pub(super) struct GitDir {
    /// Where it is, for messages.
    pub(super) path: PathBuf,
    /// What was opened and checked: the mount is made from it.
    pub(super) fd: OwnedFd,
}

/// The git directories of every root in `roots` (see the module's documentation).
///
/// # Errors
/// One that a task could redirect or move: the start is refused, with the path and why.
pub(super) fn of_roots(roots: &[PathBuf]) -> std::io::Result<Vec<GitDir>> {
    let mut dirs = Vec::new();
    for root in roots {
        of_root(root, roots, &mut dirs)?;
    }
    Ok(dirs)
}

fn of_root(root: &Path, roots: &[PathBuf], dirs: &mut Vec<GitDir>) -> std::io::Result<()> {
    let dot_git = root.join(".git");
    let Some(fd) = open(&dot_git, OFlag::empty())? else {
        return Ok(());
    };
    if let Some(outer) = movable_in(&dot_git, roots) {
        return Err(refusal(format!(
            "{} lies deeper than directly in the write root {}: a task could move {} and leave \
             the repository unguarded (name only one of the two roots, or set git_writable)",
            dot_git.display(),
            outer.display(),
            root.display()
        )));
    }
    let kind = file_kind(&fd)?;
    if kind == libc::S_IFDIR {
        dirs.push(GitDir { path: dot_git, fd });
        return Ok(());
    }
    if kind != libc::S_IFREG {
        return Ok(());
    }
    let text = read_small(&fd)?;
    dirs.push(GitDir { path: dot_git, fd });
    let Some(named) = text.lines().find_map(|l| l.strip_prefix("gitdir:")) else {
        return Ok(());
    };
    let Some(gitdir) = named_dir(root, named.trim(), roots, dirs)? else {
        return Ok(());
    };
    let Some(commondir) = open(&gitdir.join("commondir"), OFlag::empty())? else {
        return Ok(());
    };
    if file_kind(&commondir)? == libc::S_IFREG {
        let text = read_small(&commondir)?;
        named_dir(&gitdir, text.trim(), roots, dirs)?;
    }
    Ok(())
}

/// Opens the directory `named` (relative to `base`) and adds it to `dirs`, returning its real path;
/// `None` when it is not there.
fn named_dir(
    base: &Path,
    named: &str,
    roots: &[PathBuf],
    dirs: &mut Vec<GitDir>,
) -> std::io::Result<Option<PathBuf>> {
    let path = base.join(named);
    let mut prefix = PathBuf::new();
    for part in path.components() {
        let movable = |root: &PathBuf| {
            prefix.starts_with(root) && prefix != *root && !in_roots_git(&prefix, root)
        };
        if part == Component::ParentDir && roots.iter().any(movable) {
            return Err(refusal(format!(
                "{} is named through `..` below the write root where {} lies: a task could put a \
                 link there",
                path.display(),
                prefix.display()
            )));
        }
        prefix.push(part);
    }
    let Some(fd) = open(&path, OFlag::O_DIRECTORY)? else {
        if let Some(root) = creatable_in(&path, roots)? {
            return Err(refusal(format!(
                "{} is not there and lies in the write root {}: a task could make it, with hooks \
                 the next `git` runs (make it, or remove the line that names it)",
                path.display(),
                root.display()
            )));
        }
        return Ok(None);
    };
    let real = std::fs::read_link(fd_path(&fd))?;
    if let Some(root) = movable_in(&real, roots)
        && !in_roots_git(&real, root)
    {
        return Err(refusal(format!(
            "{} lies deeper than directly in the write root {}, outside its .git: a task could \
             move the directory above it and leave the repository unguarded (keep it outside the \
             write roots, or set git_writable)",
            real.display(),
            root.display()
        )));
    }
    dirs.push(GitDir {
        path: real.clone(),
        fd,
    });
    Ok(Some(real))
}

/// The write root in which the missing `path` would be made (outside that root's own `.git`):
/// its nearest existing ancestor is opened through no symbolic link and taken by its real path.
fn creatable_in<'a>(path: &Path, roots: &'a [PathBuf]) -> std::io::Result<Option<&'a Path>> {
    let mut existing = path;
    while let Some(parent) = existing.parent() {
        existing = parent;
        let Some(fd) = open(existing, OFlag::O_DIRECTORY)? else {
            continue;
        };
        let real = std::fs::read_link(fd_path(&fd))?;
        let full = real.join(path.strip_prefix(existing).unwrap_or(path));
        return Ok(roots
            .iter()
            .map(PathBuf::as_path)
            .find(|root| full.starts_with(root) && !in_roots_git(&full, root)));
    }
    Ok(None)
}

/// Whether `path` lies in the `.git` directly in `root` (which is guarded too, and cannot be moved
/// by a task: it is a mount point in the namespace of every task of the policy).
fn in_roots_git(path: &Path, root: &Path) -> bool {
    path.strip_prefix(root)
        .is_ok_and(|rest| rest.components().next() == Some(Component::Normal(".git".as_ref())))
}

/// `path` opened `O_PATH` through no symbolic link; `None` when it is not there.
fn open(path: &Path, flags: OFlag) -> std::io::Result<Option<OwnedFd>> {
    match open_unlinked(path, flags) {
        Ok(fd) => Ok(Some(fd)),
        Err(Errno::ENOENT | Errno::ENOTDIR) => Ok(None),
        Err(Errno::ELOOP) => Err(refusal(format!(
            "{} is reached through a symbolic link, which a task could point at a writable \
             repository (name it by its real path, or set git_writable)",
            path.display()
        ))),
        Err(e) => Err(e.into()),
    }
}

/// The first 4 KiB of the regular file `fd` opened (a `.git` file or a `commondir` holds one line).
fn read_small(fd: &OwnedFd) -> std::io::Result<String> {
    // Reopened through its descriptor: the same file, whatever its name holds by now.
    let file = std::fs::File::open(fd_path(fd))?;
    let mut bytes = Vec::new();
    file.take(4096).read_to_end(&mut bytes)?;
    // Bytes that are no text name no directory; they refuse nothing.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn refusal(why: String) -> std::io::Error {
    std::io::Error::other(why)
}
