//! How a process read is shown to the model.

use std::path::PathBuf;

/// Renders a read: stdout, then (if any) `[stderr]` and stderr on a line of its own; a spawn failure
/// as a stderr line; and when output was dropped from memory, a notice with the full-output paths.
pub fn render_read(
    out: &[u8],
    err: &[u8],
    lossy: bool,
    spill_paths: &[PathBuf],
    spawn_error: Option<&str>,
) -> String {
    let mut text = String::from_utf8_lossy(out).into_owned();
    let mut err = String::from_utf8_lossy(err).into_owned();
    if let Some(e) = spawn_error {
        if !err.is_empty() && !err.ends_with('\n') {
            err.push('\n');
        }
        err.push_str(&format!("spawn failed: {e}\n"));
    }
    if !err.is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str("[stderr]\n");
        text.push_str(&err);
    }
    if lossy {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        let paths = if spill_paths.is_empty() {
            "(unavailable)".to_owned()
        } else {
            spill_paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        text.push_str(&format!(
            "[some output was dropped from memory; full output: {paths}]"
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdout_and_stderr_render_with_a_separator_only_when_needed() {
        assert_eq!(
            render_read(b"out\n", b"err\n", false, &[], None),
            "out\n[stderr]\nerr\n"
        );
        assert_eq!(
            render_read(b"", b"err\n", false, &[], None),
            "[stderr]\nerr\n"
        );
        assert_eq!(
            render_read(b"out", b"err\n", false, &[], None),
            "out\n[stderr]\nerr\n"
        );
        assert_eq!(render_read(b"out", b"", false, &[], None), "out");
    }

    #[test]
    fn a_lossy_read_names_the_spill_files_or_says_unavailable() {
        let p = [PathBuf::from("/a"), PathBuf::from("/b")];
        assert_eq!(
            render_read(b"x", b"", true, &p, None),
            "x\n[some output was dropped from memory; full output: /a, /b]"
        );
        assert_eq!(
            render_read(b"", b"", true, &[], None),
            "[some output was dropped from memory; full output: (unavailable)]"
        );
    }

    #[test]
    fn a_spawn_failure_reads_as_stderr() {
        assert_eq!(
            render_read(b"", b"", false, &[], Some("No such file")),
            "[stderr]\nspawn failed: No such file\n"
        );
    }
}
