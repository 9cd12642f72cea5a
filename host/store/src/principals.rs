//! Principals: owners named by a bearer token (`taskhost token create NAME`), for clients that reach
//! the host over HTTP. A principal is an owner like a session's, of kind `principal`: its tasks are
//! fenced the same way, and clients presenting the same token share them. The token is shown once,
//! when it is made; the database keeps its SHA-256.

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

use crate::error::StoreError;
use crate::data::{OwnerSecret, Principal};

/// The name of principal row `n`'s owner.
fn owner_name(n: i64) -> String {
    format!("principal-{n}")
}

/// The prefix of every token, so a token is recognised for what it is in a log or a secret scan.
pub const TOKEN_PREFIX: &str = "taskhost_";

/// What a new principal is given besides its name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrincipalGrants {
    /// People's views show it every owner's tasks (`--all-owners`).
    pub sees_all: bool,
    /// The policy its tasks run under (`--policy`).
    pub policy: Option<String>,
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
    grants: &PrincipalGrants,
) -> rusqlite::Result<Option<String>> {
    if live(tx, name)?.is_some() {
        return Ok(None);
    }
    tx.execute(
        "INSERT INTO owners(kind, name, secret_sha256, created_at_ms, sees_all, policy)
         VALUES ('principal', ?1, ?2, ?3, ?4, ?5)",
        params![
            name,
            token.secret().sha256(),
            now_ms as i64,
            grants.sees_all,
            grants.policy
        ],
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
        "SELECT name, id, created_at_ms, ended_at_ms, sees_all, policy FROM owners
         WHERE kind = 'principal' ORDER BY id",
    )?
    .query_map([], |r| {
        Ok(Principal {
            name: r.get(0)?,
            owner: owner_name(r.get(1)?),
            created_at_ms: r.get::<_, i64>(2)? as u64,
            revoked_at_ms: r.get::<_, Option<i64>>(3)?.map(|t| t as u64),
            sees_all: r.get(4)?,
            policy: r.get(5)?,
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

    /// The key of the principal whose stored hash `H` hashes (SHA-256, in lower-case hex) to
    /// `id`, live or revoked, for a page to check the host holds its token's record before it
    /// sends the token; `None` for any other `id`.
    ///
    /// # Errors
    /// The database could not be read.
    pub fn proof_key(&self, id: &str) -> Result<Option<ProofKey>, crate::StoreError> {
        let conn = self.0.lock();
        let mut rows = conn.prepare_cached(
            "SELECT secret_sha256, ended_at_ms IS NULL FROM owners WHERE kind = 'principal'",
        )?;
        let mut rows = rows.query([])?;
        while let Some(row) = rows.next()? {
            let key: Vec<u8> = row.get(0)?;
            if key.len() == 32 && hex(&Sha256::digest(&key)).eq_ignore_ascii_case(id) {
                return Ok(Some(ProofKey {
                    key,
                    live: row.get(1)?,
                }));
            }
        }
        Ok(None)
    }
}

/// A principal's stored hash `H` as the key a host proves it holds with (see
/// [`PrincipalLookup::proof_key`]).
pub struct ProofKey {
    key: Vec<u8>,
    /// False when the principal was revoked.
    pub live: bool,
}

impl ProofKey {
    /// `HMAC-SHA256(H, message)` in lower-case hex.
    pub fn sign(&self, message: &[u8]) -> String {
        hex(&hmac_sha256(&self.key, message))
    }
}

impl std::fmt::Debug for ProofKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProofKey(..)")
    }
}

/// HMAC-SHA256 (RFC 2104) with a key of at most one block (64 bytes).
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    block[..key.len().min(64)].copy_from_slice(&key[..key.len().min(64)]);
    let inner = Sha256::new()
        .chain_update(block.map(|b| b ^ 0x36))
        .chain_update(message)
        .finalize();
    Sha256::new()
        .chain_update(block.map(|b| b ^ 0x5c))
        .chain_update(inner)
        .finalize()
        .into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl crate::Store {
    /// Makes principal `name` and its token, shown only now.
    ///
    /// # Errors
    /// [`StoreError::Principal`] for a malformed name or one a live principal has; the database's.
    pub fn create_principal(&self, name: &str) -> Result<Token, StoreError> {
        self.create_principal_with(name, &PrincipalGrants::default())
    }

    /// As [`crate::Store::create_principal`], with `grants`: with `sees_all`, people's views (the
    /// `web` plugin) show the principal every owner's tasks, while its MCP clients still see only
    /// its own; with a `policy`, its tasks run under that policy of the host's config.
    ///
    /// # Errors
    /// As [`crate::Store::create_principal`]; a malformed policy name.
    pub fn create_principal_with(
        &self,
        name: &str,
        grants: &PrincipalGrants,
    ) -> Result<Token, StoreError> {
        if !valid_name(name) {
            return Err(StoreError::Principal(format!(
                "a principal's name is 1 to 64 letters, digits, '.', '_' or '-': {name:?}"
            )));
        }
        if let Some(policy) = grants.policy.as_deref().filter(|p| !valid_name(p)) {
            return Err(StoreError::Principal(format!(
                "a policy's name is 1 to 64 letters, digits, '.', '_' or '-': {policy:?}"
            )));
        }
        let token = Token::generate().map_err(StoreError::Sqlite)?;
        let mut conn = self.reader()?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        if insert(&tx, name, &token, crate::store::now_ms(), grants)?.is_none() {
            return Err(StoreError::Principal(format!(
                "a principal named {name} exists; revoke it first, or pick another name"
            )));
        }
        tx.commit()?;
        Ok(token)
    }

    /// Revokes principal `name`: its token names nobody from now on. Returns its owner.
    ///
    /// # Errors
    /// [`StoreError::Principal`] when no live principal has that name; the database's.
    pub fn revoke_principal(&self, name: &str) -> Result<String, StoreError> {
        let mut conn = self.reader()?;
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let owner = revoke(&tx, name, crate::store::now_ms())?
            .ok_or_else(|| StoreError::Principal(format!("no principal named {name}")))?;
        tx.commit()?;
        Ok(owner)
    }

    /// Every principal, revoked ones included, oldest first (never a token).
    ///
    /// # Errors
    /// The database could not be read.
    pub fn principals(&self) -> Result<Vec<Principal>, StoreError> {
        Ok(all(&self.reader()?)?)
    }

    /// The live principal `token` names: its name and its owner.
    ///
    /// # Errors
    /// The database could not be read.
    pub fn principal_of(&self, token: &Token) -> Result<Option<(String, String)>, StoreError> {
        Ok(by_token(&self.reader()?, token)?.map(|(name, owner, _)| (name, owner)))
    }

    /// The policy principal owner `owner` (`principal-N`) was bound to when it was made: `Ok(None)`
    /// for a principal bound to none, and for an owner that is no principal.
    ///
    /// # Errors
    /// The database could not be read.
    pub fn policy_of_principal(&self, owner: &str) -> Result<Option<String>, StoreError> {
        let Some(id) = owner
            .strip_prefix("principal-")
            .and_then(|n| n.parse::<i64>().ok())
        else {
            return Ok(None);
        };
        let policy = self
            .reader()?
            .query_row(
                "SELECT policy FROM owners WHERE kind = 'principal' AND id = ?1",
                [id],
                |r| r.get::<_, Option<String>>(0),
            )
            .optional()?;
        Ok(policy.flatten())
    }

    /// A lookup of tokens that keeps a connection of its own (see [`crate::PrincipalLookup`]).
    ///
    /// # Errors
    /// The database could not be opened.
    pub fn principal_lookup(&self) -> Result<crate::PrincipalLookup, StoreError> {
        Ok(crate::PrincipalLookup::new(self.reader()?))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn hmac_sha256_is_rfc_4231s() {
        let mac = super::hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            super::hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
