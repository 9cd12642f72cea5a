//! A full state disk with the real binary: the state directory on a small tmpfs the test mounts
//! (and always unmounts), filled by a file of the test's. Output still reaches the caller, a task's
//! pipe is still drained, the kept file says where bytes were not kept, and it is kept again once
//! space returns.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::fixtures::*;
use crate::mcp::{self, SocketHost, Watcher};

/// A 20 MB tmpfs mounted on a directory of the test's, unmounted when dropped (also on a failure).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path) -> Self {
        std::fs::create_dir_all(at).unwrap();
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=20m", "tmpfs"])
            .arg(at)
            .status()
            .unwrap();
        assert!(status.success(), "cannot mount a tmpfs on {}", at.display());
        Self(at.to_owned())
    }

    /// Fills the disk with `filler` until a write fails for want of space.
    fn fill(&self) -> PathBuf {
        let path = self.0.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        for size in [1 << 20, 4096, 1] {
            let chunk = vec![b'f'; size];
            while f.write_all(&chunk).is_ok() {}
        }
        let _ = f.sync_all();
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let unmounted = std::process::Command::new("umount")
            .arg(&self.0)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.0)
                .status();
        }
    }
}

/// The files under `dir` (recursively) whose content contains `needle`, with their content.
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            found.extend(files_containing(&path, needle));
        } else if let Ok(bytes) = std::fs::read(&path) {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            if text.contains(needle) && !path.ends_with("filler") {
                found.push(text);
            }
        }
    }
    found
}

/// A host whose state is on `mnt` and whose log goes to `log`.
fn host_on(dir: &Path, mnt: &Path, log: &Path) -> SocketHost {
    let state = mnt.join("state");
    SocketHost::start_after(
        dir,
        &dir.join("taskhost.sock"),
        &format!("exec 2>>'{}'", log.display()),
        &["--no-watch", "--state", state.to_str().unwrap()],
    )
}

/// Proves: with the state disk full, a foreground command's answer still carries its whole output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_call_answers_with_its_whole_output_on_a_full_state_disk() {
    let dir = scratch("disk-full-fg");
    let disk = Tmpfs::mount(&dir.join("mnt"));
    let log = dir.join("host.log");
    let mut host = host_on(&dir, &disk.0, &log);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    disk.fill();
    let answer = mcp::call(
        &client,
        "bash",
        json!({"command": "echo fg-output; echo second"}),
    )
    .await;
    assert!(answer.contains("fg-output\nsecond"), "{answer:?}");
    drop(client);
    host.stop();
}

/// Reads `id`'s output until it names `needle` (60 s at most): everything read, each read that said
/// the disk is full followed by a line `<disk full told>`.
async fn read_until(client: &mcp::Client, id: &str, needle: &str) -> String {
    let mut seen = String::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !seen.contains(needle) && std::time::Instant::now() < deadline {
        let read = mcp::call(
            client,
            "task_output",
            json!({"task_id": id, "wait": true, "timeout_ms": 1000}),
        )
        .await;
        seen.push_str(&read);
        if read.contains("the state disk is full") {
            seen.push_str("\n<disk full told>\n");
        }
    }
    assert!(
        seen.contains(needle),
        "the task's output stopped before {needle}: {}",
        &seen[seen.len().saturating_sub(2000)..]
    );
    seen
}

/// A command that prints `before-the-disk-filled`, waits for `go`, then runs `then`.
fn after(go: &Path, then: &str) -> String {
    format!(
        "echo before-the-disk-filled; while [ ! -e '{}' ]; do sleep 0.05; done; {then}",
        go.display()
    )
}

/// Proves: a task writing more than the full state disk holds is still drained (its reads return
/// new output, it ends when its command does), and its reads, its status and the host's log (once
/// per stream) say the disk is full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_writing_more_than_the_full_state_disk_holds_is_drained_and_told_so() {
    let dir = scratch("disk-full-bg");
    let disk = Tmpfs::mount(&dir.join("mnt"));
    let log = dir.join("host.log");
    let go = dir.join("go");
    let mut host = host_on(&dir, &disk.0, &log);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let command = after(
        &go,
        "yes 0123456789abcdef0123456789abcdef | head -c 30000000; echo; echo the-writer-ended",
    );
    let id = mcp::start(&client, &command).await;
    disk.fill();
    std::fs::write(&go, "").unwrap();

    // Drained: the 30 MB go through the pipe although no byte more fits on the disk.
    let seen = read_until(&client, &id, "the-writer-ended").await;
    assert!(
        seen.contains("<disk full told>"),
        "no read said the disk is full"
    );
    let end = mcp::read_waiting(&client, &id, 30_000).await;
    assert!(
        end.contains("[status: completed, exit code: 0; ")
            && end.contains(" bytes of its output were not kept (the disk refused them)]"),
        "the status says output was not kept: {end}"
    );
    drop(client);
    host.stop();
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    let told = logged.matches("the state disk is full").count();
    assert!(
        (1..=2).contains(&told),
        "the log should say once per stream that the disk is full, said it {told} times:\n{logged}"
    );
}

/// Proves: output the full state disk refused leaves one marker in the kept file saying how many
/// bytes were not kept, and the output after space returned is kept after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_is_kept_again_after_a_marked_gap_once_the_state_disk_has_room() {
    let dir = scratch("disk-full-again");
    let disk = Tmpfs::mount(&dir.join("mnt"));
    let log = dir.join("host.log");
    let (go, again) = (dir.join("go"), dir.join("again"));
    let mut host = host_on(&dir, &disk.0, &log);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let command = after(
        &go,
        &format!(
            "yes 0123456789abcdef | head -c 1000000; echo; echo refused-output-ended; \
             while [ ! -e '{}' ]; do sleep 0.05; done; echo after-space-returned; echo the-end",
            again.display()
        ),
    );
    let id = mcp::start(&client, &command).await;
    read_until(&client, &id, "before-the-disk-filled").await;
    let filler = disk.fill();
    std::fs::write(&go, "").unwrap();
    read_until(&client, &id, "refused-output-ended").await;
    std::fs::remove_file(&filler).unwrap();
    std::fs::write(&again, "").unwrap();
    let end = mcp::read_waiting(&client, &id, 30_000).await;
    assert!(end.contains("the-end"), "{end}");
    drop(client);
    host.stop();

    // The task's kept stdout (the database holds its command, which names the same words).
    let kept: Vec<String> = files_containing(&disk.0.join("state"), "after-space-returned")
        .into_iter()
        .filter(|t| t.starts_with("before-the-disk-filled\n"))
        .collect();
    assert_eq!(
        kept.len(),
        1,
        "one kept file holds the output after the gap"
    );
    let text = &kept[0];
    let marker_at = text
        .find("bytes not kept: the state disk is full]")
        .expect("a marker where output was not kept");
    assert!(
        text[marker_at..].contains("after-space-returned\nthe-end\n"),
        "output after the gap is kept after its marker: {}",
        &text[marker_at..]
    );
    assert_eq!(
        text.matches("bytes not kept").count(),
        1,
        "one marker per gap"
    );
}

/// Proves: a task that settles while the state disk is too full for its record still gets its
/// record once space returns: the write the database refused is tried again, and the host serves
/// on meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_settlement_the_full_database_refused_is_recorded_once_space_returns() {
    let dir = scratch("disk-full-db");
    let disk = Tmpfs::mount(&dir.join("mnt"));
    let log = dir.join("host.log");
    let go = dir.join("go");
    let mut host = host_on(&dir, &disk.0, &log);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let command = format!(
        "while [ ! -e '{go}' ]; do sleep 0.05; done; echo settled-on-a-full-disk; exit 3",
        go = go.display()
    );
    let id = mcp::start(&client, &command).await;
    let filler = disk.fill();
    std::fs::write(&go, "").unwrap();
    let end = mcp::read_waiting(&client, &id, 30_000).await;
    assert!(end.contains("exit code: 3"), "{end}");
    std::fs::remove_file(&filler).unwrap();
    // The host serves on: a foreground call after space returned.
    let answer = mcp::call(&client, "bash", json!({"command": "echo still-serving"})).await;
    assert!(answer.contains("still-serving"), "{answer}");
    drop(client);
    host.stop();
    let out = output_within(
        std::process::Command::new(mcp::binary())
            .args(["tasks", "--json", "--all", "--state"])
            .arg(disk.0.join("state")),
        Duration::from_secs(30),
    );
    let records = String::from_utf8_lossy(&out.stdout);
    let record = records
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|r| r["id"] == id.as_str())
        .unwrap_or_else(|| panic!("no record of {id}: {records}"));
    assert_eq!(record["status"], "completed", "{record}");
    assert!(
        record["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("exit code: 3")),
        "{record}"
    );
}
