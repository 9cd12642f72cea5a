//! The stream buffer's behaviors: reads, the private spill file, the rolling window past the cap.

use super::*;
use crate::spill_layout::MARKER_LEN;

fn plan(dir: &std::path::Path, cap: u64) -> Option<SpillPlan> {
    Some(SpillPlan {
        path: dir.join("s.log"),
        dir: std::sync::Arc::new(crate::private_dir::HeldDir::ensure(dir).unwrap()),
        name: "s.log".into(),
        cap,
        budget: None,
        kept: false,
    })
}

fn kept_plan(dir: &std::path::Path, cap: u64) -> Option<SpillPlan> {
    plan(dir, cap).map(|p| SpillPlan { kept: true, ..p })
}

/// A scratch directory, removed when dropped.
struct Dir(PathBuf);
impl std::ops::Deref for Dir {
    type Target = std::path::Path;
    fn deref(&self) -> &std::path::Path {
        &self.0
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dir(name: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("taskhost-stream-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::set_permissions(&d, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    Dir(d)
}

#[test]
fn a_symlink_planted_at_the_spill_path_is_never_followed() {
    let d = dir("planted");
    let victim = d.join("victim");
    std::fs::write(&victim, b"untouched").unwrap();
    std::os::unix::fs::symlink(&victim, d.join("s.log")).unwrap();
    let mut s = StreamBuf::new(2, plan(&d, 1 << 20));
    s.push(b"attacker-chosen destination");
    assert_eq!(std::fs::read(&victim).unwrap(), b"untouched");
    assert!(
        s.spill_file().is_none(),
        "the spill is lost, not redirected"
    );
    assert!(s.overflowed());
}

#[test]
fn reads_consume_and_a_cursor_behind_the_tail_is_lossy() {
    let d = dir("lossy");
    let mut s = StreamBuf::new(4, plan(&d, 1 << 20));
    s.push(b"ab");
    assert_eq!(s.read().bytes, b"ab");
    s.push(b"cdefgh");
    let r = s.read();
    assert_eq!((r.bytes.as_slice(), r.lossy), (&b"efgh"[..], true));
    assert_eq!(std::fs::read(d.join("s.log")).unwrap(), b"abcdefgh");
    assert!(s.read().bytes.is_empty());
}

/// A rolled file's skipped count (from its marker) and its window, after a head of `head` bytes.
fn rolled(file: &[u8], head: usize) -> (usize, String) {
    let rest = String::from_utf8_lossy(&file[head..]).into_owned();
    let (marker, window) = rest.split_at(MARKER_LEN as usize);
    let skipped = marker
        .trim()
        .strip_prefix("[taskhost: ")
        .and_then(|m| m.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no marker in {marker:?}"));
    (skipped, window.to_owned())
}

#[test]
fn past_the_cap_the_spill_keeps_its_head_a_marker_and_the_latest_output() {
    let d = dir("rolling");
    let cap = 4096;
    let mut s = StreamBuf::new(16, plan(&d, cap));
    let mut all = Vec::new();
    for i in 0..2000u32 {
        let line = format!("line {i:05}\n");
        all.extend_from_slice(line.as_bytes());
        s.push(line.as_bytes());
        let size = std::fs::metadata(d.join("s.log")).map_or(0, |m| m.len());
        assert!(size <= cap, "the file grew to {size} past its cap {cap}");
    }
    s.finish();
    let file = std::fs::read(d.join("s.log")).unwrap();
    let head = (cap / 4) as usize;
    assert_eq!(
        &file[..head],
        &all[..head],
        "the head is the stream's start"
    );
    let (skipped, window) = rolled(&file, head);
    assert_eq!(
        head + skipped + window.len(),
        all.len(),
        "head + skipped + window is all"
    );
    assert!(
        all.ends_with(window.as_bytes()),
        "the window is the latest output"
    );
    assert!(window.ends_with("line 01999\n"));
    assert!(window.len() as u64 >= (cap - cap / 4 - MARKER_LEN) / 2);
    let spill = s.spill_file().expect("the file stays");
    assert!(spill.head_and_tail);
}

#[test]
fn one_write_larger_than_the_window_keeps_its_end() {
    let d = dir("rolling-big");
    let cap = 1024;
    let mut s = StreamBuf::new(8, plan(&d, cap));
    let big: Vec<u8> = (0..10_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    s.push(&big);
    s.push(b"END\n");
    s.finish();
    let file = std::fs::read(d.join("s.log")).unwrap();
    assert!(file.len() as u64 <= cap);
    assert!(file.ends_with(b"END\n"));
    assert_eq!(&file[..256], &big[..256]);
}

#[test]
fn the_spill_file_is_private_and_dropped_past_a_cap_too_small_to_roll() {
    use std::os::unix::fs::PermissionsExt;
    let d = dir("cap");
    let mut s = StreamBuf::new(2, plan(&d, 5));
    s.push(b"abc");
    let mode = std::fs::metadata(d.join("s.log"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(s.spill_file().is_some());
    s.push(b"def");
    assert!(s.spill_file().is_none());
    assert!(!d.join("s.log").exists());
    assert!(s.overflowed());
}

/// Proves: past the cap, output gathers in memory and reaches the file in one batch (here, at the
/// end); what fell out of the batch before it was written is counted as skipped, so the head, the
/// skipped count and the window still add up to the whole stream, and the window is its end.
#[test]
fn past_the_cap_output_is_batched_and_what_a_batch_dropped_is_counted_as_skipped() {
    let d = dir("batched");
    let cap = 64 * 1024;
    let mut s = StreamBuf::new(16, plan(&d, cap));
    let mut all = Vec::new();
    let mut i = 0u32;
    while all.len() < 10 * cap as usize {
        let line = format!("line {i:07}\n");
        all.extend_from_slice(line.as_bytes());
        s.push(line.as_bytes());
        i += 1;
    }
    s.finish();
    assert!(!s.has_pending());
    let file = std::fs::read(d.join("s.log")).unwrap();
    assert!(file.len() as u64 <= cap);
    let head = (cap / 4) as usize;
    assert_eq!(&file[..head], &all[..head]);
    let (skipped, window) = rolled(&file, head);
    assert_eq!(head + skipped + window.len(), all.len());
    assert!(all.ends_with(window.as_bytes()));
    assert!(window.len() as u64 >= (cap - cap / 4 - MARKER_LEN) / 2);
}

/// Proves: kept output past the cap is in its file once a read of it is answered (a spill may lag
/// until its batch is due).
#[test]
fn kept_output_is_written_before_a_read_of_it_is_answered() {
    let d = dir("kept-read");
    let cap = 4096;
    let mut s = StreamBuf::new(16, kept_plan(&d, cap));
    s.push(&[b'x'; 8192]);
    s.push(b"LATEST\n");
    assert!(s.read().bytes.ends_with(b"LATEST\n"));
    assert!(!s.has_pending());
    let file = std::fs::read(d.join("s.log")).unwrap();
    assert!(
        file.ends_with(b"LATEST\n"),
        "{:?}",
        &file[file.len() - 16..]
    );
    assert!(file.len() as u64 <= cap);
}

/// A stream written through `plan`, then resumed from its kept file as a successor would, with its
/// reads at `cursor`.
fn resumed(d: &Dir, cap: u64, written: &[u8], cursor: u64) -> StreamBuf {
    let mut first = StreamBuf::new(64, kept_plan(d, cap));
    first.push(written);
    first.finish();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(d.join("s.log"))
        .unwrap();
    StreamBuf::resume(64, kept_plan(d, cap).unwrap(), file, cursor)
}

#[test]
fn a_resumed_stream_goes_on_from_its_kept_file_where_its_reads_stood() {
    let d = dir("resume-plain");
    let mut s = resumed(&d, 1 << 20, b"line one\nline two\n", 9);
    s.push(b"line three\n");
    let read = s.read();
    assert_eq!(read.bytes, b"line two\nline three\n");
    assert!(!read.lossy);
    assert_eq!(s.total(), 29);
    assert_eq!(
        std::fs::read(d.join("s.log")).unwrap(),
        b"line one\nline two\nline three\n",
        "the file goes on at its end"
    );
}

#[test]
fn a_resumed_stream_past_its_cap_keeps_its_skipped_count_and_rolls_on() {
    let d = dir("resume-rolled");
    let cap = 400;
    let written: Vec<u8> = (0..100)
        .flat_map(|i| format!("{i:04}\n").into_bytes())
        .collect();
    let mut s = resumed(&d, cap, &written, written.len() as u64);
    let before =
        crate::spill_layout::read_marker(&std::fs::File::open(d.join("s.log")).unwrap(), cap)
            .expect("the file rolled");
    assert_eq!(
        s.total(),
        written.len() as u64,
        "head, skipped and window add up"
    );
    s.push(b"9999\n");
    s.finish();
    assert_eq!(s.read().bytes, b"9999\n", "nothing read twice");
    let file = std::fs::read(d.join("s.log")).unwrap();
    assert!(file.len() as u64 <= cap);
    assert!(file.ends_with(b"9999\n"));
    let after =
        crate::spill_layout::read_marker(&std::fs::File::open(d.join("s.log")).unwrap(), cap)
            .unwrap();
    assert!(after >= before, "{after} < {before}");
}

#[test]
fn a_file_that_never_rolled_has_no_marker() {
    let d = dir("no-marker");
    let _ = resumed(&d, 1 << 20, b"short\n", 0);
    let file = std::fs::File::open(d.join("s.log")).unwrap();
    assert_eq!(crate::spill_layout::read_marker(&file, 1 << 20), None);
}

/// How many descriptors this process has open on `path`.
fn open_on(path: &std::path::Path) -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| target == path)
        .count()
}

#[test]
fn a_kept_file_is_closed_between_batches_and_holds_every_byte() {
    let d = dir("kept-closed");
    let path = d.join("s.log");
    let mut s = StreamBuf::new(8, kept_plan(&d, 1 << 20));
    let mut all = Vec::new();
    for i in 0..50 {
        let line = format!("batch {i}\n");
        s.push(line.as_bytes());
        all.extend_from_slice(line.as_bytes());
        assert!(
            !s.spill.as_ref().unwrap().is_open(),
            "closed after batch {i}"
        );
        assert_eq!(open_on(&path), 0);
    }
    // Past the cap too: a rolling kept file is closed after each flush.
    let mut small = StreamBuf::new(
        8,
        kept_plan(&d, 1 << 20).map(|p| SpillPlan {
            cap: 4096,
            name: "r.log".into(),
            path: d.join("r.log"),
            ..p
        }),
    );
    small.push(&vec![b'x'; 10_000]);
    small.flush();
    assert!(!small.spill.as_ref().unwrap().is_open());
    s.finish();
    assert_eq!(std::fs::read(&path).unwrap(), all, "byte-exact");
    let handle = s.open_kept().expect("a second handle for a handover");
    assert!(
        !s.spill.as_ref().unwrap().is_open(),
        "only the handover's handle is open"
    );
    drop(handle);
}

#[test]
fn a_kept_file_put_aside_is_never_written_through_another_in_its_place() {
    let d = dir("kept-replaced");
    let path = d.join("s.log");
    let mut s = StreamBuf::new(8, kept_plan(&d, 1 << 20));
    s.push(b"first\n");
    std::fs::rename(&path, d.join("aside")).unwrap();
    std::fs::write(&path, b"").unwrap();
    s.push(b"second\n");
    assert_eq!(
        std::fs::read(&path).unwrap(),
        b"",
        "the stranger is untouched"
    );
    assert_eq!(std::fs::read(d.join("aside")).unwrap(), b"first\n");
    assert!(s.gap_note().is_some(), "a gap says the output is not kept");
    assert_eq!(s.not_kept(), 7);
}

#[test]
fn a_resumed_streams_reads_behind_its_tail_continue_in_the_kept_file_a_bounded_part_at_a_time() {
    use crate::kept_read::KEPT_READ_MAX;
    let d = dir("resume-behind");
    let written: Vec<u8> = (0..KEPT_READ_MAX + 1000)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let mut s = resumed(&d, 8 << 20, &written[..10], 3);
    s.push(&written[10..]);
    let first = s.read();
    assert!(!first.lossy);
    assert_eq!(first.bytes, &written[3..3 + KEPT_READ_MAX as usize]);
    assert_eq!(first.more, 997, "what the bound left for the next read");
    let second = s.read();
    assert_eq!(second.bytes, &written[3 + KEPT_READ_MAX as usize..]);
    assert_eq!((second.more, s.read().bytes.len()), (0, 0));
}
