//! The environment a child process gets, decided in one place for every child (bash, subagent,
//! anything later): the `[env]` policy applied to the host's environment, then settings that keep
//! tools from paging or coloring, then the policy's `set`.
//!
//! The policy works like Codex's `shell_environment_policy`, in this order:
//! 1. `inherit`: `all` of the host's variables, the `core` ones ([`CORE`]), or `none`;
//! 2. the default excludes, unless `ignore_default_excludes`: names matching [`DEFAULT_EXCLUDES`],
//!    and values shaped like a secret whatever their name ([`default_exclusion`]: URLs with user
//!    info, secret query parameters or a webhook path, `Password=` connection strings, PEM blocks,
//!    JWTs, providers' API tokens known by their prefix and shape);
//! 3. `exclude`: glob patterns (`*` and `?`), case-insensitive;
//! 4. `include_only`: when not empty, only names matching one of its patterns are kept;
//! 5. [`FIXED`], then `set` (explicit, so neither excludes nor `include_only` remove it).

use std::ffi::{OsStr, OsString};

/// Set for every child (before the policy's `set`, which may override them).
pub const FIXED: [(&str, &str); 4] = [
    ("NO_COLOR", "1"),
    ("TERM", "dumb"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
];

/// The names `inherit = "core"` keeps (and every `LC_*`).
pub const CORE: [&str; 13] = [
    "HOME", "LOGNAME", "PATH", "SHELL", "USER", "USERNAME", "TMPDIR", "TEMP", "TMP", "LANG",
    "LANGUAGE", "TZ", "LC_ALL",
];

/// Name patterns removed by default: anything that looks like a credential. `PWD` and `OLDPWD`
/// themselves are kept (the working directory is no secret), and so are the [`SESSION_KEPT`] names.
pub const DEFAULT_EXCLUDES: [&str; 18] = [
    "*KEY*",
    "*SECRET*",
    "*TOKEN*",
    "*PASSWORD*",
    "*PASSWD*",
    "*PASS*",
    "*PWD*",
    "*CREDENTIAL*",
    "*AUTH*",
    "*COOKIE*",
    "*PRIVATE*",
    "*_PAT",
    "*_PW",
    "*_PW_*",
    "*DSN*",
    "*WEBHOOK*",
    "*SESSION*",
    "*JWT*",
];

/// Names kept although a default pattern matches them: the working directory, and the desktop
/// session's addresses, which name a socket or a kind of session, not a secret.
pub const SESSION_KEPT: [&str; 5] = [
    "PWD",
    "OLDPWD",
    "DBUS_SESSION_BUS_ADDRESS",
    "SESSION_MANAGER",
    "XDG_SESSION_*",
];

/// Why the default policy withholds a variable from every child.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Withheld {
    /// Its name matches this pattern of [`DEFAULT_EXCLUDES`].
    Name(&'static str),
    /// Its value holds a URL with user info (`scheme://user@host`, `scheme://user:pass@host`).
    UrlUserInfo,
    /// Its value holds a URL with a query parameter named like a secret (`password`, `token`,
    /// `secret`, `sig`, `key`, ...).
    UrlSecretParameter,
    /// Its value holds a webhook URL (Slack, Discord, Office 365), whose path is the secret.
    WebhookUrl,
    /// Its value holds a connection string with `Password=` or `Pwd=`.
    ConnectionStringPassword,
    /// Its value holds a PEM block (`-----BEGIN ...`).
    PemBlock,
    /// Its value holds a JSON Web Token.
    Jwt,
    /// Its value holds a provider's API token (what it looks like is named), known by its shape (`sk-`, `ghp_`, `glpat-`,
    /// `xoxb-`, `hf_`, `AKIA`, a service account's JSON key, ...).
    ProviderToken(&'static str),
}

impl std::fmt::Display for Withheld {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Name(p) => write!(f, "its name matches {p}"),
            Self::UrlUserInfo => f.write_str("its value is a URL with user info"),
            Self::UrlSecretParameter => {
                f.write_str("its value is a URL with a secret query parameter")
            }
            Self::WebhookUrl => f.write_str("its value is a webhook URL"),
            Self::ConnectionStringPassword => {
                f.write_str("its value is a connection string with a password")
            }
            Self::PemBlock => f.write_str("its value holds a PEM block"),
            Self::Jwt => f.write_str("its value holds a JSON Web Token"),
            Self::ProviderToken(p) => write!(f, "its value is shaped like {p}"),
        }
    }
}

/// Which of the host's variables a child starts from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Inherit {
    /// Every variable of the host.
    #[default]
    All,
    /// Only [`CORE`] and `LC_*`.
    Core,
    /// None.
    None,
}

/// The `[env]` policy. The default inherits everything but the default excludes.
#[derive(Clone, Debug, Default)]
pub struct EnvPolicy {
    /// Where a child starts from.
    pub inherit: Inherit,
    /// Keep variables [`DEFAULT_EXCLUDES`] would remove.
    pub ignore_default_excludes: bool,
    /// Name patterns to remove.
    pub exclude: Vec<String>,
    /// When not empty: only names matching one of these are inherited.
    pub include_only: Vec<String>,
    /// Variables every child gets, applied last.
    pub set: Vec<(String, String)>,
}

/// One variable.
pub type Var = (OsString, OsString);

impl EnvPolicy {
    /// The environment a child starts from, given the host's (`parent`): every step of the policy.
    /// The result is the same for every child, so the host computes it once.
    pub fn apply(&self, parent: impl IntoIterator<Item = Var>) -> Vec<Var> {
        self.apply_reporting(parent).0
    }

    /// [`EnvPolicy::apply`], and the names the default excludes withheld with the rule that did
    /// (never their values), for the host to say at start.
    pub fn apply_reporting(
        &self,
        parent: impl IntoIterator<Item = Var>,
    ) -> (Vec<Var>, Vec<(String, Withheld)>) {
        let mut withheld = Vec::new();
        let mut env: Vec<Var> = parent
            .into_iter()
            .filter(|(k, v)| {
                let name = k.to_string_lossy();
                if !self.inherits(&name) {
                    return false;
                }
                if !self.ignore_default_excludes
                    && let Some(why) = default_exclusion(&name, v)
                {
                    withheld.push((name.into_owned(), why));
                    return false;
                }
                !self.exclude.iter().any(|p| glob_match(p, &name))
                    && (self.include_only.is_empty()
                        || self.include_only.iter().any(|p| glob_match(p, &name)))
            })
            .collect();
        let fixed = FIXED.iter().map(|&(k, v)| (k.to_owned(), v.to_owned()));
        for (k, v) in fixed.chain(self.set.iter().cloned()) {
            override_var(&mut env, k.into(), v.into());
        }
        (env, withheld)
    }

    fn inherits(&self, name: &str) -> bool {
        match self.inherit {
            Inherit::All => true,
            Inherit::Core => CORE.contains(&name) || name.starts_with("LC_"),
            Inherit::None => false,
        }
    }
}

/// Sets `name` in `env`, replacing any earlier value.
pub fn override_var(env: &mut Vec<Var>, name: OsString, value: OsString) {
    env.retain(|(k, _)| *k != name);
    env.push((name, value));
}

/// Why the default excludes withhold a variable, if they do: its name ([`DEFAULT_EXCLUDES`], less
/// [`SESSION_KEPT`]), then its value, whatever the name.
pub fn default_exclusion(name: &str, value: &OsStr) -> Option<Withheld> {
    let kept = SESSION_KEPT.iter().any(|p| glob_match(p, name));
    if let Some(p) = DEFAULT_EXCLUDES.iter().find(|p| glob_match(p, name))
        && !kept
    {
        return Some(Withheld::Name(p));
    }
    secret_value(&value.to_string_lossy())
}

/// Why a value looks like a secret, if it does.
pub fn secret_value(value: &str) -> Option<Withheld> {
    if value.contains("-----BEGIN ") {
        return Some(Withheld::PemBlock);
    }
    if let Some(why) = value
        .match_indices("://")
        .find_map(|(at, _)| secret_url(&value[at + 3..]))
    {
        return Some(why);
    }
    if connection_string_password(value) {
        return Some(Withheld::ConnectionStringPassword);
    }
    if value
        .split(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';' | '='))
        .any(is_jwt)
    {
        return Some(Withheld::Jwt);
    }
    crate::provider_tokens::provider_token(value).map(Withheld::ProviderToken)
}

/// What makes the URL whose text starts at `rest` (just past `://`) secret, if anything.
fn secret_url(rest: &str) -> Option<Withheld> {
    let url = rest.split(char::is_whitespace).next().unwrap_or_default();
    let end_of_authority = url.find(['/', '?', '#']).unwrap_or(url.len());
    if url[..end_of_authority].contains('@') {
        return Some(Withheld::UrlUserInfo);
    }
    let lower = url.to_ascii_lowercase();
    const WEBHOOKS: [&str; 4] = [
        "hooks.slack.com/",
        "discord.com/api/webhooks/",
        "discordapp.com/api/webhooks/",
        ".webhook.office.com/",
    ];
    if WEBHOOKS.iter().any(|w| lower.contains(w)) {
        return Some(Withheld::WebhookUrl);
    }
    let query = lower
        .split_once('?')
        .map(|(_, q)| q.split('#').next().unwrap_or_default());
    let secret_parameter = query.into_iter().flat_map(|q| q.split('&')).any(|pair| {
        let key = pair.split('=').next().unwrap_or_default();
        ["password", "passwd", "pwd", "token", "secret", "key"]
            .iter()
            .any(|w| key.contains(w))
            || key.ends_with("sig")
            || key.ends_with("signature")
    });
    secret_parameter.then_some(Withheld::UrlSecretParameter)
}

/// True when `value` holds `Password=` or `Pwd=` as a key of a `key=value;` connection string.
fn connection_string_password(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    ["password=", "pwd="].iter().any(|key| {
        lower.match_indices(key).any(|(at, _)| {
            lower[..at]
                .chars()
                .next_back()
                .is_none_or(|c| matches!(c, ';' | ' ' | '\t'))
        })
    })
}

/// True for a JSON Web Token: three base64url parts, the first a JSON object (`eyJ`).
fn is_jwt(word: &str) -> bool {
    let b64 = |p: &str| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    let parts: Vec<&str> = word.split('.').collect();
    parts.len() == 3
        && parts[0].starts_with("eyJ")
        && parts[0].len() >= 10
        && b64(parts[0])
        && b64(parts[1])
        && (parts[2].is_empty() || b64(parts[2]))
}

/// A shell-style glob: `*` matches any run of characters, `?` one; ASCII case is ignored.
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // The classic two-pointer match with backtracking to the last `*`.
    let (mut pi, mut ni, mut star, mut mark) = (0, 0, None, 0);
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi].eq_ignore_ascii_case(&n[ni])) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = ni;
            pi += 1;
        } else if let Some(s) = star {
            pi = s + 1;
            mark += 1;
            ni = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// The file `program` names: itself when it contains a `/`, else the first executable file of that
/// name in `search_path` (the child's `PATH`), else `program` unchanged (the spawn then reports it
/// missing).
///
/// Resolving here rather than in the child lets the standard library spawn with `posix_spawn`
/// (a vfork-style clone) instead of `fork`: it falls back to `fork` when the environment sets `PATH`
/// and the program is a bare name, and a fork copies the page tables of the whole host (measured:
/// 3.2 ms per spawn with 1,000 live tasks, growing with each).
pub fn resolve_program(program: &str, search_path: Option<&OsStr>) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    if program.contains('/') {
        return program.into();
    }
    std::env::split_paths(search_path.unwrap_or_default())
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(program))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .unwrap_or_else(|| program.into())
}

#[cfg(test)]
#[path = "env_tests.rs"]
mod tests;
