//! The work's output file, followed as it grows: read from where the last look stopped, rendered
//! as a terminal shows it, at most [`UNREAD_MAX`] kept unread in memory.

use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;

/// Unread output kept in memory; past it the oldest is dropped (the file keeps all of it).
const UNREAD_MAX: usize = 1 << 20;

/// The output file followed from where the last look stopped.
pub(super) struct Follow {
    path: PathBuf,
    offset: u64,
    unread: String,
    dropped: bool,
    /// The file was refused (a link, another user's): said once in the output.
    refused: bool,
}

impl Follow {
    /// Appends what the file gained since the last look.
    pub(super) fn catch_up(&mut self) {
        let mut file = match taskhost_common::open_own_file(&self.path) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return, // not written yet
            Err(e) => {
                if !self.refused {
                    self.refused = true;
                    tracing::warn!(error = %e, "not following an output file");
                    self.unread.push_str(&format!("[output not read: {e}]\n"));
                }
                return;
            }
        };
        if file.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut fresh = Vec::new();
        if let Ok(n) = file.by_ref().take(8 << 20).read_to_end(&mut fresh) {
            self.offset += n as u64;
            self.unread
                .push_str(&crate::process::render_terminal(&fresh));
        }
        if self.unread.len() > UNREAD_MAX {
            let mut cut = self.unread.len() - UNREAD_MAX;
            while !self.unread.is_char_boundary(cut) {
                cut += 1;
            }
            self.unread.drain(..cut);
            self.dropped = true;
        }
    }

    pub(super) fn rendered(&self) -> String {
        if self.dropped {
            format!(
                "{}{}[some output was dropped from memory; full output: {}]",
                self.unread,
                if self.unread.ends_with('\n') || self.unread.is_empty() {
                    ""
                } else {
                    "\n"
                },
                self.path.display()
            )
        } else {
            self.unread.clone()
        }
    }

    pub(super) fn take(&mut self) -> String {
        let text = self.rendered();
        self.unread.clear();
        self.dropped = false;
        text
    }
}

impl Follow {
    /// Follows the file at `path` from byte `offset` (its start, or where an earlier host's reads
    /// stood).
    pub(super) fn new(path: PathBuf, offset: u64) -> Self {
        Self {
            path,
            offset,
            unread: String::new(),
            dropped: false,
            refused: false,
        }
    }

    /// The file followed.
    pub(super) fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Bytes of the file read so far (after a [`Follow::take`], all of them consumed).
    pub(super) fn offset(&self) -> u64 {
        self.offset
    }
}
