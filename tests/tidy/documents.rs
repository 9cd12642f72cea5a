//! The house's Markdown documents as the tidy checks read them: their words (for the budgets), their
//! relative links and the headings those links may point at.
//!
//! A word is a whitespace-separated token holding a letter or a digit, so table rules, arrows and the
//! diagram's box drawing are not counted. A link is `[text](target)` or `![alt](target)` outside code;
//! an anchor is a heading's GitHub slug (lower case, punctuation dropped, spaces as `-`).

use std::path::{Path, PathBuf};

/// One Markdown document of the house.
pub struct Document {
    /// Its path from the workspace root, with `/` separators.
    pub path: String,
    /// Its text as written.
    pub text: String,
}

/// The documents every link check reads: the root's `*.md` files and every `docs/*.md`.
pub fn all(root: &Path) -> Vec<Document> {
    let mut documents = Vec::new();
    for dir in [root.to_path_buf(), root.join("docs")] {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|entry| entry.path())
            .filter(|path| path.extension().is_some_and(|e| e == "md"))
            .collect();
        paths.sort();
        for path in paths {
            if let Ok(text) = std::fs::read_to_string(&path) {
                let rel = path.strip_prefix(root).unwrap_or(&path);
                documents.push(Document {
                    path: rel.to_string_lossy().replace('\\', "/"),
                    text,
                });
            }
        }
    }
    documents
}

/// The words of `text` (tokens holding a letter or a digit).
pub fn words(text: &str) -> usize {
    text.split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count()
}

/// `text` without its fenced code blocks and inline code spans (each replaced by nothing, lines
/// kept), so a link written as an example is not a link.
fn prose(text: &str) -> Vec<String> {
    let mut fenced = false;
    text.lines()
        .map(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return String::new();
            }
            if fenced || line.starts_with("    ") {
                return String::new();
            }
            line.split('`').step_by(2).collect::<Vec<_>>().join("")
        })
        .collect()
}

/// `(line, target)` of every link in `text` outside code.
pub fn links(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (n, line) in prose(text).iter().enumerate() {
        for (at, _) in line.match_indices("](") {
            let rest = &line[at + 2..];
            if let Some(end) = rest.find(')') {
                found.push((n + 1, rest[..end].trim().to_string()));
            }
        }
    }
    found
}

/// The GitHub anchors of the headings of `text`.
pub fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut anchors = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#');
        if title.starts_with(' ') {
            anchors.push(slug(title.trim()));
        }
    }
    anchors
}

/// A heading's anchor as GitHub makes it.
fn slug(title: &str) -> String {
    title
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// What is wrong with the relative link `target` written in the document at `from` (a path from
/// `root`): a file that does not exist, or an anchor no heading of its file makes. `None` for a link
/// that leaves the house (`https:`, `mailto:`) or is sound.
pub fn broken(root: &Path, from: &str, target: &str) -> Option<String> {
    if target.contains("://") || target.starts_with("mailto:") {
        return None;
    }
    let (file, anchor) = match target.split_once('#') {
        Some((file, anchor)) => (file, Some(anchor)),
        None => (target, None),
    };
    let dir = Path::new(from).parent().unwrap_or(Path::new(""));
    let path = if file.is_empty() {
        root.join(from)
    } else {
        root.join(dir).join(file)
    };
    if !path.exists() {
        return Some(format!("`{target}`: no such file"));
    }
    let anchor = anchor?;
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    (!anchors(&text).iter().any(|a| a == anchor)).then(|| format!("`{target}`: no such heading"))
}
