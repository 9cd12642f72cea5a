//! Owners that outlive their connection: each session's owner is a row of `owners`, named
//! `session-N` (unique within the state directory); one that may come back holds a secret of 256
//! random bits, of which the database keeps only the SHA-256.

use rusqlite::{Connection, OptionalExtension, params};
use sha2::{Digest, Sha256};

/// A secret that names an owner to the host that minted it (and to any later host of its state
/// directory). Shown in full only by [`OwnerSecret::as_str`]; `Debug` hides it.
#[derive(Clone, PartialEq, Eq)]
pub struct OwnerSecret(String);

impl OwnerSecret {
    /// 256 bits from the OS's random source, as 64 lower-case hex digits.
    ///
    /// # Errors
    /// The OS gave no randomness.
    pub fn generate() -> Result<Self, String> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for a secret: {e}"))?;
        Ok(Self(bytes.iter().map(|b| format!("{b:02x}")).collect()))
    }

    /// A secret as a client presents it: 64 hex digits, else `None`.
    pub fn parse(text: &str) -> Option<Self> {
        let ok = text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit());
        ok.then(|| Self(text.to_ascii_lowercase()))
    }

    /// The secret's text, to hand to its owner.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// What is stored of it.
    pub fn sha256(&self) -> Vec<u8> {
        Sha256::digest(self.0.as_bytes()).to_vec()
    }
}

impl std::fmt::Debug for OwnerSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OwnerSecret(..)")
    }
}

/// The name of session owner row `n`.
fn owner_name(n: i64) -> String {
    format!("session-{n}")
}

/// Adds an owner; its name.
pub(crate) fn insert(
    tx: &rusqlite::Transaction<'_>,
    kind: &str,
    secret_sha256: Option<&[u8]>,
    now_ms: u64,
) -> rusqlite::Result<String> {
    tx.execute(
        "INSERT INTO owners(kind, secret_sha256, created_at_ms) VALUES (?1, ?2, ?3)",
        params![kind, secret_sha256, now_ms as i64],
    )?;
    Ok(owner_name(tx.last_insert_rowid()))
}

/// The owner a secret names, unless it has ended.
pub(crate) fn by_secret(
    conn: &Connection,
    secret: &OwnerSecret,
) -> rusqlite::Result<Option<String>> {
    conn.query_row(
        "SELECT id FROM owners WHERE kind = 'session' AND secret_sha256 = ?1
         AND ended_at_ms IS NULL",
        params![secret.sha256()],
        |r| r.get::<_, i64>(0),
    )
    .optional()
    .map(|n| n.map(owner_name))
}

/// Marks owner `name` ended: its secret names nobody from now on.
pub(crate) fn end(tx: &rusqlite::Transaction<'_>, name: &str, now_ms: u64) -> rusqlite::Result<()> {
    let Some(n) = name
        .strip_prefix("session-")
        .and_then(|n| n.parse::<i64>().ok())
    else {
        return Ok(());
    };
    tx.execute(
        "UPDATE owners SET ended_at_ms = ?2 WHERE id = ?1 AND ended_at_ms IS NULL",
        params![n, now_ms as i64],
    )?;
    Ok(())
}
