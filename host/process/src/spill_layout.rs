//! The layout of a spill file past its cap: `[head][marker][window]`, the window holding the latest
//! output, and the marker saying how much was skipped between them; and the marker of a gap in a
//! kept file ([`Gap`]).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// A spill file past its cap: `[head][marker][window]`, the window holding the latest output.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rolling {
    /// Where the window starts (the head's length plus the marker's).
    pub(crate) window_at: u64,
    /// How many bytes the window may hold.
    pub(crate) window_max: u64,
    /// How many it holds.
    pub(crate) window_len: u64,
    /// Bytes of the stream left out between the head and the window.
    pub(crate) skipped: u64,
}

/// The marker line's fixed length, so it is rewritten in place as the skipped count grows.
pub(crate) const MARKER_LEN: u64 = 96;

/// The marker between the head and the window, padded to [`MARKER_LEN`].
pub(crate) fn marker(skipped: u64) -> Vec<u8> {
    let text = format!("\n[taskhost: {skipped} bytes skipped; the latest output follows]");
    let mut line = text.into_bytes();
    line.resize(MARKER_LEN as usize - 1, b' ');
    line.push(b'\n');
    line
}

/// Copies `len` bytes of `file` from offset `from` to offset `to` (the ranges may overlap).
pub(crate) fn move_within(file: &File, from: u64, to: u64, len: u64) -> std::io::Result<()> {
    const CHUNK: u64 = 1 << 20;
    if from == to || len == 0 {
        return Ok(());
    }
    let mut buf = vec![0u8; CHUNK.min(len) as usize];
    let mut copy = |offset: u64| -> std::io::Result<()> {
        let n = CHUNK.min(len - offset) as usize;
        file.read_exact_at(&mut buf[..n], from + offset)?;
        file.write_all_at(&buf[..n], to + offset)
    };
    if to < from {
        let mut offset = 0;
        while offset < len {
            copy(offset)?;
            offset += CHUNK;
        }
    } else {
        let mut offset = len.div_ceil(CHUNK) * CHUNK;
        while offset > 0 {
            offset -= CHUNK;
            copy(offset)?;
        }
    }
    Ok(())
}

/// What a file of cap `cap` says was skipped, if it is past its cap (its marker is in place after
/// the head); `None` for a file that still holds the whole stream.
pub(crate) fn read_marker(file: &File, cap: u64) -> Option<u64> {
    let mut line = vec![0u8; MARKER_LEN as usize];
    file.read_exact_at(&mut line, cap / 4).ok()?;
    let text = std::str::from_utf8(&line).ok()?;
    let skipped = text
        .strip_prefix("\n[taskhost: ")?
        .split_once(" bytes skipped; the latest output follows]")?
        .0;
    text.ends_with('\n').then_some(())?;
    skipped.parse().ok()
}

/// Output of one stream its kept file misses since the disk last took a write.
#[derive(Debug)]
pub(crate) struct Gap {
    /// Bytes of the stream not written to the file.
    pub(crate) bytes: u64,
    /// Why, as the marker and the reads say it.
    pub(crate) reason: String,
}

/// Why a write failed, in the words of the marker: a full disk is named as such.
pub(crate) fn reason(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT) => "the state disk is full".to_owned(),
        _ => format!("a write of the kept file failed ({e})"),
    }
}

/// The line written where a gap was, once the disk takes writes again.
pub(crate) fn gap_marker(gap: &Gap) -> Vec<u8> {
    format!(
        "\n[taskhost: {} bytes not kept: {}]\n",
        gap.bytes, gap.reason
    )
    .into_bytes()
}

/// Writes `data` at `at`; returns how many bytes went in before a write failed, and the failure.
pub(crate) fn write_counted(file: &File, data: &[u8], at: u64) -> (usize, Option<io::Error>) {
    let mut done = 0;
    while done < data.len() {
        match file.write_at(&data[done..], at + done as u64) {
            Ok(0) => return (done, Some(io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Some(e)),
        }
    }
    (done, None)
}
