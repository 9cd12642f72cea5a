//! The functions of a source file, found without a parser: each `fn name` with a body, and the lines
//! from its signature to its closing brace.

use crate::source::line_of;

/// `(name, first line, line count)` of every function with a body in `code`.
pub fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let bytes = code.as_bytes();
    let mut found = Vec::new();
    for (at, _) in code.match_indices("fn ") {
        if at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_') {
            continue;
        }
        let name: String = code[at + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if name.is_empty() {
            continue;
        }
        let Some(body) = code[at..].find(['{', ';']).map(|i| at + i) else {
            continue;
        };
        if bytes[body] == b';' {
            continue;
        }
        let mut depth = 0usize;
        let end = code[body..].char_indices().find_map(|(i, c)| {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(body + i);
                    }
                }
                _ => {}
            }
            None
        });
        if let Some(end) = end {
            let first = line_of(code, at);
            found.push((name, first, line_of(code, end) - first + 1));
        }
    }
    found
}
