//! What a terminal shows, as plain text: the output of a task run under a pseudo-terminal, for the
//! model. Escape sequences (colours, cursor movement, mode switches, titles) are dropped, a carriage
//! return moves back to the start of the line so later text overwrites earlier text (a progress bar
//! collapses to its last state), a backspace moves back one column, and `\r\n` is a line end.
//!
//! Each call renders the bytes it is given: a line overwritten across two reads shows in both.

/// The escape-sequence state between bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Escape {
    None,
    /// After ESC.
    Start,
    /// Inside a CSI sequence (`ESC [` ... final byte).
    Csi,
    /// Inside an OSC, DCS, SOS, PM or APC string (ended by BEL or `ESC \`).
    Text,
    /// ESC seen inside such a string.
    TextEsc,
    /// After an ESC that takes one more byte (`ESC ( B`, `ESC # 8`).
    OneMore,
}

/// One line being drawn: its characters and the cursor's column.
#[derive(Default)]
struct Line {
    chars: Vec<char>,
    col: usize,
}

impl Line {
    fn put(&mut self, c: char) {
        if self.col < self.chars.len() {
            self.chars[self.col] = c;
        } else {
            self.chars.push(c);
        }
        self.col += 1;
    }

    fn flush_into(&mut self, out: &mut String) {
        out.extend(self.chars.drain(..));
        self.col = 0;
    }
}

/// The text a terminal would show for `bytes` (lossy UTF-8), escape sequences removed and
/// carriage-return overwrites collapsed.
pub fn render_terminal(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let mut out = String::with_capacity(text.len());
    let mut line = Line::default();
    let mut esc = Escape::None;
    for c in text.chars() {
        esc = match (esc, c) {
            (Escape::None, '\x1b') => Escape::Start,
            (Escape::None, '\n') => {
                line.flush_into(&mut out);
                out.push('\n');
                Escape::None
            }
            (Escape::None, '\r') => {
                line.col = 0;
                Escape::None
            }
            (Escape::None, '\x08') => {
                line.col = line.col.saturating_sub(1);
                Escape::None
            }
            (Escape::None, '\t') => {
                line.put('\t');
                Escape::None
            }
            (Escape::None, c) if c.is_control() => Escape::None,
            (Escape::None, c) => {
                line.put(c);
                Escape::None
            }
            (Escape::Start, '[') => Escape::Csi,
            (Escape::Start, ']' | 'P' | 'X' | '^' | '_') => Escape::Text,
            (Escape::Start, '(' | ')' | '*' | '+' | '#' | '%') => Escape::OneMore,
            (Escape::Start, _) | (Escape::OneMore, _) => Escape::None,
            (Escape::Csi, '\x40'..='\x7e') => Escape::None,
            (Escape::Csi, _) => Escape::Csi,
            (Escape::Text, '\x07') => Escape::None,
            (Escape::Text, '\x1b') => Escape::TextEsc,
            (Escape::Text, _) => Escape::Text,
            (Escape::TextEsc, '\\') => Escape::None,
            (Escape::TextEsc, _) => Escape::Text,
        };
    }
    line.flush_into(&mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::render_terminal;

    #[test]
    fn colour_and_mode_escapes_are_dropped() {
        assert_eq!(
            render_terminal(b"\x1b[?2004h\x1b[1;31merror\x1b[0m: bad\r\n"),
            "error: bad\n"
        );
        assert_eq!(
            render_terminal(
                b"\x1b]0;window title\x07prompt$ \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"
            ),
            "prompt$ link"
        );
        assert_eq!(render_terminal(b"\x1b(Bplain\x1b=\x1b>"), "plain");
    }

    #[test]
    fn carriage_returns_collapse_to_what_the_line_last_showed() {
        assert_eq!(
            render_terminal(b"progress 10%\rprogress 55%\rprogress 100%\r\ndone\r\n"),
            "progress 100%\ndone\n"
        );
        assert_eq!(render_terminal(b"abcdef\r12"), "12cdef");
        assert_eq!(render_terminal(b"ab\x08\x08xy\n"), "xy\n");
    }

    #[test]
    fn text_without_escapes_is_unchanged() {
        let text = "line one\n\tindented — ünïcode\nlast";
        assert_eq!(render_terminal(text.as_bytes()), text);
    }
}
