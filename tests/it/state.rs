//! The durable state (`serve --state DIR`) with the real binary: records outlive a SIGKILLed host,
//! a task that was running is `lost` with its output readable, ids never repeat, `taskhost tasks`
//! reads it all with no host running, and a database that is not ours or not one is refused.

use std::path::Path;

use serde_json::Value;

use crate::fixtures::*;
use crate::mcp::{self, SocketHost, Watcher, binary, read_waiting};

/// `taskhost tasks --state DIR ARGS...`: its exit code and output.
fn tasks(state: &Path, args: &[&str]) -> (i32, String, String) {
    tasks_in(state, args, None)
}

/// `taskhost tasks --state DIR ARGS...` run in `cwd` (else here): its exit code and output.
pub(crate) fn tasks_in(state: &Path, args: &[&str], cwd: Option<&Path>) -> (i32, String, String) {
    let mut command = std::process::Command::new(binary());
    command.arg("tasks").arg("--state").arg(state).args(args);
    if let Some(cwd) = cwd {
        command.current_dir(cwd);
    }
    let out = output_within(&mut command, std::time::Duration::from_secs(30));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The records `taskhost tasks --json --all` prints, by id.
pub(crate) fn records(state: &Path) -> std::collections::HashMap<String, Value> {
    let (code, out, err) = tasks(state, &["--json", "--all"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON record"))
        .map(|r| (r["id"].as_str().unwrap_or_default().to_owned(), r))
        .collect()
}

/// Proves the restart scenario: a finished task and a running one, the host SIGKILLed; with no host
/// running `taskhost tasks` shows the finished one `completed` with its exit and the running one
/// `lost`, and prints the output each kept up to its last line; the next host's first task gets a
/// new id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_hosts_tasks_are_kept_the_running_one_lost_and_ids_never_repeat() {
    let dir = scratch("state-restart");
    let state = dir.join("state");
    // No handover: the running task is lost with its host.
    let mut host = crate::handover::grace_host(&dir, 0);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let finished = mcp::start(&client, "echo one; echo two; exit 4").await;
    assert!(
        read_waiting(&client, &finished, 20_000)
            .await
            .ends_with("[status: completed, exit code: 4]")
    );
    let running = mcp::start(&client, "echo first line; echo $$; exec sleep 1000").await;
    mcp::printed_pids(&client, &running, 1).await;
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    drop(client);

    let found = records(&state);
    assert_eq!(found[&finished]["status"], "completed");
    assert_eq!(found[&finished]["detail"], "exit code: 4");
    assert_eq!(found[&running]["status"], "lost");
    assert!(
        found[&running]["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("host stopped"),
        "{}",
        found[&running]
    );
    let (code, out, _) = tasks(&state, &["--output", &finished]);
    assert_eq!((code, out.as_str()), (0, "one\ntwo\n\n"));
    let (code, out, _) = tasks(&state, &["--output", &running]);
    assert_eq!(code, 0);
    assert!(out.starts_with("first line\n"), "{out}");

    let mut next = crate::handover::grace_host(&dir, 0);
    let client = mcp::socket_client(&next.socket, Watcher::default()).await;
    let new = mcp::start(&client, "true").await;
    assert!(new != finished && new != running, "{new} was issued before");
    assert_eq!(new, "bash-3");
    read_waiting(&client, &new, 20_000).await;
    drop(client);
    next.stop();
    let table = tasks(&state, &[]).1;
    for id in [&finished, &running, &new] {
        assert!(table.contains(id.as_str()), "{table}");
    }
}

/// Proves: a database that is not one, one of another user's, or one written by a newer schema is
/// refused by `serve` and by `tasks` with exit 2 naming the file, and is left as it was.
#[test]
fn a_corrupt_foreign_or_newer_database_is_refused_and_left_as_it_was() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("state-refused");
    let state = dir.join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    let db = state.join("tasks.db");
    let check = |why: &str| {
        let before = std::fs::read(&db).unwrap();
        let (code, _, err) = tasks(&state, &[]);
        assert_eq!(code, 2, "{why}: {err}");
        assert!(err.contains(&db.display().to_string()), "{why}: {err}");
        let serve = output_within(
            std::process::Command::new(binary())
                .args(["serve", "--no-watch", "--state"])
                .arg(&state)
                .env("XDG_RUNTIME_DIR", &*dir)
                .stdin(std::process::Stdio::null()),
            std::time::Duration::from_secs(30),
        );
        assert_eq!(serve.status.code(), Some(2), "{why}");
        assert!(String::from_utf8_lossy(&serve.stderr).contains(&db.display().to_string()));
        assert!(
            std::fs::read(&db).unwrap() == before,
            "{why}: the file changed"
        );
        err
    };
    std::fs::write(
        &db,
        b"this is not a database, just bytes that look like nothing",
    )
    .unwrap();
    check("not a database");

    std::fs::remove_file(&db).unwrap();
    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let err = check("a newer schema");
    assert!(err.contains("schema version is 99"), "{err}");

    let conn = rusqlite::Connection::open(&db).unwrap();
    conn.pragma_update(None, "user_version", 0).unwrap();
    drop(conn);
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    std::os::unix::fs::chown(&db, Some(nobody.uid.as_raw()), None).unwrap();
    let err = check("another user's");
    assert!(err.contains("owned by uid"), "{err}");
}

/// Proves: with `[state] keep_days = 0` a host that starts expires (right after it serves) the
/// settled tasks' output of the hosts before it: the files are gone, the record stays (its id is not
/// given again) and reading its output says it expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_output_is_removed_and_reading_it_says_so() {
    let dir = scratch("state-retention");
    let state = dir.join("state");
    let state_arg = state.to_str().unwrap();
    let mut host = SocketHost::start(&dir, &["--no-watch", "--state", state_arg]);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let done = mcp::start(&client, "echo kept for now").await;
    read_waiting(&client, &done, 20_000).await;
    drop(client);
    host.stop();
    let file = records(&state)[&done]["stdout_path"]
        .as_str()
        .map(|name| state.join("output").join(name))
        .expect("an output file");
    assert!(file.exists());

    let config = dir.join("keep-nothing.toml");
    std::fs::write(&config, "[state]\nkeep_days = 0\n").unwrap();
    let config_arg = config.to_str().unwrap();
    let mut next = SocketHost::start(
        &dir,
        &["--no-watch", "--state", state_arg, "--config", config_arg],
    );
    assert!(
        eventually(std::time::Duration::from_secs(20), || !file.exists()),
        "the expired output file is still there"
    );
    next.stop();
    assert!(records(&state)[&done]["expired_at_ms"].is_u64());
    let (code, _, err) = tasks(&state, &["--output", &done]);
    assert_eq!(code, 2);
    assert!(err.contains(&format!("task {done} expired on")), "{err}");
}

/// Proves: a host SIGKILLed after a start was recorded but before its process was spawned (its
/// keeper stopped, so the spawn waits) leaves a record that says so: `lost`, "the host stopped
/// while the task was starting; it may not have run".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_killed_between_a_starts_record_and_its_spawn_leaves_a_record_saying_so() {
    let dir = scratch("state-starting");
    let state = dir.join("state");
    let mut host = SocketHost::start(&dir, &["--no-watch", "--state", state.to_str().unwrap()]);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let warm = mcp::start(&client, "true").await;
    read_waiting(&client, &warm, 20_000).await;
    let keeper = crate::keeper::keeper_of(host.child.id() as i32);
    let stop = |signal| {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(keeper), signal)
            .expect("signal the keeper")
    };
    stop(nix::sys::signal::Signal::SIGSTOP);
    let pending = tokio::spawn(async move {
        let _ = mcp::call(
            &client,
            "bash",
            serde_json::json!({"command": "echo never", "run_in_background": true}),
        )
        .await;
    });
    let mut starting = None;
    assert!(
        eventually(std::time::Duration::from_secs(8), || {
            starting = records(&state)
                .into_iter()
                .find(|(_, r)| r["status"] == "starting")
                .map(|(id, _)| id);
            starting.is_some()
        }),
        "the start was recorded before its spawn"
    );
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    stop(nix::sys::signal::Signal::SIGKILL);
    pending.abort();
    let id = starting.unwrap_or_default();
    let record = &records(&state)[&id];
    assert_eq!(record["status"], "lost", "{record}");
    assert_eq!(
        record["detail"], "the host stopped while the task was starting; it may not have run",
        "{record}"
    );
}

/// `taskhost token ARGS... --state DIR`: its exit code and output.
fn token(state: &Path, args: &[&str]) -> (i32, String, String) {
    let out = output_within(
        std::process::Command::new(binary())
            .arg("token")
            .args(args)
            .arg("--state")
            .arg(state),
        std::time::Duration::from_secs(30),
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Proves: `taskhost token create NAME` prints a new token as its last line, once; the state keeps
/// no trace of its text (only a hash); `list` names principals without tokens; a live name is not
/// made twice (exit 2); `revoke` ends it, and a second revoke is refused (exit 2).
#[test]
fn a_token_is_shown_once_kept_as_a_hash_and_revoked() {
    let dir = scratch("tokens");
    let state = dir.join("state");
    let (code, out, err) = token(&state, &["create", "ci-runner"]);
    assert_eq!(code, 0, "{err}");
    let secret = out.lines().last().unwrap_or_default().to_owned();
    assert!(
        secret.starts_with("taskhost_") && secret.len() == 73,
        "{out}"
    );
    let hex = &secret["taskhost_".len()..];
    for file in std::fs::read_dir(&state).unwrap().flatten() {
        if file.path().is_file() {
            let bytes = std::fs::read(file.path()).unwrap();
            assert!(
                !bytes.windows(hex.len()).any(|w| w == hex.as_bytes()),
                "{} holds the token",
                file.path().display()
            );
        }
    }
    let (code, listed, _) = token(&state, &["list"]);
    assert_eq!(code, 0);
    assert!(
        listed.contains("ci-runner") && !listed.contains(hex),
        "{listed}"
    );
    let (code, _, err) = token(&state, &["create", "ci-runner"]);
    assert_eq!(code, 2);
    assert!(err.contains("exists"), "{err}");
    let (code, out, _) = token(&state, &["revoke", "ci-runner"]);
    assert_eq!(code, 0);
    assert!(out.contains("revoked"), "{out}");
    let (code, _, err) = token(&state, &["revoke", "ci-runner"]);
    assert_eq!(code, 2, "{err}");
    let (_, json, _) = token(&state, &["list", "--json"]);
    let record: Value = serde_json::from_str(json.trim()).expect("one JSON line");
    assert!(record["revoked_at_ms"].is_u64(), "{record}");
}
