//! A state directory that lost its database, or cannot be written, with the real binary: a host
//! whose `tasks.db` is removed under it notices and says so, `taskhost tasks` makes no database, a
//! directory left with a gone host's lock and no database is refused saying what to do (and starts
//! once that is done, its ids going on past the last one issued), a read-only directory is refused
//! saying read-only, and a clean stop leaves no handover socket.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::fixtures::*;
use crate::mcp::{self, SocketHost, Watcher, binary};
use crate::state::tasks_in;

/// A host with state `state` serving on `<dir>/taskhost.sock`, its log appended to `log`.
fn host_logging(dir: &Path, state: &Path, log: &Path, config: &str) -> SocketHost {
    SocketHost::start_after(
        dir,
        &dir.join("taskhost.sock"),
        &format!("umask 077; exec 2>>'{}'", log.display()),
        &[
            "--no-watch",
            "--state",
            state.to_str().unwrap(),
            "--config",
            config,
        ],
    )
}

/// `taskhost serve --state STATE` on stdio with nothing to read: its exit code and stderr.
fn serve_once(dir: &Path, state: &Path) -> (Option<i32>, String) {
    let out = output_within(
        std::process::Command::new(binary())
            .args(["serve", "--no-watch", "--state"])
            .arg(state)
            .env("XDG_RUNTIME_DIR", dir)
            .stdin(std::process::Stdio::null()),
        Duration::from_secs(30),
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Removes `tasks.db` and its `-wal` and `-shm` from `state`, as `rm tasks.db*` does.
fn remove_database(state: &Path) {
    for name in ["tasks.db", "tasks.db-wal", "tasks.db-shm"] {
        let _ = std::fs::remove_file(state.join(name));
    }
}

/// Proves: a database removed under a running host is noticed (within the 2 s idle check) and said
/// in its log; a new start is then refused saying the database was removed, while a task that was
/// running is still read to its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_removed_under_a_running_host_is_noticed_and_said() {
    let dir = scratch("state-lost-noticed");
    let (state, log, go) = (dir.join("state"), dir.join("host.log"), dir.join("go"));
    let config = crate::handover::grace_config(&dir, 0);
    let mut host = host_logging(&dir, &state, &log, &config);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let running = mcp::start(
        &client,
        &format!(
            "while [ ! -e '{}' ]; do sleep 0.05; done; echo ran-on",
            go.display()
        ),
    )
    .await;
    remove_database(&state);
    let said = eventually(Duration::from_secs(10), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("tasks.db was removed"))
    });
    assert!(
        said,
        "the log never said so: {:?}",
        std::fs::read_to_string(&log)
    );
    let refused = mcp::call(
        &client,
        "bash",
        json!({"command": "echo never", "run_in_background": true}),
    )
    .await;
    assert!(refused.contains("was removed"), "{refused}");
    std::fs::write(&go, "").unwrap();
    let end = mcp::read_waiting(&client, &running, 20_000).await;
    assert!(end.contains("ran-on"), "{end}");
    assert!(
        !state.join("tasks.db").exists(),
        "a database was made again"
    );
    drop(client);
    host.stop();
}

/// Proves: `taskhost tasks` on a state directory without a database, or on none, makes nothing:
/// no database, no `hosts/`, no `output/`, no directory.
#[test]
fn tasks_on_a_directory_without_a_database_creates_nothing() {
    let dir = scratch("state-lost-tasks");
    let state = dir.join("state");
    std::fs::create_dir(&state).unwrap();
    set_mode(&state, 0o700);
    for args in [&[][..], &["--json", "--all"][..]] {
        let (code, out, err) = tasks_in(&state, args, None);
        assert_eq!(code, 0, "{out}{err}");
        assert!(
            std::fs::read_dir(&state).unwrap().next().is_none(),
            "tasks made something in the state directory"
        );
    }
    let absent = dir.join("absent");
    let (code, out, err) = tasks_in(&absent, &[], None);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!absent.exists(), "tasks made the state directory");
}

/// Proves: a host SIGKILLed after its database was removed leaves a directory that is refused,
/// by `serve` and by `tasks`, saying what happened and which lock to remove (and nothing is made);
/// once it is removed a host starts on a new database and its ids go on past the ones issued before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_after_its_database_was_removed_is_refused_then_ids_never_repeat() {
    let dir = scratch("state-lost-killed");
    let (state, log) = (dir.join("state"), dir.join("host.log"));
    let config = crate::handover::grace_config(&dir, 0);
    let mut host = host_logging(&dir, &state, &log, &config);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let mut issued = Vec::new();
    for _ in 0..2 {
        let id = mcp::start(&client, "true").await;
        mcp::read_waiting(&client, &id, 20_000).await;
        issued.push(id);
    }
    remove_database(&state);
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    drop(client);

    for _ in 0..2 {
        let (code, err) = serve_once(&dir, &state);
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains("tasks.db is gone") && err.contains("hosts/1.lock"),
            "{err}"
        );
        let (code, _, err) = tasks_in(&state, &[], None);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains("tasks.db is gone"), "{err}");
        assert!(!state.join("tasks.db").exists(), "a database was made");
    }
    std::fs::remove_file(state.join("hosts/1.lock")).unwrap();
    let mut next = host_logging(&dir, &state, &log, &config);
    let client = mcp::socket_client(&next.socket, Watcher::default()).await;
    let new = mcp::start(&client, "true").await;
    assert!(
        !issued.contains(&new),
        "{new} was issued before: {issued:?}"
    );
    assert_eq!(new, "bash-3");
    drop(client);
    next.stop();
}

/// Proves: a state directory on a read-only mount (in a private mount namespace) is refused with a
/// message saying it is read-only.
#[test]
fn a_read_only_state_directory_is_refused_saying_read_only() {
    let dir = scratch("state-read-only");
    let state = dir.join("state");
    // A host made the database (how it ends on a stdin with nothing is not this test's).
    let (_, err) = serve_once(&dir, &state);
    assert!(state.join("tasks.db").exists(), "{err}");
    let out = output_within(
        std::process::Command::new("unshare")
            .args(["-m", "sh", "-c"])
            .arg(
                r#"mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" && exec "$1" serve --no-watch --state "$0""#,
            )
            .arg(&state)
            .arg(binary())
            .env("XDG_RUNTIME_DIR", &*dir)
            .stdin(std::process::Stdio::null()),
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("read-only"), "{err}");
}

/// Proves: a host that handed over nothing and stopped cleanly leaves no `hosts/handover-*.sock`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_leaves_no_handover_socket() {
    let dir = scratch("state-handover-socket");
    let state = dir.join("state");
    let mut host = SocketHost::start(&dir, &["--no-watch", "--state", state.to_str().unwrap()]);
    let sockets = || {
        std::fs::read_dir(state.join("hosts"))
            .map(|d| {
                d.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("handover-"))
                    .count()
            })
            .unwrap_or(0)
    };
    assert!(
        eventually(Duration::from_secs(10), || sockets() == 1),
        "the host offered no handover"
    );
    host.stop();
    assert_eq!(sockets(), 0, "the handover socket was left");
}
