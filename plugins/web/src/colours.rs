//! Output with its colours, as the page draws it: text holding SGR sequences (`ESC [ ... m`, as
//! [`Host::task_tail_coloured`] gives it) parsed into runs, each a text and the classes of its
//! colours and styles, which the page sets on a span (as a class, never as HTML or as a style).
//! Classes: `c-bold`, `c-dim`, `c-italic`, `c-underline`, `c-strike`; a foreground `c-fN` and a
//! background `c-bN` with N one of the 16 terminal colours (0-7, 8-15 bright; an indexed colour
//! past 15 or a direct one is shown as the nearest of them); an inverse pen swaps them (`c-f-bg`,
//! `c-b-fg` for the default colours). Every other escape sequence is dropped; no text is
//! interpreted in any other way, so markup in the output stays text.

use taskhost_abi::prelude::*;

/// The 16 terminal colours (xterm's), against which any other colour is matched.
const PALETTE: [(u8, u8, u8); 16] = [
    (0, 0, 0),
    (205, 0, 0),
    (0, 205, 0),
    (205, 205, 0),
    (0, 0, 238),
    (205, 0, 205),
    (0, 205, 205),
    (229, 229, 229),
    (127, 127, 127),
    (255, 0, 0),
    (0, 255, 0),
    (255, 255, 0),
    (92, 92, 255),
    (255, 0, 255),
    (0, 255, 255),
    (255, 255, 255),
];

/// The colours and styles text is drawn with.
#[derive(Clone, Copy, Default, PartialEq, Eq)]
struct Pen {
    fg: Option<u8>,
    bg: Option<u8>,
    bold: bool,
    dim: bool,
    italic: bool,
    underline: bool,
    inverse: bool,
    strike: bool,
}

/// Which of the 16 colours is nearest to `rgb`.
fn nearest(rgb: (u8, u8, u8)) -> u8 {
    let distance = |&(r, g, b): &(u8, u8, u8)| {
        let d = |a: u8, b: u8| (i32::from(a) - i32::from(b)).pow(2);
        d(r, rgb.0) + d(g, rgb.1) + d(b, rgb.2)
    };
    (0u8..16)
        .min_by_key(|&i| distance(&PALETTE[usize::from(i)]))
        .unwrap_or(7)
}

/// Indexed colour `n` (of 256) as one of the 16.
fn of_256(n: u16) -> u8 {
    match n {
        0..=15 => u8::try_from(n).unwrap_or(7),
        16..=231 => {
            let level = |v: u16| u8::try_from(if v == 0 { 0 } else { 55 + v * 40 }).unwrap_or(255);
            let n = n - 16;
            nearest((level(n / 36), level(n / 6 % 6), level(n % 6)))
        }
        _ => {
            let grey = u8::try_from(8 + (n.min(255) - 232) * 10).unwrap_or(255);
            nearest((grey, grey, grey))
        }
    }
}

impl Pen {
    /// The pen after the SGR sequence whose parameters are `codes`.
    fn apply(&mut self, codes: &[u16]) {
        if codes.is_empty() {
            *self = Self::default();
        }
        let mut i = 0;
        while let Some(&code) = codes.get(i) {
            i += 1;
            let byte = |i: usize| u8::try_from(codes.get(i).copied().unwrap_or(0)).unwrap_or(255);
            let extended = |i: &mut usize| match codes.get(*i) {
                Some(5) => {
                    *i += 2;
                    Some(of_256(codes.get(*i - 1).copied().unwrap_or(0)))
                }
                Some(2) => {
                    *i += 4;
                    Some(nearest((byte(*i - 3), byte(*i - 2), byte(*i - 1))))
                }
                _ => {
                    *i = codes.len();
                    None
                }
            };
            match code {
                0 => *self = Self::default(),
                1 => self.bold = true,
                2 => self.dim = true,
                3 => self.italic = true,
                4 | 21 => self.underline = true,
                7 => self.inverse = true,
                9 => self.strike = true,
                22 => (self.bold, self.dim) = (false, false),
                23 => self.italic = false,
                24 => self.underline = false,
                27 => self.inverse = false,
                29 => self.strike = false,
                30..=37 => self.fg = Some(of_256(code - 30)),
                90..=97 => self.fg = Some(of_256(code - 90 + 8)),
                40..=47 => self.bg = Some(of_256(code - 40)),
                100..=107 => self.bg = Some(of_256(code - 100 + 8)),
                38 => self.fg = extended(&mut i),
                48 => self.bg = extended(&mut i),
                39 => self.fg = None,
                49 => self.bg = None,
                _ => {}
            }
        }
    }

    /// The classes of this pen, space-separated; empty for the default.
    fn classes(&self) -> String {
        let mut classes: Vec<String> = Vec::new();
        let (fg, bg) = if self.inverse {
            (
                Some(self.bg.map_or("c-f-bg".to_owned(), |n| format!("c-f{n}"))),
                Some(self.fg.map_or("c-b-fg".to_owned(), |n| format!("c-b{n}"))),
            )
        } else {
            (
                self.fg.map(|n| format!("c-f{n}")),
                self.bg.map(|n| format!("c-b{n}")),
            )
        };
        classes.extend(fg);
        classes.extend(bg);
        for (on, class) in [
            (self.bold, "c-bold"),
            (self.dim, "c-dim"),
            (self.italic, "c-italic"),
            (self.underline, "c-underline"),
            (self.strike, "c-strike"),
        ] {
            if on {
                classes.push(class.to_owned());
            }
        }
        classes.join(" ")
    }
}

/// The end of the escape sequence at the start of `rest` (which starts after `ESC`): its length
/// and, for an SGR sequence, its parameters.
fn sequence(rest: &str) -> (usize, Option<Vec<u16>>) {
    let Some(csi) = rest.strip_prefix('[') else {
        return (0, None);
    };
    let Some(end) = csi.find(|c: char| ('\u{40}'..='\u{7e}').contains(&c)) else {
        return (rest.len(), None);
    };
    let codes = (csi[end..].starts_with('m')).then(|| {
        csi[..end]
            .split([';', ':'])
            .map(|p| p.parse::<u16>().unwrap_or(0))
            .collect()
    });
    (1 + end + 1, codes)
}

/// `text` as runs `[classes, text]`, adjacent runs of one pen merged, escape sequences gone.
pub(crate) fn runs(text: &str) -> Vec<Value> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut pen = Pen::default();
    let mut push = |pen: &Pen, piece: &str| {
        if piece.is_empty() {
            return;
        }
        let classes = pen.classes();
        match out.last_mut() {
            Some((c, t)) if *c == classes => t.push_str(piece),
            _ => out.push((classes, piece.to_owned())),
        }
    };
    let mut rest = text;
    while let Some(at) = rest.find('\x1b') {
        push(&pen, &rest[..at]);
        let (len, codes) = sequence(&rest[at + 1..]);
        if let Some(codes) = codes {
            pen.apply(&codes);
        }
        rest = &rest[at + 1 + len..];
    }
    push(&pen, rest);
    out.into_iter().map(|(c, t)| json!([c, t])).collect()
}

#[cfg(test)]
mod tests {
    use super::runs;
    use taskhost_abi::prelude::*;

    #[test]
    fn sgr_sequences_become_classes_of_runs() {
        assert_eq!(
            runs("\x1b[0;1;31merror\x1b[0m: bad\n"),
            vec![json!(["c-f1 c-bold", "error"]), json!(["", ": bad\n"])]
        );
        assert_eq!(
            runs("\x1b[0;32m   Compiling\x1b[0m x"),
            vec![json!(["c-f2", "   Compiling"]), json!(["", " x"])]
        );
        assert_eq!(
            runs("\x1b[0;93;104mhi\x1b[0;3;4;9;2mx"),
            vec![
                json!(["c-f11 c-b12", "hi"]),
                json!(["c-dim c-italic c-underline c-strike", "x"])
            ]
        );
    }

    #[test]
    fn colours_past_the_sixteen_show_as_the_nearest_of_them() {
        assert_eq!(runs("\x1b[38;5;196mr"), vec![json!(["c-f9", "r"])]);
        assert_eq!(runs("\x1b[38;2;0;200;0mg"), vec![json!(["c-f2", "g"])]);
        assert_eq!(runs("\x1b[48;5;231mw"), vec![json!(["c-b15", "w"])]);
    }

    #[test]
    fn inverse_swaps_the_colours() {
        assert_eq!(runs("\x1b[7mi"), vec![json!(["c-f-bg c-b-fg", "i"])]);
        assert_eq!(runs("\x1b[7;31mi"), vec![json!(["c-f-bg c-b1", "i"])]);
    }

    #[test]
    fn markup_and_other_sequences_stay_text_or_go() {
        let hostile = "\x1b[31m<img src=x onerror=alert(1)>\x1b]8;;javascript:alert(2)\x07<b>&amp;\x1b[2J\x1b";
        let shown: String = runs(hostile)
            .iter()
            .map(|r| r[1].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(
            shown,
            "<img src=x onerror=alert(1)>]8;;javascript:alert(2)\x07<b>&amp;"
        );
        assert_eq!(runs("plain <script>"), vec![json!(["", "plain <script>"])]);
    }
}
