//! Reading a tool's arguments and a plugin's config: the checks every plugin needs, with the errors
//! the model sees.

use crate::ffi::ToolResult;

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

/// A text argument that must not be blank: the error result is `invalid <key>: expected a non-empty
/// string, got <json>` (at most 200 characters of it).
///
/// # Errors
/// That error result, ready to return from the tool.
pub fn non_empty(key: &str, value: String) -> Result<String, ToolResult> {
    if value.trim().is_empty() {
        Err(ToolResult::error(format!(
            "invalid {key}: expected a non-empty string, got {}",
            shown(&serde_json::Value::String(value))
        )))
    } else {
        Ok(value)
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
    use super::{non_empty, open_own_file};

    #[test]
    fn a_blank_text_argument_is_refused_naming_it_and_quoting_at_most_200_characters() {
        assert_eq!(non_empty("prompt", "go".into()), Ok("go".to_owned()));
        assert_eq!(
            non_empty("prompt", "  ".into()).unwrap_err().text.as_str(),
            "Error: invalid prompt: expected a non-empty string, got \"  \""
        );
        let long = non_empty("command", " ".repeat(5000)).unwrap_err();
        assert!(long.text.len() < 300, "{}", long.text);
    }

    #[test]
    fn an_own_file_opens_and_a_link_to_it_is_refused() {
        let dir = std::env::temp_dir().join(format!("abi-own-file-{}", std::process::id()));
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
