//! What the taskhost host's crates and the plugin ABI both need, in plain Rust (no `abi_stable`): the
//! words the model reads ([`wording`]), the text of a panic, the mark on every process the host
//! starts, and opening a file a producer's external work wrote ([`open_own_file`]). The process
//! service and the registry depend on this, not on the ABI; the SDK re-exports what plugin authors
//! use.

pub mod wording;

/// The environment variable the host marks every process it starts with (and its descendants
/// inherit): when the host or a task ends, processes carrying its mark are ended. Work handed to
/// another controller (a batch system's job) is that controller's, not the host's: its submission
/// must not pass the mark on (`env -u TASKHOST_PROCESS sbatch ...`), or a job that runs on the
/// host's own machine is ended with the host.
pub const PROCESS_MARKER: &str = "TASKHOST_PROCESS";

/// The text of a panic payload.
pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// A bad argument value as an error quotes it: its JSON text, at most 200 characters of it.
pub fn shown(value: &serde_json::Value) -> String {
    const MAX: usize = 200;
    let text = value.to_string();
    match text.char_indices().nth(MAX) {
        None => text,
        Some((at, _)) => format!(
            "{}... ({} more characters)",
            &text[..at],
            text[at..].chars().count()
        ),
    }
}

/// The error text for a `wait_for` pattern that is not a regular expression (the tasks plugin
/// checks it before waiting; the host again where it matches, for any plugin that asks).
pub fn invalid_wait_for(pattern: &str, error: &dyn std::fmt::Display) -> String {
    format!(
        "invalid wait_for: {} is not a regular expression: {error}",
        shown(&serde_json::Value::String(pattern.to_owned()))
    )
}

/// Opens for reading a file that this user owns, never through a symlink: for the output files a
/// producer's external work writes (a batch job's), whose directory others may share. The name is
/// looked at without following a link (a regular file owned by this process's effective user), then
/// opened, and the descriptor is checked to be that same file, so a name swapped in between is
/// refused.
///
/// # Errors
/// The OS error; `NotFound` when nothing is there yet; `PermissionDenied` naming what was wrong
/// (a link, not a regular file, another owner, replaced while opened).
pub fn open_own_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::io::{Error, ErrorKind};
    use std::os::unix::fs::MetadataExt;
    let refuse = |why: &str| {
        Err(Error::new(
            ErrorKind::PermissionDenied,
            format!("refusing {}: {why}", path.display()),
        ))
    };
    let named = std::fs::symlink_metadata(path)?;
    if named.file_type().is_symlink() {
        return refuse("it is a symbolic link");
    }
    if !named.is_file() {
        return refuse("it is not a regular file");
    }
    let me = own_uid()?;
    if named.uid() != me {
        return refuse(&format!("it is owned by uid {}, not {me}", named.uid()));
    }
    let file = std::fs::File::open(path)?;
    let opened = file.metadata()?;
    if (opened.dev(), opened.ino()) != (named.dev(), named.ino()) {
        return refuse("it was replaced while it was opened");
    }
    Ok(file)
}

/// This process's effective uid (std has no call for it; `/proc/self` is owned by it, and the SDK
/// takes no libc dependency).
fn own_uid() -> std::io::Result<u32> {
    use std::os::unix::fs::MetadataExt;
    Ok(std::fs::metadata("/proc/self")?.uid())
}

#[cfg(test)]
mod tests {
    use super::open_own_file;

    #[test]
    fn an_own_file_opens_and_a_link_to_it_is_refused() {
        let dir = std::env::temp_dir().join(format!("common-own-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("job.out");
        std::fs::write(&file, "out").unwrap();
        assert!(open_own_file(&file).is_ok());
        let link = dir.join("link.out");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let err = open_own_file(&link).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(
            open_own_file(&dir.join("missing")).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
