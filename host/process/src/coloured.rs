//! Output as a terminal draws it, with its colours: what [`render_terminal`] shows, where each
//! character keeps the colours and styles (the pen) that SGR sequences (`ESC [ ... m`) set when it
//! was drawn. The pen is written back as SGR sequences of one canonical form, `ESC [ 0 ; CODES m`
//! before each run of characters drawn with another pen than the one before, and `ESC [ 0 m` after
//! the last of a line when it was not the default (so each line stands alone): those are the only escape sequences in the text. Codes
//! kept: bold 1, dim 2, italic 3, underline 4, inverse 7, strike 9, a foreground as 30-37, 90-97,
//! `38;5;N` or `38;2;R;G;B`, a background as 40-47, 100-107, `48;5;N` or `48;2;R;G;B`. Every other
//! sequence and control goes as [`render_terminal`] says; what the model reads stays plain.
//!
//! [`render_terminal`]: crate::render_terminal

use crate::terminal::{plain_text, seven_bit_controls};

/// A colour a pen draws with: one of the 256 indexed colours, or a direct one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Colour {
    Indexed(u8),
    Rgb(u8, u8, u8),
}

/// The colours and styles characters are drawn with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Pen {
    fg: Option<Colour>,
    bg: Option<Colour>,
    /// A bit per entry of [`STYLES`].
    styles: u8,
}

/// Each style's SGR code, its bit being its place here.
const STYLES: [u16; 6] = [1, 2, 3, 4, 7, 9];

/// The styles' bits an SGR code clears (22 normal intensity, 23 not italic, ...).
fn cleared(code: u16) -> u8 {
    match code {
        22 => 0b11,
        23 => 0b100,
        24 => 0b1000,
        27 => 0b1_0000,
        29 => 0b10_0000,
        _ => 0,
    }
}

/// An extended colour (`5;N` or `2;R;G;B`, after a 38 or 48) from `args`, and how many it took.
fn extended(args: &[u16]) -> (Option<Colour>, usize) {
    let byte = |i: usize| args.get(i).map(|&v| u8::try_from(v).unwrap_or(u8::MAX));
    match args.first() {
        Some(5) => (byte(1).map(Colour::Indexed), 2),
        Some(2) => match (byte(1), byte(2), byte(3)) {
            (Some(r), Some(g), Some(b)) => (Some(Colour::Rgb(r, g, b)), 4),
            _ => (None, args.len()),
        },
        _ => (None, args.len()),
    }
}

/// Indexed colour `n` (below 16 where it is called).
fn indexed(n: u16) -> Colour {
    Colour::Indexed(u8::try_from(n).unwrap_or(u8::MAX))
}

impl Pen {
    /// The pen after an SGR sequence of `groups` (each a parameter and its colon subparameters).
    fn apply(&mut self, groups: &[Vec<u16>]) {
        if groups.is_empty() {
            *self = Self::default();
        }
        let mut i = 0;
        while let Some(group) = groups.get(i) {
            i += 1;
            let code = group.first().copied().unwrap_or(0);
            let colour = |i: &mut usize| {
                match group.get(1..) {
                    // Colon form: `38:5:N`, `38:2:R:G:B` or `38:2:SPACE:R:G:B`.
                    Some([2, _, r, g, b]) => extended(&[2, *r, *g, *b]).0,
                    Some(args) if !args.is_empty() => extended(args).0,
                    _ => {
                        let rest: Vec<u16> = groups[*i..]
                            .iter()
                            .filter_map(|g| g.first().copied())
                            .collect();
                        let (c, took) = extended(&rest);
                        *i += took;
                        c
                    }
                }
            };
            match code {
                0 => *self = Self::default(),
                30..=37 => self.fg = Some(indexed(code - 30)),
                90..=97 => self.fg = Some(indexed(code - 90 + 8)),
                40..=47 => self.bg = Some(indexed(code - 40)),
                100..=107 => self.bg = Some(indexed(code - 100 + 8)),
                38 => self.fg = colour(&mut i),
                48 => self.bg = colour(&mut i),
                39 => self.fg = None,
                49 => self.bg = None,
                21 => self.styles |= 0b1000,
                _ => match STYLES.iter().position(|&s| s == code) {
                    Some(bit) => self.styles |= 1 << bit,
                    None => self.styles &= !cleared(code),
                },
            }
        }
    }

    /// This pen as its canonical SGR sequence.
    fn write(&self, out: &mut String) {
        use std::fmt::Write;
        out.push_str("\x1b[0");
        for (bit, code) in STYLES.iter().enumerate() {
            if self.styles & (1 << bit) != 0 {
                let _ = write!(out, ";{code}");
            }
        }
        for (colour, base) in [(self.fg, 30), (self.bg, 40)] {
            let _ = match colour {
                None => Ok(()),
                Some(Colour::Indexed(n)) if n < 8 => write!(out, ";{}", base + u16::from(n)),
                Some(Colour::Indexed(n)) if n < 16 => {
                    write!(out, ";{}", base + 60 + u16::from(n) - 8)
                }
                Some(Colour::Indexed(n)) => write!(out, ";{};5;{n}", base + 8),
                Some(Colour::Rgb(r, g, b)) => write!(out, ";{};2;{r};{g};{b}", base + 8),
            };
        }
        out.push('m');
    }
}

/// The text drawn so far, and the line being drawn, each character with its pen.
#[derive(Default)]
struct Screen {
    out: String,
    line: Vec<(char, Pen)>,
    col: usize,
    pen: Pen,
    /// The pen of the last character written to `out`.
    written: Pen,
}

impl Screen {
    fn put(&mut self, c: char) {
        if self.col < self.line.len() {
            self.line[self.col] = (c, self.pen);
        } else {
            self.line.push((c, self.pen));
        }
        self.col += 1;
    }

    fn flush(&mut self) {
        for (c, pen) in self.line.drain(..) {
            if pen != self.written {
                if pen == Pen::default() {
                    self.out.push_str("\x1b[0m");
                } else {
                    pen.write(&mut self.out);
                }
                self.written = pen;
            }
            self.out.push(c);
        }
        self.col = 0;
    }

    /// Ends the line: the pen is reset before its end, so each line of the text stands alone.
    fn new_line(&mut self) {
        self.flush();
        if self.written != Pen::default() {
            self.out.push_str("\x1b[0m");
            self.written = Pen::default();
        }
        self.out.push('\n');
    }
}

impl vte::Perform for Screen {
    fn print(&mut self, c: char) {
        if !c.is_control() {
            self.put(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        match byte {
            b'\n' | 0x0b | 0x0c => self.new_line(),
            b'\r' => self.col = 0,
            0x08 => self.col = self.col.saturating_sub(1),
            b'\t' => self.put('\t'),
            _ => {}
        }
    }

    fn csi_dispatch(&mut self, params: &vte::Params, intermediates: &[u8], ignore: bool, c: char) {
        if c == 'm' && intermediates.is_empty() && !ignore {
            let groups: Vec<Vec<u16>> = params.iter().map(<[u16]>::to_vec).collect();
            self.pen.apply(&groups);
        }
    }

    fn esc_dispatch(&mut self, intermediates: &[u8], _ignore: bool, byte: u8) {
        if intermediates.is_empty() && byte == b'E' {
            self.new_line();
        }
    }
}

/// The text a terminal would show for `bytes`, as [`crate::render_terminal`], with the colours
/// and styles it draws kept as canonical SGR sequences (see the module's doc).
pub fn render_coloured(bytes: &[u8]) -> String {
    plain_text(bytes).unwrap_or_else(|| {
        let mut screen = Screen::default();
        let mut parser = vte::Parser::new();
        parser.advance(&mut screen, &seven_bit_controls(bytes));
        screen.flush();
        if screen.written != Pen::default() {
            screen.out.push_str("\x1b[0m");
        }
        screen.out
    })
}

#[cfg(test)]
mod tests {
    use super::render_coloured;

    #[test]
    fn colours_and_styles_are_kept_in_one_canonical_form() {
        assert_eq!(
            render_coloured(b"\x1b[1;31merror\x1b[0m: bad\r\n"),
            "\x1b[0;1;31merror\x1b[0m: bad\n"
        );
        assert_eq!(
            render_coloured(b"\x1b[32m   Compiling\x1b[39m x\n"),
            "\x1b[0;32m   Compiling\x1b[0m x\n"
        );
        assert_eq!(
            render_coloured(b"\x1b[38;5;208mo\x1b[48;2;1;2;3mr\x1b[38:2::9:8:7mg\x1b[m."),
            "\x1b[0;38;5;208mo\x1b[0;38;5;208;48;2;1;2;3mr\x1b[0;38;2;9;8;7;48;2;1;2;3mg\x1b[0m."
        );
        assert_eq!(
            render_coloured(b"\x1b[91;104mhi"),
            "\x1b[0;91;104mhi\x1b[0m"
        );
    }

    #[test]
    fn styles_clear_one_by_one() {
        assert_eq!(
            render_coloured(b"\x1b[1;3;4mA\x1b[22mB\x1b[23;24mC"),
            "\x1b[0;1;3;4mA\x1b[0;3;4mB\x1b[0mC"
        );
    }

    #[test]
    fn every_other_sequence_goes_as_in_plain_text() {
        assert_eq!(
            render_coloured(b"\x1b]0;title\x07\x1b[2J\x1b[31mred\x1b[0m\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"),
            "\x1b[0;31mred\x1b[0mlink"
        );
        assert_eq!(render_coloured(b"<b>&amp;</b>\n"), "<b>&amp;</b>\n");
    }

    #[test]
    fn an_overwritten_character_takes_the_pen_it_was_drawn_with() {
        assert_eq!(
            render_coloured(b"\x1b[31m50%\r\x1b[32m100%\x1b[0m\n"),
            "\x1b[0;32m100%\x1b[0m\n"
        );
    }

    #[test]
    fn plain_output_is_as_render_terminal_draws_it() {
        for bytes in [
            &b"line\r\none\tand\x08x\n"[..],
            b"plain",
            b"a\rb",
            b"\x9b31m\x9b0mz",
        ] {
            assert_eq!(
                render_coloured(bytes),
                crate::render_terminal(bytes),
                "{bytes:?}"
            );
        }
    }
}
