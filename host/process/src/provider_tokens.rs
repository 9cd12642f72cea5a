//! Providers' API tokens known by their shape, whatever the variable holding them is called: the
//! prefixes the providers document and their secret scanners look for, each with the length and the
//! characters its body has, so that an ordinary word sharing a prefix (`sk-learn`) is kept.

/// One provider's token shape: a prefix at the start of a word, then a body of at least `min`
/// characters drawn from `body`.
struct Shape {
    provider: &'static str,
    prefix: &'static str,
    min: usize,
    body: fn(u8) -> bool,
}

/// Letters, digits, `_` and `-`: the body of most tokens.
fn token_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Upper-case letters and digits: an AWS access key id's body.
fn upper_alnum(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}

/// The shapes, longest prefix first where two share a start.
const SHAPES: [Shape; 11] = [
    Shape {
        provider: "a GitHub token",
        prefix: "github_pat_",
        min: 22,
        body: token_char,
    },
    Shape {
        provider: "a GitHub token",
        prefix: "ghp_",
        min: 30,
        body: token_char,
    },
    Shape {
        provider: "a GitHub token",
        prefix: "gho_",
        min: 30,
        body: token_char,
    },
    Shape {
        provider: "a GitHub token",
        prefix: "ghs_",
        min: 30,
        body: token_char,
    },
    Shape {
        provider: "a GitHub token",
        prefix: "ghu_",
        min: 30,
        body: token_char,
    },
    Shape {
        provider: "a GitLab token",
        prefix: "glpat-",
        min: 20,
        body: token_char,
    },
    Shape {
        provider: "an OpenAI or Anthropic key",
        prefix: "sk-",
        min: 20,
        body: token_char,
    },
    Shape {
        provider: "a Slack token",
        prefix: "xox",
        min: 12,
        body: token_char,
    },
    Shape {
        provider: "a Hugging Face token",
        prefix: "hf_",
        min: 30,
        body: token_char,
    },
    Shape {
        provider: "an AWS access key id",
        prefix: "AKIA",
        min: 16,
        body: upper_alnum,
    },
    Shape {
        provider: "an AWS access key id",
        prefix: "ASIA",
        min: 16,
        body: upper_alnum,
    },
];

/// What provider's token `value` holds (e.g. "a GitHub token"), if it holds one: a word of it (split at white space,
/// quotes and the separators of lists and assignments) that starts with a known prefix and whose
/// body has the provider's length and characters; or a JSON text holding `"private_key"` (a cloud
/// service account's key file).
pub(crate) fn provider_token(value: &str) -> Option<&'static str> {
    if value.contains("\"private_key\"") {
        return Some("a service account's JSON key");
    }
    value
        .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';' | '=' | ':'))
        .find_map(|word| SHAPES.iter().find(|s| matches(s, word)).map(|s| s.provider))
}

/// True when `word` is a token of `shape`.
fn matches(shape: &Shape, word: &str) -> bool {
    let Some(body) = word.strip_prefix(shape.prefix) else {
        return false;
    };
    if shape.prefix == "xox" {
        // Slack's kind of token (`a`, `b`, `p` or `r`), then `-`.
        let kind_then_dash = body.as_bytes().get(..2);
        if !matches!(kind_then_dash, Some([b'a' | b'b' | b'p' | b'r', b'-'])) {
            return false;
        }
    }
    body.len() >= shape.min && body.bytes().all(shape.body)
}
