//! The host's private runtime directory: where its generation copies, spill files and lock live.
//!
//! One directory per host, never an existing one: `$XDG_RUNTIME_DIR/taskhost/host-<pid>.XXXXXX` when
//! `XDG_RUNTIME_DIR` is set and safe (an absolute directory owned by this user that nobody else can
//! enter), else `<temp dir>/taskhost-<pid>.XXXXXX` when no other user can rename entries anywhere on
//! the temp dir's way from the root (else under `/tmp`), both made the way `mkdtemp` makes them
//! (unpredictable name, created exclusively, mode 0700) relative to the base's descriptor, and held
//! open: `gen/`, `spill/` and the lock are made relative to the held descriptor, never by a path
//! looked up again. Nothing another local user can write is on the way to a file in it, so no name
//! the host opens there can be planted. The host holds an exclusive `flock` on `<dir>/lock` for its whole life:
//! the lock is what tells a live host's directory from one a dead host left behind.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::{Flock, FlockArg};
pub use taskhost_process::private_dir::{
    HeldDir, PrivateDirError, check_private, ensure_private, euid, make_fresh,
};
use taskhost_process::trusted_path::open_trusted_dir;

/// One host's private directory, removed with everything in it when dropped.
#[derive(Debug)]
pub struct RunDir {
    dir: HeldDir,
    generations: HeldDir,
    spills: HeldDir,
    /// Held for the host's life; released by the kernel however the host ends.
    _lock: Flock<File>,
}

impl RunDir {
    /// Creates this host's directory under `$XDG_RUNTIME_DIR/taskhost/` when that is set and safe,
    /// else under the temp dir, with its `gen/` and `spill/` subdirectories and its lock.
    ///
    /// # Errors
    /// When no private directory can be made.
    pub fn create() -> Result<Self, PrivateDirError> {
        let (base, prefix) = Self::base();
        let kind = prefix.split('-').next().unwrap_or_default();
        let removed = remove_dead(&base, &format!("{kind}-"));
        if removed > 0 {
            tracing::info!(removed, base = %base.display(), "removed what dead hosts left");
        }
        Self::create_in(&base, &prefix)
    }

    /// Where hosts of this user keep their directories, and the prefix of their names: a private
    /// `$XDG_RUNTIME_DIR/taskhost`, else the temp dir when no other user can rename entries on its
    /// way (every directory from the root down root's or ours, and not writable by others unless
    /// sticky), else `/tmp` (a `TMPDIR` another user controls is said and not used).
    pub fn base() -> (PathBuf, String) {
        let pid = std::process::id();
        if let Some(runtime) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
            && runtime.is_absolute()
            && check_private(&runtime).is_ok()
        {
            let base = runtime.join("taskhost");
            if ensure_private(&base).is_ok() {
                return (base, format!("host-{pid}."));
            }
        }
        let temp = std::env::temp_dir();
        let base = match open_trusted_dir(&temp) {
            Ok(_) => temp,
            Err(e) => {
                tracing::warn!(error = %e, "not using the temp dir for the host's files; using /tmp");
                PathBuf::from("/tmp")
            }
        };
        (base, format!("taskhost-{pid}."))
    }

    /// Creates a host directory `<base>/<prefix>XXXXXX`; everything in it is created relative to
    /// the held directory.
    ///
    /// # Errors
    /// When the base is not trusted, or the directory cannot be created, checked or locked.
    pub fn create_in(base: &Path, prefix: &str) -> Result<Self, PrivateDirError> {
        let dir = make_fresh(base, prefix)?;
        let path = dir.path().to_owned();
        let made = (|| {
            let generations = dir.make_dir("gen")?;
            let spills = dir.make_dir("spill")?;
            let file = dir
                .create_new("lock", 0o600)
                .map_err(|source| PrivateDirError::Io {
                    path: path.join("lock"),
                    source,
                })?;
            let lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
                PrivateDirError::Io {
                    path: path.join("lock"),
                    source: e.into(),
                }
            })?;
            Ok((generations, spills, lock))
        })();
        match made {
            Ok((generations, spills, lock)) => Ok(Self {
                dir,
                generations,
                spills,
                _lock: lock,
            }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&path);
                Err(e)
            }
        }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Where generation copies go.
    pub fn generations(&self) -> PathBuf {
        self.generations.path().to_owned()
    }

    /// Where spill files go (unless configured elsewhere).
    pub fn spills(&self) -> PathBuf {
        self.spills.path().to_owned()
    }
}

/// Removes the directories dead hosts of this user left in `base` (named `<kind>...`, as
/// [`RunDir::create_in`] makes them): a private directory of ours with a `lock` file that nobody holds.
/// A live host holds its lock, so its directory is never touched. Returns how many were removed.
pub fn remove_dead(base: &Path, kind: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let path = entry.path();
        let named = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(kind) && n.contains('.'));
        if !named || check_private(&path).is_err() {
            continue;
        }
        let lock = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path.join("lock"));
        let Ok(lock) = lock else { continue };
        if let Ok(held) = Flock::lock(lock, FlockArg::LockExclusiveNonblock) {
            if std::fs::remove_dir_all(&path).is_ok() {
                removed += 1;
            }
            drop(held);
        }
    }
    removed
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.dir.path());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// A scratch base directory, removed at the end.
    struct Scratch(PathBuf);
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    fn scratch(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("taskhost-rundir-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch");
        Scratch(dir)
    }

    #[test]
    fn a_host_directory_is_fresh_private_and_removed_when_dropped() {
        let base = scratch("fresh");
        let a = RunDir::create_in(&base.0, "h.").expect("create");
        let b = RunDir::create_in(&base.0, "h.").expect("create");
        assert_ne!(a.path(), b.path());
        for p in [a.path().to_owned(), a.generations(), a.spills()] {
            let m = std::fs::symlink_metadata(&p).expect("exists");
            assert_eq!(m.permissions().mode() & 0o777, 0o700, "{}", p.display());
            assert_eq!(m.uid(), euid());
        }
        let path = a.path().to_owned();
        drop(a);
        assert!(!path.exists());
    }

    #[test]
    fn an_existing_directory_is_accepted_only_when_private_and_ours() {
        let base = scratch("existing");
        let open = base.0.join("open");
        std::fs::create_dir(&open).expect("mkdir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let err = ensure_private(&open)
            .expect_err("0777 accepted")
            .to_string();
        assert!(err.contains("open to other users"), "{err}");
        let link = base.0.join("link");
        symlink(&open, &link).expect("symlink");
        let err = ensure_private(&link)
            .expect_err("symlink accepted")
            .to_string();
        assert!(err.contains("symbolic link"), "{err}");
        let theirs = base.0.join("theirs");
        std::fs::create_dir(&theirs).expect("mkdir");
        std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        if euid() == 0 {
            nix::unistd::chown(&theirs, Some(nix::unistd::Uid::from_raw(65534)), None)
                .expect("chown");
            let err = ensure_private(&theirs)
                .expect_err("foreign accepted")
                .to_string();
            assert!(err.contains("owned by uid 65534"), "{err}");
        }
        ensure_private(&base.0.join("new")).expect("a new directory is made private");
    }

    #[test]
    fn only_the_directories_of_dead_hosts_are_removed() {
        let base = scratch("dead");
        let live = RunDir::create_in(&base.0, "host-1.").expect("create");
        let make = |name: &str, mode: u32, lock: bool| {
            let p = base.0.join(name);
            std::fs::create_dir(&p).expect("mkdir");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
            if lock {
                std::fs::write(p.join("lock"), b"").expect("lock");
            }
            p
        };
        // A dead host's directory: its lock file is there and nobody holds it.
        let dead = make("host-2.abcdef", 0o700, true);
        let unlocked = make("host-3.abcdef", 0o700, false);
        let open = make("host-4.abcdef", 0o755, true);
        let other = make("other-5.abcdef", 0o700, true);
        assert_eq!(remove_dead(&base.0, "host-"), 1);
        assert!(!dead.exists());
        for kept in [live.path(), &unlocked, &open, &other] {
            assert!(kept.exists(), "{}", kept.display());
        }
    }

    #[test]
    fn the_lock_is_held_while_the_host_lives() {
        let base = scratch("lock");
        let dir = RunDir::create_in(&base.0, "h.").expect("create");
        let file = File::open(dir.path().join("lock")).expect("open");
        assert!(Flock::lock(file, FlockArg::LockExclusiveNonblock).is_err());
    }
}
