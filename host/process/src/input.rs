//! The input side of a process run under a pseudo-terminal: bytes typed into the terminal's master.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::runtime::Handle;

/// How long one write may wait for the terminal to take its bytes (a program that never reads its
/// input fills the terminal's buffer; the write then fails instead of blocking the caller for good).
const WRITE_LIMIT: Duration = Duration::from_secs(5);

/// Why input could not be delivered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// The process has no terminal: its stdin is closed.
    #[error("the process takes no input (it was not started with a terminal)")]
    NoTerminal,
    /// The process has ended.
    #[error("the process has ended")]
    Ended,
    /// The terminal took only part of the input within the limit: the program is not reading.
    #[error(
        "the program is not reading its input: the terminal took {written} of {total} bytes in {} s",
        WRITE_LIMIT.as_secs()
    )]
    NotReading {
        /// Bytes delivered.
        written: usize,
        /// Bytes asked for.
        total: usize,
    },
    /// The terminal refused the write.
    #[error("cannot write to the terminal: {0}")]
    Io(String),
}

/// The master side of a process's terminal, for writing. Writes from several callers are
/// serialized, so one caller's bytes are never interleaved with another's.
#[derive(Clone)]
pub(crate) struct Input(Arc<tokio::sync::Mutex<tokio::net::unix::pipe::Sender>>);

impl Input {
    pub(crate) fn new(pty: tokio::net::unix::pipe::Sender) -> Self {
        Self(Arc::new(tokio::sync::Mutex::new(pty)))
    }

    /// Writes `bytes` on the runtime and waits (on the calling thread) until they are taken or the
    /// limit passes.
    pub(crate) fn write(&self, runtime: &Handle, bytes: Vec<u8>) -> Result<(), InputError> {
        let (tx, rx) = std::sync::mpsc::channel();
        let pty = self.0.clone();
        runtime.spawn(async move {
            let total = bytes.len();
            let mut pty = pty.lock().await;
            let mut written = 0;
            let result = tokio::time::timeout(WRITE_LIMIT, async {
                while written < total {
                    match pty.write(&bytes[written..]).await {
                        Ok(0) => return Err(InputError::Ended),
                        Ok(n) => written += n,
                        Err(e) => return Err(InputError::Io(e.to_string())),
                    }
                }
                pty.flush().await.map_err(|e| InputError::Io(e.to_string()))
            })
            .await
            .unwrap_or(Err(InputError::NotReading { written, total }));
            let _ = tx.send(result);
        });
        rx.recv()
            .unwrap_or_else(|_| Err(InputError::Io("the runtime is shutting down".into())))
    }
}
