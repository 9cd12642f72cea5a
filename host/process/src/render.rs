//! How a process read is shown to the model.

use std::path::PathBuf;

/// Renders a read: stdout, then (if any) `[stderr]` and stderr on a line of its own; and when output
/// was dropped from memory, a notice with the full-output paths.
pub fn render_read(out: &[u8], err: &[u8], lossy: bool, spill_paths: &[PathBuf]) -> String {
    let mut text = String::from_utf8_lossy(out).into_owned();
    let err = String::from_utf8_lossy(err);
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
            render_read(b"out\n", b"err\n", false, &[]),
            "out\n[stderr]\nerr\n"
        );
        assert_eq!(render_read(b"", b"err\n", false, &[]), "[stderr]\nerr\n");
        assert_eq!(
            render_read(b"out", b"err\n", false, &[]),
            "out\n[stderr]\nerr\n"
        );
        assert_eq!(render_read(b"out", b"", false, &[]), "out");
    }

    #[test]
    fn a_lossy_read_names_the_spill_files_or_says_unavailable() {
        let p = [PathBuf::from("/a"), PathBuf::from("/b")];
        assert_eq!(
            render_read(b"x", b"", true, &p),
            "x\n[some output was dropped from memory; full output: /a, /b]"
        );
        assert_eq!(
            render_read(b"", b"", true, &[]),
            "[some output was dropped from memory; full output: (unavailable)]"
        );
    }
}
