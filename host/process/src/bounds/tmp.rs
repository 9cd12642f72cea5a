//! A private `/tmp` for a bounded task (`private_tmp = true`): an empty tmpfs of its own over
//! `/tmp`, writable by the task, seen by no other process, and gone with the task's mount
//! namespace. Nothing another principal, the host or an earlier host left in `/tmp` is in sight.
//!
//! A writable root below `/tmp` stays where it was: it is bound back at its own path inside the new
//! `/tmp`, with the mounts made beneath it before (hidden paths and read-only `.git` stay so). A
//! working directory below `/tmp` outside every writable root is not: the task starts in an empty
//! directory of that path in its own `/tmp`. (Bound back, it would be writable: Landlock grants the
//! new `/tmp`'s rights to everything mounted beneath it.) Anything else below `/tmp`, such as a
//! program or an X11 socket there, is out of the task's sight.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::mount::{MsFlags, mount};

/// The directory a private `/tmp` covers.
pub(super) const TMP: &str = "/tmp";

/// Covers `/tmp` with an empty tmpfs, binds each writable root of `keep` below it back at its own
/// path, and makes `cwd` exist (see the module's documentation).
pub(super) fn make(keep: &[&Path], cwd: &Path) -> std::io::Result<()> {
    let kept = below_tmp(keep)
        .into_iter()
        .map(|path| {
            // Through no symlink, as its Landlock rule opens it: bound through one, a root would
            // bring the link's target into the task's `/tmp`, writable.
            let fd = super::model::open_unlinked(&path, OFlag::O_DIRECTORY)?;
            Ok((path, fd))
        })
        .collect::<std::io::Result<Vec<(PathBuf, OwnedFd)>>>()?;
    let none = None::<&str>;
    mount(
        Some("tmpfs"),
        TMP,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some("mode=1777"),
    )?;
    for (path, fd) in kept {
        std::fs::create_dir_all(&path)?;
        let source = super::model::fd_path(&fd);
        mount(
            Some(&source),
            &path,
            none,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            none,
        )?;
    }
    if cwd.starts_with(TMP) {
        std::fs::create_dir_all(cwd)?;
    }
    Ok(())
}

/// The paths of `keep` strictly below `/tmp`, without one that lies below another (binding the
/// outer one brings it).
fn below_tmp(keep: &[&Path]) -> Vec<PathBuf> {
    let mut below: Vec<PathBuf> = keep
        .iter()
        .filter(|p| p.starts_with(TMP) && **p != Path::new(TMP))
        .map(|p| p.to_path_buf())
        .collect();
    below.sort_by_key(|p| p.components().count());
    let mut outer: Vec<PathBuf> = Vec::new();
    for path in below {
        if !outer.iter().any(|o| path.starts_with(o)) {
            outer.push(path);
        }
    }
    outer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_outermost_paths_below_tmp_are_bound_back() {
        let keep = [
            Path::new("/tmp/work/sub"),
            Path::new("/srv/work"),
            Path::new("/tmp"),
            Path::new("/tmp/work"),
            Path::new("/tmpx/other"),
            Path::new("/tmp/cwd"),
        ];
        assert_eq!(
            below_tmp(&keep),
            [PathBuf::from("/tmp/work"), PathBuf::from("/tmp/cwd")]
        );
    }
}
