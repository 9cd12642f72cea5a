//! The host's refusal as a plugin gets it: a kind to branch on and a message to show.

use abi_stable::StableAbi;
use abi_stable::std_types::RString;

/// What kind of refusal a [`HostError`] is: the part a plugin branches on.
#[repr(u8)]
#[derive(StableAbi, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HostErrorKind {
    /// What was named does not exist for the caller (an unknown task, or another session's: the
    /// two are not told apart).
    NotFound = 1,
    /// The caller may not do this.
    Forbidden,
    /// The request itself is malformed (an empty label, a bad pattern, a bad timeout).
    Invalid,
    /// A well-formed request the host declined in its present state (a limit reached, input to a
    /// task that takes none or has ended).
    Refused,
    /// What the request needs is not there now (no control surface, the host stopping).
    Unavailable,
    /// The host or a producer failed.
    Internal,
}

/// A refusal by the host: its kind and the model-facing message. Its `Display` is the message.
#[repr(C)]
#[derive(StableAbi, Clone, Debug, PartialEq, Eq)]
pub struct HostError {
    /// What kind of refusal it is.
    pub kind: HostErrorKind,
    /// What it says, as the model reads it.
    pub message: RString,
}

impl HostError {
    /// A refusal of `kind` saying `message`.
    pub fn new(kind: HostErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: RString::from(message.into()),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        self.message.as_str()
    }
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.message.as_str())
    }
}

impl std::error::Error for HostError {}

impl From<HostError> for String {
    fn from(e: HostError) -> Self {
        e.message.into_string()
    }
}
