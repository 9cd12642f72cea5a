//! How a process read is shown to the model.

use std::path::PathBuf;

use taskhost_common::wording::{STDERR_HEADER, dropped_output, line_break};

use crate::coloured::render_coloured;
use crate::terminal::render_terminal;

/// How a read draws its output: as plain text (what the model reads), or with its colours and
/// styles kept as canonical SGR sequences (what a person's view shows; see [`render_coloured`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Drawn {
    /// Escape sequences and controls removed ([`render_terminal`]).
    #[default]
    Plain,
    /// As `Plain`, with SGR colours and styles kept ([`render_coloured`]).
    Coloured,
}

/// A spill file a read names: its path, and whether it holds only the head and the latest output of
/// a stream that outgrew the spill cap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpillRef {
    /// The file.
    pub path: PathBuf,
    /// True when the middle of the stream was skipped.
    pub head_and_tail: bool,
}

/// Renders a read: stdout, then (if any) `[stderr]` and stderr on a line of its own; and when output
/// was dropped from memory, a notice naming the spill files (and saying when one holds only the head
/// and the tail of its stream). Both streams are shown as a terminal draws them, escape sequences
/// and controls removed ([`render_terminal`]), whether or not the process ran on one.
pub fn render_read(out: &[u8], err: &[u8], lossy: bool, spills: &[SpillRef]) -> String {
    render_read_drawn(out, err, lossy, spills, Drawn::Plain)
}

/// As [`render_read`], each stream drawn as `drawn` says.
pub fn render_read_drawn(
    out: &[u8],
    err: &[u8],
    lossy: bool,
    spills: &[SpillRef],
    drawn: Drawn,
) -> String {
    let draw = match drawn {
        Drawn::Plain => render_terminal,
        Drawn::Coloured => render_coloured,
    };
    let mut text = draw(out);
    let err = draw(err);
    if !err.is_empty() {
        text.push_str(line_break(&text));
        text.push_str(STDERR_HEADER);
        text.push_str(&err);
    }
    if lossy {
        text.push_str(line_break(&text));
        let paths = if spills.is_empty() {
            "(unavailable)".to_owned()
        } else {
            spills
                .iter()
                .map(|s| {
                    if s.head_and_tail {
                        format!(
                            "{} (its head and its latest output; the middle was skipped)",
                            s.path.display()
                        )
                    } else {
                        s.path.display().to_string()
                    }
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        text.push_str(&dropped_output(&paths));
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
        let spill = |p: &str, head_and_tail| SpillRef {
            path: PathBuf::from(p),
            head_and_tail,
        };
        let p = [spill("/a", false), spill("/b", false)];
        assert_eq!(
            render_read(b"x", b"", true, &p),
            "x\n[some output was dropped from memory; full output: /a, /b]"
        );
        assert_eq!(
            render_read(b"x", b"", true, &[spill("/a", true)]),
            "x\n[some output was dropped from memory; full output: /a (its head and its latest output; the middle was skipped)]"
        );
        assert_eq!(
            render_read(b"", b"", true, &[]),
            "[some output was dropped from memory; full output: (unavailable)]"
        );
    }
}
