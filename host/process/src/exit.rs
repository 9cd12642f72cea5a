//! How a process ended.

/// How a process ended.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// A signal ended it.
    Signal(i32),
    /// It never ran (spawn failure) or its status is unknown.
    Unknown,
}
