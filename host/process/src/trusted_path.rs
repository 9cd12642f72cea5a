//! Opening a path the way only this user and root could have laid it out.
//!
//! The walk starts at `/` and opens one component at a time relative to the directory opened before
//! it, never following a symlink by name: every directory on the way must be owned by root or this
//! user and not writable by group or others unless sticky (a sticky directory lets nobody rename or
//! remove another's entry); a symlink must be root's or this user's (a sticky directory lets anyone
//! add one), is read from the trusted directory that holds it, and its target is resolved by the
//! same walk; the file (or directory) at the end is
//! checked on the descriptor that was opened, and that descriptor is what the caller reads, so what
//! was checked is what is used. A name another user could swap at any step fails the walk.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{OFlag, openat, readlinkat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat};

/// How many symlinks a walk follows before it gives up (the kernel's own limit).
const MAX_LINKS: u32 = 40;

/// Why a path was not opened. Each names the path that was asked for.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// A directory on the way, a link or the file itself could have been written by another user.
    #[error("refusing {path}: {why}")]
    Untrusted {
        /// The path asked for.
        path: PathBuf,
        /// Which step failed, and why.
        why: String,
    },
    /// The OS refused a step.
    #[error("cannot open {path}: {source}")]
    Io {
        /// The path asked for.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// What the walk is to end on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    File,
    Dir,
}

/// Opens the regular file `path` for reading after checking every directory from the root down, every
/// link on the way, and the file (owned by root or this user, not writable by group or others).
///
/// # Errors
/// [`TrustError::Untrusted`] naming the step that failed; [`TrustError::Io`] with the OS's cause.
pub fn open_trusted_file(path: &Path) -> Result<std::fs::File, TrustError> {
    walk(path, Want::File).map(std::fs::File::from)
}

/// Opens the directory `path` after checking it and every directory above it (each owned by root or
/// this user, not writable by group or others unless sticky). The descriptor can be used with `*at`
/// calls, so what is created in it is created in the directory that was checked.
///
/// # Errors
/// As [`open_trusted_file`].
pub fn open_trusted_dir(path: &Path) -> Result<OwnedFd, TrustError> {
    walk(path, Want::Dir)
}

/// How `/` is opened to start a walk: to be looked at.
const ROOT_FLAGS: OFlag = OFlag::O_PATH
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_CLOEXEC);

/// The path being walked and the user walking it, to word the walk's errors.
struct Walker<'a> {
    path: &'a Path,
    euid: u32,
}

impl Walker<'_> {
    fn io(&self, e: Errno) -> TrustError {
        TrustError::Io {
            path: self.path.to_owned(),
            source: e.into(),
        }
    }

    fn refuse(&self, step: &Path, why: &str) -> TrustError {
        TrustError::Untrusted {
            path: self.path.to_owned(),
            why: format!("{} {why}", step.display()),
        }
    }

    /// Follows the link `fd` (at `here`, whose stat is `st`): only root's or ours, at most
    /// [`MAX_LINKS`] in a walk; its target's components are walked next, from `/` if absolute.
    fn follow(
        &self,
        (fd, st, here): (&OwnedFd, &FileStat, &Path),
        links: &mut u32,
        stack: &mut Vec<(OwnedFd, PathBuf)>,
        pending: &mut Vec<OsString>,
    ) -> Result<(), TrustError> {
        *links += 1;
        if *links > MAX_LINKS {
            return Err(self.io(Errno::ELOOP));
        }
        // A sticky directory lets any user add a link: only root's or ours is followed.
        owned_by_us_or_root(st, self.euid).map_err(|why| self.refuse(here, why))?;
        let target = PathBuf::from(readlinkat(fd, "").map_err(|e| self.io(e))?);
        if target.is_absolute() {
            stack.truncate(1);
        }
        pending.extend(components(&target).into_iter().rev());
        Ok(())
    }
}

fn walk(path: &Path, want: Want) -> Result<OwnedFd, TrustError> {
    let absolute = std::path::absolute(path).map_err(|source| TrustError::Io {
        path: path.to_owned(),
        source,
    })?;
    let w = Walker {
        path,
        euid: nix::unistd::geteuid().as_raw(),
    };
    let root = nix::fcntl::open("/", ROOT_FLAGS, Mode::empty()).map_err(|e| w.io(e))?;
    check_dir(&fstat(&root).map_err(|e| w.io(e))?, w.euid)
        .map_err(|why| w.refuse(Path::new("/"), why))?;
    // The directories open so far, from the root down, with the path they stand for.
    let mut stack: Vec<(OwnedFd, PathBuf)> = vec![(root, PathBuf::from("/"))];
    let mut pending: Vec<OsString> = components(&absolute);
    pending.reverse();
    let mut links = 0;
    while let Some(name) = pending.pop() {
        if name == ".." {
            if stack.len() > 1 {
                stack.pop();
            }
            continue;
        }
        let last = pending.is_empty();
        // The root is never popped, so there is always a directory to open the name in.
        let (dir, dir_path) = stack.last().ok_or_else(|| w.refuse(path, "has no root"))?;
        let here = dir_path.join(&name);
        let fd = open_step(dir.as_fd(), &name, last, want).map_err(|e| w.io(e))?;
        let st = fstat(&fd).map_err(|e| w.io(e))?;
        match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFLNK => w.follow((&fd, &st, &here), &mut links, &mut stack, &mut pending)?,
            SFlag::S_IFDIR => {
                check_dir(&st, w.euid).map_err(|why| w.refuse(&here, why))?;
                if last && want == Want::Dir {
                    return Ok(fd);
                }
                stack.push((fd, here));
            }
            SFlag::S_IFREG if last && want == Want::File => {
                check_file(&st, w.euid).map_err(|why| w.refuse(&here, why))?;
                return Ok(fd);
            }
            _ if last => {
                let why = match want {
                    Want::File => "is not a regular file",
                    Want::Dir => "is not a directory",
                };
                return Err(w.refuse(&here, why));
            }
            _ => return Err(w.refuse(&here, "is not a directory")),
        }
    }
    // The path ended on a directory (or on `/`): wanted as a directory, it is opened for use.
    let (dir, at) = stack.last().ok_or_else(|| w.refuse(path, "has no root"))?;
    match want {
        Want::Dir => open_for_use(dir).map_err(|e| w.io(e)),
        Want::File => Err(w.refuse(at, "is a directory")),
    }
}

/// The directory `dir` (opened to be looked at) opened again for use.
fn open_for_use(dir: &OwnedFd) -> Result<OwnedFd, Errno> {
    openat(
        dir,
        ".",
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// Opens `name` in `dir` without following a link: the end of the walk (`last`) for use, every step
/// before it only to be looked at. A symlink at the end, or a non-directory where one is wanted, is
/// opened as it is, to be looked at.
fn open_step(dir: BorrowedFd<'_>, name: &OsStr, last: bool, want: Want) -> Result<OwnedFd, Errno> {
    let flags = match (last, want) {
        (true, Want::File) => OFlag::O_RDONLY | OFlag::O_NONBLOCK,
        (true, Want::Dir) => OFlag::O_RDONLY | OFlag::O_DIRECTORY,
        _ => OFlag::O_PATH,
    } | OFlag::O_NOFOLLOW
        | OFlag::O_CLOEXEC;
    match openat(dir, name, flags, Mode::empty()) {
        Err(Errno::ELOOP | Errno::ENOTDIR) => openat(
            dir,
            name,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            Mode::empty(),
        ),
        other => other,
    }
}

/// The names of `path` past its root, with `.` dropped and `..` kept for the walk.
fn components(path: &Path) -> Vec<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some(OsStr::from_bytes(b"..").to_owned()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

fn owned_by_us_or_root(st: &FileStat, euid: u32) -> Result<(), &'static str> {
    if st.st_uid == euid || st.st_uid == 0 {
        Ok(())
    } else {
        Err("is owned by another user")
    }
}

/// A directory on the way: root's or ours, and nobody else can rename its entries.
fn check_dir(st: &FileStat, euid: u32) -> Result<(), &'static str> {
    owned_by_us_or_root(st, euid)?;
    let sticky = st.st_mode & libc::S_ISVTX != 0;
    if st.st_mode & 0o022 != 0 && !sticky {
        return Err("is writable by group or others (and not sticky)");
    }
    Ok(())
}

/// The file at the end: root's or ours, and nobody else can write to it.
fn check_file(st: &FileStat, euid: u32) -> Result<(), &'static str> {
    owned_by_us_or_root(st, euid)?;
    if st.st_mode & 0o022 != 0 {
        return Err("is writable by group or others");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("trusted-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        d
    }

    #[test]
    fn a_file_through_a_link_in_a_trusted_directory_opens() {
        let d = scratch("link");
        std::fs::create_dir(d.join("real")).unwrap();
        std::fs::write(d.join("real/lib.so"), b"x").unwrap();
        std::os::unix::fs::symlink("real", d.join("link")).unwrap();
        std::os::unix::fs::symlink("../real/lib.so", d.join("real/again")).unwrap();
        assert!(open_trusted_file(&d.join("link/lib.so")).is_ok());
        assert!(open_trusted_file(&d.join("link/again")).is_ok());
        assert!(open_trusted_dir(&d.join("link")).is_ok());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_world_writable_directory_on_the_way_or_a_writable_file_is_refused() {
        let d = scratch("open");
        std::fs::create_dir(d.join("open")).unwrap();
        std::fs::write(d.join("open/lib.so"), b"x").unwrap();
        std::fs::set_permissions(d.join("open"), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = open_trusted_file(&d.join("open/lib.so")).unwrap_err();
        assert!(
            e.to_string()
                .contains("is writable by group or others (and not sticky)"),
            "{e}"
        );
        std::fs::set_permissions(d.join("open"), std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(
            open_trusted_file(&d.join("open/lib.so")).is_ok(),
            "sticky is fine"
        );
        std::fs::set_permissions(
            d.join("open/lib.so"),
            std::fs::Permissions::from_mode(0o666),
        )
        .unwrap();
        let e = open_trusted_file(&d.join("open/lib.so")).unwrap_err();
        assert!(
            e.to_string()
                .contains("lib.so is writable by group or others"),
            "{e}"
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn another_users_link_in_a_sticky_directory_is_not_followed() {
        let d = scratch("sticky-link");
        std::fs::create_dir(d.join("shared")).unwrap();
        std::fs::set_permissions(d.join("shared"), std::fs::Permissions::from_mode(0o1777))
            .unwrap();
        std::fs::create_dir(d.join("trusted")).unwrap();
        let link = d.join("shared/link");
        std::os::unix::fs::symlink(d.join("trusted"), &link).unwrap();
        assert!(open_trusted_dir(&link).is_ok(), "our own link is followed");
        // `nobody`'s link, as that user could make in a sticky directory (only root can give one).
        if std::os::unix::fs::lchown(&link, Some(65534), Some(65534)).is_ok() {
            let e = open_trusted_dir(&link).unwrap_err();
            assert!(
                e.to_string().contains("link is owned by another user"),
                "{e}"
            );
            let e = open_trusted_dir(&link.join("below")).unwrap_err();
            assert!(e.to_string().contains("is owned by another user"), "{e}");
        }
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_directory_is_not_a_file_and_a_link_loop_ends() {
        let d = scratch("kinds");
        assert!(
            open_trusted_file(&d)
                .unwrap_err()
                .to_string()
                .contains("is a directory")
        );
        std::os::unix::fs::symlink("loop", d.join("loop")).unwrap();
        assert!(open_trusted_file(&d.join("loop")).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
