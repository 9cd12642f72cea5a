//! The workspace's Rust sources as the tidy checks read them: which files there are, which of them
//! are tests, and each file's text with comments and literals blanked so braces and paths can be
//! counted without a parser.

use std::fs;
use std::path::{Path, PathBuf};

/// The workspace root (this crate is `tests/` in it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// One Rust source file of the workspace.
pub struct Source {
    /// Its path from the workspace root, with `/` separators.
    pub path: String,
    /// Its text as written.
    pub text: String,
    /// Its text with comments, string and char literals replaced by spaces (newlines kept), cut at the
    /// first `#[cfg(test)]`: what the checks of shipped code look at.
    pub code: String,
}

impl Source {
    /// Whether the whole file is test or measurement code: under a `tests/` or `benches/` folder, or a
    /// `tests.rs` or `<name>_tests.rs` module.
    pub fn is_test(&self) -> bool {
        self.path.starts_with("tests/")
            || self.path.contains("/tests/")
            || self.path.contains("/benches/")
            || self.path.ends_with("/tests.rs")
            || self.path.ends_with("_tests.rs")
    }
}

/// Every `.rs` file of the workspace outside `target/` and hidden folders, sorted by path.
pub fn all() -> Vec<Source> {
    let root = root();
    let mut files = Vec::new();
    collect(&root, &root, &mut files);
    files.sort_by(|a, b| a.path.cmp(&b.path));
    files
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<Source>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == "target" {
            continue;
        }
        if path.is_dir() {
            collect(root, &path, out);
        } else if name.ends_with(".rs")
            && let Ok(text) = fs::read_to_string(&path)
        {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let code = blank(&text);
            let code = without_inline_tests(code);
            out.push(Source {
                path: rel.to_string_lossy().replace('\\', "/"),
                text,
                code,
            });
        }
    }
}

/// `code` cut at its first inline `#[cfg(test)] mod name {`: the unit tests end a file by convention.
/// A `#[cfg(test)] mod tests;` declaration stays (its file is a test file of its own).
fn without_inline_tests(mut code: String) -> String {
    let mut from = 0;
    while let Some(found) = code[from..].find("#[cfg(test)]") {
        let at = from + found;
        let after = code[at + "#[cfg(test)]".len()..].trim_start();
        let inline = after.strip_prefix("mod ").is_some_and(|rest| {
            let rest = rest.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_');
            rest.trim_start().starts_with('{')
        });
        if inline {
            code.truncate(at);
            break;
        }
        from = at + 1;
    }
    code
}

/// `text` with the contents of comments and string, byte-string and char literals replaced by spaces;
/// quotes and newlines stay, so line numbers and the shape of the code are unchanged.
pub fn blank(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let keep = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(keep(chars[i]));
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && !ident_before(&chars, i) {
            i = raw_string(&chars, i, &mut out);
        } else if c == '"' {
            out.push('"');
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                let step = if chars[i] == '\\' { 2 } else { 1 };
                for k in 0..step {
                    if let Some(&ch) = chars.get(i + k) {
                        out.push(keep(ch));
                    }
                }
                i += step;
            }
            out.push('"');
            i += 1;
        } else if c == '\'' {
            i = char_or_lifetime(&chars, i, &mut out);
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// Blanks `r"..."` or `r#"..."#` starting at `i`; returns the index after it.
fn raw_string(chars: &[char], start: usize, out: &mut String) -> usize {
    let mut i = start + 1;
    let mut hashes = 0;
    while chars.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    if chars.get(i) != Some(&'"') {
        // `r#ident` (a raw identifier), not a string.
        out.extend(&chars[start..i]);
        return i;
    }
    out.push_str(&" ".repeat(i - start));
    out.push('"');
    i += 1;
    while i < chars.len() {
        if chars[i] == '"' && (1..=hashes).all(|k| chars.get(i + k) == Some(&'#')) {
            out.push('"');
            out.push_str(&" ".repeat(hashes));
            return i + 1 + hashes;
        }
        out.push(if chars[i] == '\n' { '\n' } else { ' ' });
        i += 1;
    }
    i
}

/// Blanks a char literal at `i` (`'x'`, `'\n'`, `'\u{..}'`) or copies a lifetime; returns the index
/// after it.
fn char_or_lifetime(chars: &[char], i: usize, out: &mut String) -> usize {
    let literal_end = match chars.get(i + 1) {
        Some('\\') => (i + 2..chars.len().min(i + 12)).find(|&k| chars[k] == '\''),
        Some(_) if chars.get(i + 2) == Some(&'\'') => Some(i + 2),
        _ => None,
    };
    match literal_end {
        Some(end) => {
            out.push('\'');
            out.push_str(&" ".repeat(end - i - 1));
            out.push('\'');
            end + 1
        }
        None => {
            out.push('\'');
            i + 1
        }
    }
}

/// The 1-based line of byte offset `at` in `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    text[..at].matches('\n').count() + 1
}
