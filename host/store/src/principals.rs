//! Principals: owners named by a bearer token (`taskhost token create NAME`), for clients that reach
//! the host over HTTP. A principal is an owner like a session's, of kind `principal`: its tasks are
//! fenced the same way, and clients presenting the same token share them. The token is shown once,
//! when it is made; the database keeps its SHA-256.

use rusqlite::{Connection, OptionalExtension, params};

use crate::owners::OwnerSecret;

/// The name of principal row `n`'s owner.
fn owner_name(n: i64) -> String {
    format!("principal-{n}")
}

/// The prefix of every token, so a token is recognised for what it is in a log or a secret scan.
pub const TOKEN_PREFIX: &str = "taskhost_";

/// A principal as `taskhost token list` shows it (never its token).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Principal {
    /// Its name.
    pub name: String,
    /// The owner its tasks belong to (`session-N`).
    pub owner: String,
    /// When it was made, ms since the Unix epoch.
    pub created_at_ms: u64,
    /// When it was revoked, if it was.
    pub revoked_at_ms: Option<u64>,
    /// True when its token shows people's views every owner's tasks (`--all-owners`); its MCP
    /// clients still see only its own.
    pub sees_all: bool,
}

/// A bearer token: [`TOKEN_PREFIX`] and an [`OwnerSecret`].
#[derive(Clone, PartialEq, Eq)]
pub struct Token(OwnerSecret);

impl Token {
    /// A new token (256 bits from the OS).
    ///
    /// # Errors
    /// The OS gave no randomness.
    pub fn generate() -> Result<Self, String> {
        OwnerSecret::generate().map(Self)
    }

    /// A token as a client presents it, else `None`.
    pub fn parse(text: &str) -> Option<Self> {
        text.strip_prefix(TOKEN_PREFIX)
            .and_then(OwnerSecret::parse)
            .map(Self)
    }

    /// The token's text, to show its holder once.
    pub fn reveal(&self) -> String {
        format!("{TOKEN_PREFIX}{}", self.0.as_str())
    }

    pub(crate) fn secret(&self) -> &OwnerSecret {
        &self.0
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// True for a name people can type and read: 1 to 64 letters, digits, `.`, `_`, `-`.
pub fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The row of live principal `name`, if there is one.
fn live(conn: &Connection, name: &str) -> rusqlite::Result<Option<i64>> {
    conn.query_row(
        "SELECT id FROM owners WHERE kind = 'principal' AND name = ?1 AND ended_at_ms IS NULL",
        [name],
        |r| r.get(0),
    )
    .optional()
}

/// Adds principal `name` with `token`; `None` when a live principal has that name.
pub(crate) fn insert(
    tx: &rusqlite::Transaction<'_>,
    name: &str,
    token: &Token,
    now_ms: u64,
    sees_all: bool,
) -> rusqlite::Result<Option<String>> {
    if live(tx, name)?.is_some() {
        return Ok(None);
    }
    tx.execute(
        "INSERT INTO owners(kind, name, secret_sha256, created_at_ms, sees_all) VALUES ('principal', ?1, ?2, ?3, ?4)",
        params![name, token.secret().sha256(), now_ms as i64, sees_all],
    )?;
    Ok(Some(owner_name(tx.last_insert_rowid())))
}

/// Revokes live principal `name`; its owner, or `None` when there is none by that name.
pub(crate) fn revoke(
    tx: &rusqlite::Transaction<'_>,
    name: &str,
    now_ms: u64,
) -> rusqlite::Result<Option<String>> {
    let Some(id) = live(tx, name)? else {
        return Ok(None);
    };
    tx.execute(
        "UPDATE owners SET ended_at_ms = ?2 WHERE id = ?1",
        params![id, now_ms as i64],
    )?;
    Ok(Some(owner_name(id)))
}

/// Every principal, oldest first.
pub(crate) fn all(conn: &Connection) -> rusqlite::Result<Vec<Principal>> {
    conn.prepare(
        "SELECT name, id, created_at_ms, ended_at_ms, sees_all FROM owners WHERE kind = 'principal'
         ORDER BY id",
    )?
    .query_map([], |r| {
        Ok(Principal {
            name: r.get(0)?,
            owner: owner_name(r.get(1)?),
            created_at_ms: r.get::<_, i64>(2)? as u64,
            revoked_at_ms: r.get::<_, Option<i64>>(3)?.map(|t| t as u64),
            sees_all: r.get(4)?,
        })
    })?
    .collect()
}

/// The live principal `token` names: its name, its owner, and whether people's views show it
/// every owner's tasks.
pub(crate) fn by_token(
    conn: &Connection,
    token: &Token,
) -> rusqlite::Result<Option<(String, String, bool)>> {
    conn.prepare_cached(
        "SELECT name, id, sees_all FROM owners WHERE kind = 'principal' AND secret_sha256 = ?1
         AND ended_at_ms IS NULL",
    )?
    .query_row(params![token.secret().sha256()], |r| {
        Ok((r.get(0)?, owner_name(r.get(1)?), r.get(2)?))
    })
    .optional()
}

/// Looks bearer tokens up on a database connection of its own, kept open across lookups: checking
/// an HTTP request's token is one indexed read, and a token revoked a moment ago is already refused.
pub struct PrincipalLookup(parking_lot::Mutex<Connection>);

impl PrincipalLookup {
    pub(crate) fn new(conn: Connection) -> Self {
        Self(parking_lot::Mutex::new(conn))
    }

    /// The live principal `token` names: its name and its owner.
    ///
    /// # Errors
    /// The database could not be read.
    pub fn owner_of(&self, token: &Token) -> Result<Option<(String, String)>, crate::StoreError> {
        Ok(self.viewer_of(token)?.map(|(name, owner, _)| (name, owner)))
    }

    /// As [`PrincipalLookup::owner_of`], with whether the principal sees every owner's tasks in
    /// people's views (`--all-owners`).
    ///
    /// # Errors
    /// The database could not be read.
    pub fn viewer_of(
        &self,
        token: &Token,
    ) -> Result<Option<(String, String, bool)>, crate::StoreError> {
        Ok(by_token(&self.0.lock(), token)?)
    }
}
