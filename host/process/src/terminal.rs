//! What the model reads of a process's output: plain text as a terminal would show it, for every
//! task, on a terminal or not (the spill files keep the raw bytes).
//!
//! The bytes go through `vte` (Alacritty's parser), so every escape sequence a terminal knows is
//! recognised as one and dropped whole: CSI (colours, cursor movement, modes), OSC (window titles,
//! OSC 8 links, OSC 52 clipboard writes), DCS, SOS, PM and APC strings. Of the C0 and C1 controls
//! only newline and tab remain: a carriage return moves back to the start of the line so later text
//! overwrites earlier text (a progress bar collapses to its last state), a backspace moves back one
//! column, `\r\n` is a line end, vertical tab, form feed and NEL start a new line, and every other
//! control is dropped. A C1 control sent as a raw 8-bit byte (`0x9b` for `ESC [`), which is not
//! UTF-8, is read as its 7-bit form, so its sequence is dropped too; other bytes that are not UTF-8
//! show as U+FFFD.
//!
//! Each call renders the bytes it is given: a line overwritten across two reads shows in both.

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

/// The text drawn so far.
struct Screen {
    out: String,
    line: Line,
}

impl Screen {
    fn new_line(&mut self) {
        self.line.flush_into(&mut self.out);
        self.out.push('\n');
    }
}

impl vte::Perform for Screen {
    fn print(&mut self, c: char) {
        if !c.is_control() {
            self.line.put(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' | 0x0b | 0x0c => self.new_line(),
            b'\r' => self.line.col = 0,
            0x08 => self.line.col = self.line.col.saturating_sub(1),
            b'\t' => self.line.put('\t'),
            _ => {}
        }
    }

    fn esc_dispatch(&mut self, intermediates: &[u8], _ignore: bool, byte: u8) {
        // NEL (`ESC E`, or 0x85 read as it) starts a new line; every other escape is dropped.
        if intermediates.is_empty() && byte == b'E' {
            self.new_line();
        }
    }
}

/// The text a terminal would show for `bytes`, escape sequences and controls removed (newline and
/// tab kept) and carriage-return overwrites collapsed.
pub fn render_terminal(bytes: &[u8]) -> String {
    plain_text(bytes).unwrap_or_else(|| drawn(bytes))
}

/// The text of `bytes` when drawing them changes nothing but dropping the controls a terminal
/// ignores and the carriage returns that end a line (`\r\n`, or one last `\r`): most output, read
/// in one pass without the parser. `None` when it takes the parser: an escape, a
/// carriage return or backspace that moves the cursor back over text, a vertical tab or form feed,
/// a C1 control, or bytes that are not UTF-8.
pub(crate) fn plain_text(bytes: &[u8]) -> Option<String> {
    // U+0080..U+009F, the C1 controls, are 0xC2 0x80..=0x9F in UTF-8.
    let c1 = bytes.contains(&0xc2)
        && bytes
            .windows(2)
            .any(|w| w[0] == 0xc2 && (0x80..=0x9f).contains(&w[1]));
    if c1 {
        return None;
    }
    let control = |b: u8| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f;
    // A whole chunk at a time (no early exit inside one), which the compiler vectorises.
    let any_control = bytes
        .chunks(64)
        .any(|chunk| chunk.iter().fold(false, |seen, &b| seen | control(b)));
    if !any_control {
        return std::str::from_utf8(bytes).ok().map(str::to_owned);
    }
    // Copied a run at a time between the controls that go.
    let mut kept = Vec::with_capacity(bytes.len());
    let mut run = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if !control(b) {
            continue;
        }
        match b {
            0x1b | 0x08 | 0x0b | 0x0c => return None,
            b'\r' if bytes.get(i + 1).is_some_and(|&next| next != b'\n') => return None,
            _ => {}
        }
        kept.extend_from_slice(&bytes[run..i]);
        run = i + 1;
    }
    kept.extend_from_slice(&bytes[run..]);
    String::from_utf8(kept).ok()
}

/// `bytes` drawn by the parser.
fn drawn(bytes: &[u8]) -> String {
    let mut screen = Screen {
        out: String::with_capacity(bytes.len()),
        line: Line::default(),
    };
    let mut parser = vte::Parser::new();
    parser.advance(&mut screen, &seven_bit_controls(bytes));
    screen.line.flush_into(&mut screen.out);
    screen.out
}

/// `bytes` with each C1 control (a raw byte `0x80..=0x9f` that is no part of a UTF-8 character, or
/// the character U+0080..U+009F) written in its 7-bit form, `ESC` and the byte less `0x40`, which the
/// parser takes as the sequence it starts; other bytes that are not UTF-8 become U+FFFD.
pub(crate) fn seven_bit_controls(bytes: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    let has_c1 = |s: &str| s.chars().any(|c| ('\u{80}'..='\u{9f}').contains(&c));
    if let Ok(text) = std::str::from_utf8(bytes)
        && !has_c1(text)
    {
        return bytes.into();
    }
    let mut out = Vec::with_capacity(bytes.len() + 16);
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if ('\u{80}'..='\u{9f}').contains(&c) {
                out.extend([0x1b, c as u8 - 0x40]);
            } else {
                let mut utf8 = [0; 4];
                out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            }
        }
        for &b in chunk.invalid() {
            if (0x80..=0x9f).contains(&b) {
                out.extend([0x1b, b - 0x40]);
            } else {
                out.extend_from_slice("\u{fffd}".as_bytes());
            }
        }
    }
    out.into()
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
    fn strings_a_terminal_would_act_on_are_dropped_whole() {
        // Clear screen, a title, an OSC 52 clipboard write, DCS, APC, PM and SOS strings.
        assert_eq!(
            render_terminal(
                b"\x1b[2J\x1b[H\x1b]2;title\x1b\\a\x1b]52;c;ZXZpbA==\x07b\x1bPq#0;2;0;0;0\x1b\\c\x1b_apc\x1b\\d\x1b^pm\x1b\\e\x1bXsos\x1b\\f"
            ),
            "abcdef"
        );
    }

    #[test]
    fn c0_and_c1_controls_are_dropped_and_raw_c1_sequences_are_read_as_sequences() {
        assert_eq!(render_terminal(b"a\x00b\x07c\x7fd\x1be"), "abcd");
        // 0x9b is CSI as one raw byte: the sequence goes, not just the byte.
        assert_eq!(render_terminal(b"\x9b31mred\x9b0m"), "red");
        assert_eq!(render_terminal("\u{9b}1mbold".as_bytes()), "bold");
        assert_eq!(render_terminal(b"\x9d0;title\x9cx\x90dcs\x9cy"), "xy");
        assert_eq!(render_terminal(b"one\x85two"), "one\ntwo");
        assert_eq!(render_terminal(b"bad\xff!"), "bad\u{fffd}!");
        let text = render_terminal(b"\x9b31m\x1b[0m\x9e\x9f\x8d");
        assert!(!text.chars().any(char::is_control), "{text:?}");
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

    /// Output the fast path takes renders as the parser draws it.
    #[test]
    fn plain_text_renders_as_the_parser_draws_it() {
        let samples: [&[u8]; 9] = [
            b"line one\n\tindented\nlast",
            "\u{fc}n\u{ef}code \u{2014} \u{1f600}\n".as_bytes(),
            b"crlf\r\nends\r\n",
            b"trailing cr\r",
            b"nul\x00bytes\x00\x00 and bell\x07 and del\x7f\n",
            b"",
            b"\r\n\r\n",
            b"\x00\x00\x00",
            b"tab\tin\tline\r\n",
        ];
        for bytes in samples {
            assert!(super::plain_text(bytes).is_some(), "{bytes:?}");
            assert_eq!(render_terminal(bytes), super::drawn(bytes), "{bytes:?}");
        }
        for parsed in [
            &b"a\rb"[..],
            b"\x1b[1m",
            b"x\x08y",
            b"\xc2\x85",
            b"\xff",
            b"\x0c",
        ] {
            assert!(super::plain_text(parsed).is_none(), "{parsed:?}");
        }
    }

    #[test]
    fn text_without_escapes_is_unchanged() {
        let text = "line one\n\tindented — ünïcode\nlast";
        assert_eq!(render_terminal(text.as_bytes()), text);
    }
}
