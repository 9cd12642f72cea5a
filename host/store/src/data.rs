//! What the store hands out and takes: plain data, the same with or without SQLite (the `sqlite`
//! feature), so the engine's code names them either way.

use sha2::{Digest, Sha256};

/// One task's record.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct TaskRecord {
    /// The task id (`bash-3`).
    pub id: String,
    /// Its kind.
    pub kind: String,
    /// The session that owned it, if any.
    pub owner: Option<String>,
    /// Its command or summary.
    pub label: String,
    /// `starting`, `running`, `stopping`, `completed`, `killed`, `failed` or `lost`.
    pub status: String,
    /// Its detail: an exit code, a signal, why it failed or was lost.
    pub detail: Option<String>,
    /// When it started, ms since the Unix epoch.
    pub started_at_ms: u64,
    /// When it settled (or was found lost), ms since the Unix epoch.
    pub finished_at_ms: Option<u64>,
    /// The host that ran it (its row in the database).
    pub host: i64,
    /// Its kept stdout, if any: the name of a file in the state directory's `output/`.
    pub stdout_path: Option<String>,
    /// Its kept stderr, if any: the name of a file in `output/`.
    pub stderr_path: Option<String>,
    /// When retention removed its output, ms since the Unix epoch.
    pub expired_at_ms: Option<u64>,
    /// True once its owner was told of its end (a notice or a read).
    pub told: bool,
    /// Bytes of its stdout and stderr its owner's reads consumed.
    pub read: [u64; 2],
}

/// How a task's external work is followed, with `{id}` already filled in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalRecord {
    /// The work's own id (a Slurm job id).
    pub work_id: String,
    /// Prints the work's state (`running`, or `completed|killed|failed <detail>`).
    pub poll: String,
    /// Stops the work.
    pub cancel: String,
    /// The work's output file.
    pub output: String,
    /// How often the state is polled, ms.
    pub poll_every_ms: u64,
    /// Bytes of the output file its owner's reads consumed.
    pub read_offset: u64,
}

/// A live external task of a host that is gone, now this host's to follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Adopted {
    /// Its record.
    pub record: TaskRecord,
    /// How to follow it.
    pub external: ExternalRecord,
}

/// A queued task of a host that is gone, now this host's to queue again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requeued {
    /// Its record.
    pub record: TaskRecord,
    /// What it runs, as its host wrote it (JSON the host reads back).
    pub spec: String,
}

/// A foreground command in flight, as its host recorded it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForegroundRecord {
    /// The row's id (ignored when recording: the store gives it); its keeper holds the process for
    /// it by this id.
    pub id: u64,
    /// The calling session, which owns the task it becomes.
    pub session: Option<String>,
    /// The kind of the task it would become (`bash`).
    pub kind: String,
    /// What the task would show as its label.
    pub label: String,
    /// The JSON-RPC id of the call, as JSON text (a bridge's answer names the task by it).
    pub request: Option<String>,
}

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
    /// The policy (`[policy.NAME]` of the host's config) its tasks run under; `None`: the config's
    /// `[policy.default]`, if it has one.
    pub policy: Option<String>,
}
