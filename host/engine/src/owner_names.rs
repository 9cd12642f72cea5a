//! Owners as people know them: a principal by its token's name (`taskhost token create NAME`), a
//! session by its client's name (`clientInfo.name` of its `initialize`) and its number
//! (`claude-code #3` for `session-3`). Where nothing better is known, an owner keeps its id.

use std::collections::BTreeMap;

/// The longest client name shown; a longer one is cut there.
const CLIENT_NAME_MAX: usize = 48;

/// The name people know session `id` (`session-N`) by when its client called itself `client`:
/// `CLIENT #N`, the client's name without control characters and cut at 48 characters;
/// `None` for an id that is not a session's or a client name with nothing to show.
pub fn session_name(id: &str, client: &str) -> Option<String> {
    let number = id.strip_prefix("session-")?;
    let name: String = client
        .chars()
        .filter(|c| !c.is_control())
        .take(CLIENT_NAME_MAX)
        .collect();
    let name = name.trim();
    (!name.is_empty()).then(|| format!("{name} #{number}"))
}

/// The names of `ids` that have one: a principal's from `principals` (its owner and its name), a
/// session's from `client` (the name its client gave).
pub fn names<'a>(
    ids: impl IntoIterator<Item = &'a str>,
    principals: &BTreeMap<String, String>,
    client: impl Fn(&str) -> Option<String>,
) -> BTreeMap<String, String> {
    ids.into_iter()
        .filter_map(|id| {
            let name = if id.starts_with("principal-") {
                principals.get(id).cloned()
            } else {
                client(id).and_then(|c| session_name(id, &c))
            }?;
            Some((id.to_owned(), name))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_named_by_its_client_and_its_number() {
        assert_eq!(
            session_name("session-3", "claude-code").as_deref(),
            Some("claude-code #3")
        );
    }

    #[test]
    fn a_client_name_loses_control_characters_and_is_cut() {
        let long = format!("a\u{1b}[31mb{}", "x".repeat(100));
        let shown = session_name("session-1", &long).unwrap_or_default();
        assert!(shown.starts_with("a[31mbxxx") && !shown.contains('\u{1b}'));
        assert_eq!(shown.chars().count(), CLIENT_NAME_MAX + " #1".len());
    }

    #[test]
    fn an_owner_with_nothing_better_is_left_out() {
        assert_eq!(session_name("session-1", " \n "), None);
        assert_eq!(session_name("principal-1", "claude-code"), None);
        let principals = BTreeMap::from([("principal-6".to_owned(), "alice".to_owned())]);
        let client = |id: &str| (id == "session-17").then(|| "claude-code".to_owned());
        let named = names(
            ["principal-6", "principal-7", "session-17", "session-18"],
            &principals,
            client,
        );
        assert_eq!(
            named,
            BTreeMap::from([
                ("principal-6".to_owned(), "alice".to_owned()),
                ("session-17".to_owned(), "claude-code #17".to_owned()),
            ])
        );
    }
}
