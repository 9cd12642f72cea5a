//! Kept output files: how the database names a task's kept stream, and how the store reaches it.
//!
//! A kept file is named by a plain file name in the state directory's `output/` (not empty, not `.`
//! or `..`, no `/`, no NUL), never by a path. Every read, size and removal goes through the held
//! descriptor of `output/` (`openat`, `fstatat`, `unlinkat`) without following a symlink, so no row
//! of the database, whoever wrote it, points the host at a file outside `output/`, and no name
//! planted in `output/` leads out of it. Databases of schema 6 and before stored absolute paths;
//! [`name_stored_paths`] turns those of files in this `output/` into names.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{Mode, SFlag};
use nix::unistd::UnlinkatFlags;
use rusqlite::{Transaction, params};

use taskhost_process::private_dir::HeldDir;

/// Why `name` is not a kept file's name, or `None` when it is one.
pub(crate) fn bad_name(name: &str) -> Option<&'static str> {
    if name.is_empty() || name == "." || name == ".." {
        Some("is not a file name")
    } else if name.contains('/') {
        Some("names a path, not a file in output/")
    } else if name.contains('\0') {
        Some("holds a NUL")
    } else {
        None
    }
}

/// The name the database records for the kept file at `path`, which the host made in `output`:
/// its file name when it is directly in `output` (`None` for any other file).
pub(crate) fn name_of(output: &HeldDir, path: &Path) -> Option<String> {
    let name = path.file_name()?.to_str()?;
    (path.parent() == Some(output.path()) && bad_name(name).is_none()).then(|| name.to_owned())
}

/// The kept file `name` opened for reading: `None` when there is none (a task that wrote nothing).
///
/// # Errors
/// A name that is not a kept file's name, a symlink (`ELOOP`), anything but a regular file, or the
/// OS's.
pub(crate) fn open(output: &HeldDir, name: &str) -> std::io::Result<Option<std::fs::File>> {
    if let Some(why) = bad_name(name) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{name:?} {why}"),
        ));
    }
    let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
    let file = match nix::fcntl::openat(output, name, flags, Mode::empty()) {
        Ok(fd) => std::fs::File::from(fd),
        Err(Errno::ENOENT) => return Ok(None),
        Err(Errno::ELOOP) => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{name:?} in output/ is a symbolic link, not followed"),
            ));
        }
        Err(e) => return Err(e.into()),
    };
    if !file.metadata()?.file_type().is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{name:?} in output/ is not a regular file"),
        ));
    }
    Ok(Some(file))
}

/// The size of the kept file `name` (0 for none, a bad name, or anything but a regular file).
pub(crate) fn size(output: &HeldDir, name: &str) -> u64 {
    if bad_name(name).is_some() {
        return 0;
    }
    match nix::sys::stat::fstatat(output, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) if SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFREG => {
            u64::try_from(st.st_size).unwrap_or(0)
        }
        _ => 0,
    }
}

/// Removes the kept file `name` from `output` (a symlink there is removed itself, never its
/// target; a bad name removes nothing).
pub(crate) fn remove(output: &HeldDir, name: &str) {
    if bad_name(name).is_none() {
        let _ = nix::unistd::unlinkat(output, name, UnlinkatFlags::NoRemoveDir);
    }
}

/// Schema 7: every kept output recorded as an absolute path of a file in `output` (the directory
/// held, whatever path it was reached by) becomes its name. Anything else is left as it was, and
/// each read refuses the row then ([`bad_name`]).
pub(crate) fn name_stored_paths(tx: &Transaction<'_>, output: &HeldDir) -> rusqlite::Result<()> {
    let here = nix::sys::stat::fstat(output).map(|st| (st.st_dev, st.st_ino));
    let in_output = |stored: &str| -> Option<String> {
        let path = Path::new(stored);
        let name = path.file_name()?.to_str()?;
        let meta = std::fs::metadata(path.parent()?).ok()?;
        let same = here.ok() == Some((meta.dev(), meta.ino()));
        (path.is_absolute() && same && bad_name(name).is_none()).then(|| name.to_owned())
    };
    let rows: Vec<(i64, Option<String>, Option<String>)> = tx
        .prepare(
            "SELECT rowid, stdout_path, stderr_path FROM tasks
             WHERE stdout_path IS NOT NULL OR stderr_path IS NOT NULL",
        )?
        .query_map([], |r| {
            // A value that is not text is no path; it is left for reads to refuse.
            let text = |i| r.get::<_, Option<String>>(i).ok().flatten();
            Ok((r.get(0)?, text(1), text(2)))
        })?
        .collect::<rusqlite::Result<_>>()?;
    for (rowid, stdout, stderr) in rows {
        for (column, stored) in [("stdout_path", stdout), ("stderr_path", stderr)] {
            if let Some(name) = stored.as_deref().and_then(in_output) {
                tx.execute(
                    &format!("UPDATE tasks SET {column} = ?2 WHERE rowid = ?1"),
                    params![rowid, name],
                )?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_plain_file_name_names_kept_output() {
        for bad in ["", ".", "..", "a/b", "../x", "/etc/hostname", "a\0b"] {
            assert!(bad_name(bad).is_some(), "{bad:?}");
        }
        for good in ["taskhost-1-2-abc-stdout.log", "..x", "a.b"] {
            assert!(bad_name(good).is_none(), "{good:?}");
        }
    }

    #[test]
    fn a_symlink_in_output_is_neither_read_nor_measured_and_removing_it_spares_its_target() {
        let dir = std::env::temp_dir().join(format!("taskhost-kept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, b"secret").unwrap();
        let output = dir.join("output");
        let held = HeldDir::ensure(&output).unwrap();
        std::os::unix::fs::symlink(&victim, output.join("link.log")).unwrap();
        assert!(open(&held, "link.log").is_err());
        assert_eq!(size(&held, "link.log"), 0);
        remove(&held, "link.log");
        assert!(!output.join("link.log").exists());
        assert_eq!(std::fs::read(&victim).unwrap(), b"secret");
        assert_eq!(
            name_of(&held, &output.join("x.log")).as_deref(),
            Some("x.log")
        );
        assert_eq!(name_of(&held, &victim), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
