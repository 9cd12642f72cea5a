//! Identifiers: task ids issued by the registry, and the session and agent ids that callers bring.

use std::fmt;
use std::sync::Arc;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Wraps a string as this id. Any string is accepted; meaning is given by the caller.
            pub fn new(id: impl Into<Arc<str>>) -> Self {
                Self(id.into())
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), &*self.0)
            }
        }

        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self::new(s)
            }
        }

        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self::new(s)
            }
        }
    };
}

string_id!(
    /// A registry-issued task id, `<kind>-N`, with a per-kind counter starting at 1 and never reused
    /// within one registry. Ids are predictable: authorization, not secrecy, guards access.
    TaskId
);

string_id!(
    /// The session an agent belongs to. Access to owned tasks is decided by comparing session ids.
    SessionId
);

string_id!(
    /// The id an agent is registered under. One live instance per id at a time.
    AgentId
);

impl TaskId {
    pub(crate) fn issue(kind: &str, n: u64) -> Self {
        Self::new(format!("{kind}-{n}"))
    }

    /// Splits a well-formed id into its kind and number (`bash-3` gives `("bash", 3)`).
    /// Returns `None` for text that is not `<kind>-<n>` with a non-empty kind and `n >= 1`.
    pub fn parts(&self) -> Option<(&str, u64)> {
        let (kind, digits) = self.0.rsplit_once('-')?;
        let n: u64 = digits.parse().ok()?;
        let canonical = n.to_string() == digits;
        (!kind.is_empty() && n >= 1 && canonical).then_some((kind, n))
    }
}

impl std::borrow::Borrow<str> for TaskId {
    fn borrow(&self) -> &str {
        &self.0
    }
}
