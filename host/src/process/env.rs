//! The environment a child process gets: the host's, minus anything that looks like a credential,
//! plus settings that keep tools from paging or coloring.

/// Names containing these (case-insensitive) never reach a child.
const SECRET_MARKERS: [&str; 4] = ["KEY", "PASSWORD", "SECRET", "TOKEN"];

/// Set for every child.
pub const FIXED: [(&str, &str); 4] = [
    ("NO_COLOR", "1"),
    ("TERM", "dumb"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
];

/// True when a variable of this name is removed from a child's environment.
pub fn is_secret(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    SECRET_MARKERS.iter().any(|m| upper.contains(m))
}

/// The scrubbed environment: `parent` without secrets, then [`FIXED`], then `extra` (trusted
/// configuration, applied last).
pub fn scrubbed(
    parent: impl IntoIterator<Item = (String, String)>,
    extra: &[(String, String)],
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> =
        parent.into_iter().filter(|(k, _)| !is_secret(k)).collect();
    for (k, v) in FIXED
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .chain(extra.iter().cloned())
    {
        env.retain(|(name, _)| *name != k);
        env.push((k, v));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_removed_case_insensitively_and_fixed_settings_win() {
        let parent = [
            ("MY_API_TOKEN", "t"),
            ("db_password", "p"),
            ("HOME", "/h"),
            ("TERM", "xterm"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()));
        let env = scrubbed(parent, &[]);
        assert!(
            env.iter()
                .all(|(k, _)| k != "MY_API_TOKEN" && k != "db_password")
        );
        assert!(env.contains(&("HOME".into(), "/h".into())));
        assert!(env.contains(&("TERM".into(), "dumb".into())));
        assert_eq!(env.iter().filter(|(k, _)| k == "TERM").count(), 1);
    }
}
