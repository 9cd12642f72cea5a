//! Attacks on the state directory with the real binary: rows of `tasks.db` whose kept output names
//! a file outside `output/` (an absolute path, a `../` path, a symlink planted in `output/`), a row
//! of the wrong type, a state directory another user could swap, and one renamed and replaced
//! after the host opened it. Every file attacked is one the test made.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::fixtures::*;
use crate::http_wire::{Client, send, token_made};
use crate::mcp::{SocketHost, binary};
use crate::web::{start, web_host};

/// What the victim file holds; no answer may show it.
const SECRET: &str = "victim secret";

/// `taskhost tasks --state STATE ARGS...` run in `STATE/output` (so a relative path a row names is
/// read from there, as it would be by a process that happened to run there): exit code, stdout,
/// stderr.
fn tasks(state: &Path, args: &[&str]) -> (i32, String, String) {
    crate::state::tasks_in(state, args, Some(&state.join("output")))
}

/// A state directory `<dir>/state` with its database made (by `taskhost tasks`).
fn new_state(dir: &Path) -> PathBuf {
    let state = dir.join("state");
    // `taskhost tasks` makes no database: a token's creation does.
    let out = output_within(
        std::process::Command::new(binary())
            .args(["token", "create", "state-maker", "--state"])
            .arg(&state),
        Duration::from_secs(30),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    state
}

/// Writes rows into `state`'s database as `sql` says (`?1` is a host row of an ended host).
fn plant(state: &Path, rows: &[(&str, Option<&str>)], finished_ms: i64) {
    let conn = rusqlite::Connection::open(state.join("tasks.db")).unwrap();
    conn.execute(
        "INSERT OR IGNORE INTO hosts(id, pid, started_at_ms, ended_at_ms) VALUES (900, 1, 1, 2)",
        [],
    )
    .unwrap();
    for (id, stdout) in rows {
        let number: i64 = id.rsplit('-').next().unwrap().parse().unwrap();
        conn.execute(
            "INSERT INTO tasks(id, kind, number, host, owner, label, status, detail,
                               started_at_ms, finished_at_ms, stdout_path, told)
             VALUES (?1, 'bash', ?2, 900, NULL, 'planted', 'completed', 'exit code: 0',
                     ?3, ?3, ?4, 1)",
            rusqlite::params![id, number, finished_ms, stdout],
        )
        .unwrap();
    }
}

/// The attack's rows in `dir/state`: `bash-901` a good one (`good.log`), `bash-902` the victim's
/// absolute path, `bash-903` a `../` path to it, `bash-904` a symlink in `output/` to it; `bash-905`
/// a row with text where a time belongs. Returns the state and the victim.
fn attacked(dir: &Path, finished_ms: i64) -> (PathBuf, PathBuf) {
    let state = new_state(dir);
    let victim = dir.join("victim");
    std::fs::write(&victim, format!("{SECRET}\n")).unwrap();
    std::fs::write(state.join("output/good.log"), "good output\n").unwrap();
    std::os::unix::fs::symlink(&victim, state.join("output/planted.log")).unwrap();
    let absolute = victim.display().to_string();
    plant(
        &state,
        &[
            ("bash-901", Some("good.log")),
            ("bash-902", Some(&absolute)),
            ("bash-903", Some("../../victim")),
            ("bash-904", Some("planted.log")),
        ],
        finished_ms,
    );
    let conn = rusqlite::Connection::open(state.join("tasks.db")).unwrap();
    conn.execute(
        "INSERT INTO tasks(id, kind, number, host, label, status, started_at_ms)
         VALUES ('bash-905', 'bash', 905, 900, 'planted', 'completed', 'yesterday')",
        [],
    )
    .unwrap();
    (state, victim)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Proves: `taskhost tasks --output ID` prints no file outside `output/` (an absolute path, a `../`
/// path, a symlink planted in `output/`), and `--all` lists the other rows, warning of each row it
/// skips (those two paths, the row of the wrong type) by its id.
#[test]
fn taskhost_tasks_prints_no_kept_output_outside_output_and_lists_the_rest() {
    let dir = scratch("state-rows-cli");
    let (state, _victim) = attacked(&dir, now_ms());
    for id in ["bash-902", "bash-903", "bash-904"] {
        let (code, out, err) = tasks(&state, &["--output", id]);
        assert!(!out.contains(SECRET), "{id} printed the victim: {out}");
        assert_ne!(code, 0, "{id}: {out} {err}");
        assert!(err.contains(id), "{id}: {err}");
    }
    let (code, out, _) = tasks(&state, &["--output", "bash-901"]);
    assert_eq!((code, out.as_str()), (0, "good output\n\n"));
    let (code, out, err) = tasks(&state, &["--all"]);
    assert_eq!(code, 0, "{err}");
    for id in ["bash-901", "bash-904"] {
        assert!(out.contains(id), "{id} is listed: {out}");
    }
    for id in ["bash-902", "bash-903", "bash-905"] {
        assert!(!out.contains(id), "{id} is not listed: {out}");
        assert!(
            err.contains(&format!("skipping the record of task \"{id}\"")),
            "{id} is named: {err}"
        );
    }
}

/// Proves: the web view's tail route serves no file outside `output/` for such rows.
#[test]
fn the_view_serves_no_kept_output_outside_output() {
    let dir = scratch("state-rows-view");
    let (state, _victim) = attacked(&dir, now_ms());
    let bearer = format!(
        "Bearer {}",
        token_made(&state, "overseer", &["--all-owners"])
    );
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let get = |id: &str| {
        let authority = host.authority();
        let mut stream = std::net::TcpStream::connect(&authority).unwrap();
        let path = format!("/api/tasks/{id}/tail");
        send(
            &mut stream,
            &authority,
            "GET",
            &path,
            &[("Authorization", &bearer)],
            b"",
        )
    };
    for id in ["bash-902", "bash-903", "bash-904"] {
        let tail = get(id);
        assert!(
            !tail.body.contains(SECRET),
            "{id} served the victim: {tail:?}"
        );
    }
    let tail = get("bash-901");
    assert!(tail.body.contains("good output"), "{tail:?}");
}

/// Proves: the retention at a host's start removes expired output in `output/` and no file outside
/// it: the victim an absolute path, a `../` path and a planted symlink name is still there, whole.
#[test]
fn retention_at_host_start_deletes_no_file_outside_output() {
    let dir = scratch("state-rows-retention");
    let (state, victim) = attacked(&dir, 1);
    let host = SocketHost::start(&dir, &["--no-watch", "--state", state.to_str().unwrap()]);
    let expired = || {
        let conn = rusqlite::Connection::open(state.join("tasks.db")).unwrap();
        conn.query_row(
            "SELECT expired_at_ms IS NOT NULL FROM tasks WHERE id = 'bash-901'",
            [],
            |r| r.get::<_, bool>(0),
        )
        .unwrap_or(false)
    };
    assert!(
        eventually(Duration::from_secs(20), expired),
        "the retention ran"
    );
    assert_eq!(
        std::fs::read_to_string(&victim).ok().as_deref(),
        Some(format!("{SECRET}\n").as_str()),
        "the victim is intact"
    );
    assert!(
        !state.join("output/good.log").exists(),
        "expired output is removed"
    );
    drop(host);
}

/// Proves: a state directory another user could swap, on the way to it or (for the default one
/// under `$XDG_STATE_HOME`) above it, is refused at start with exit 2, naming it and why, and
/// nothing is made there.
#[test]
fn a_state_directory_another_user_could_swap_is_refused_at_start() {
    let dir = scratch("state-untrusted");
    let nobody = nix::unistd::User::from_name("nobody").unwrap().unwrap();
    let open = dir.join("open");
    std::fs::create_dir(&open).unwrap();
    set_mode(&open, 0o777);
    let theirs = dir.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    set_mode(&theirs, 0o755);
    std::os::unix::fs::chown(&theirs, Some(nobody.uid.as_raw()), None).unwrap();
    let cases: [(&str, PathBuf, Option<PathBuf>, &str); 3] = [
        (
            "in a directory all may write",
            open.join("state"),
            None,
            "is writable by group or others",
        ),
        (
            "in nobody's directory",
            theirs.join("state"),
            None,
            "is owned by another user",
        ),
        (
            "the default under nobody's XDG_STATE_HOME",
            theirs.join("xdg/taskhost"),
            Some(theirs.join("xdg")),
            "is owned by another user",
        ),
    ];
    for (why, state, xdg, reason) in cases {
        let mut serve = std::process::Command::new(binary());
        serve
            .args(["serve", "--no-watch"])
            .env("XDG_RUNTIME_DIR", &*dir)
            .stdin(std::process::Stdio::null());
        match &xdg {
            Some(home) => serve.env("XDG_STATE_HOME", home),
            None => serve.arg("--state").arg(&state),
        };
        let out = output_within(&mut serve, Duration::from_secs(30));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{why}: {err}");
        assert!(err.contains(&state.display().to_string()), "{why}: {err}");
        assert!(err.contains(reason), "{why}: {err}");
        assert!(!state.exists(), "{why}: the state directory was made");
    }
    assert!(
        !theirs.join("xdg").exists(),
        "nothing is made in nobody's directory"
    );
}

/// Proves: a state directory renamed and replaced by another with a database of its own after the
/// host started is not followed: the view lists the host's own records and none of the new
/// directory's, and serves none of its output.
#[test]
fn a_state_directory_renamed_and_replaced_after_start_is_not_followed() {
    let dir = scratch("state-swapped");
    let state = new_state(&dir);
    let token = token_made(&state, "overseer", &["--all-owners"]);
    let (host, _, _) = web_host(&dir, &["--no-watch"]);
    let mine = start(&Client::new(&host, &token), "echo mine");

    std::fs::rename(&state, dir.join("state.old")).unwrap();
    let theirs = new_state(&dir);
    std::fs::write(theirs.join("output/evil.log"), "attacker output\n").unwrap();
    let evil = theirs.join("output/evil.log").display().to_string();
    plant(
        &theirs,
        &[("bash-666", Some("evil.log")), ("bash-667", Some(&evil))],
        now_ms(),
    );

    let bearer = format!("Bearer {token}");
    let get = |path: &str| {
        let authority = host.authority();
        let mut stream = std::net::TcpStream::connect(&authority).unwrap();
        send(
            &mut stream,
            &authority,
            "GET",
            path,
            &[("Authorization", &bearer)],
            b"",
        )
    };
    let listed = get("/api/tasks");
    assert!(
        !listed.body.contains("bash-66"),
        "the other directory's rows: {}",
        listed.body
    );
    assert!(listed.body.contains(&mine), "{}", listed.body);
    for id in ["bash-666", "bash-667"] {
        let tail = get(&format!("/api/tasks/{id}/tail"));
        assert!(!tail.body.contains("attacker output"), "{tail:?}");
    }
    drop(host);
}

/// Proves: a database of the previous schema, whose kept outputs are absolute paths, keeps them
/// after an upgrade (each a name in `output/` now), and a path outside `output/` stays refused.
#[test]
fn an_upgrade_names_the_kept_outputs_stored_as_paths() {
    let dir = scratch("state-upgrade");
    let state = new_state(&dir);
    std::fs::write(state.join("output/old.log"), "kept before\n").unwrap();
    let victim = dir.join("victim");
    std::fs::write(&victim, format!("{SECRET}\n")).unwrap();
    let inside = state.join("output/old.log").display().to_string();
    let outside = victim.display().to_string();
    plant(
        &state,
        &[("bash-1", Some(&inside)), ("bash-2", Some(&outside))],
        now_ms(),
    );
    let conn = rusqlite::Connection::open(state.join("tasks.db")).unwrap();
    // Back to version 6: without the later versions' columns.
    conn.execute_batch(
        "ALTER TABLE owners DROP COLUMN policy; DROP TABLE queue;
         DROP INDEX tasks_by_owner_start; DROP INDEX tasks_by_start",
    )
    .unwrap();
    conn.pragma_update(None, "user_version", 6).unwrap();
    drop(conn);
    let (code, out, err) = tasks(&state, &["--output", "bash-1"]);
    assert_eq!((code, out.as_str()), (0, "kept before\n\n"), "{err}");
    let (_, out, _) = tasks(&state, &["--json", "--all"]);
    let record: serde_json::Value = serde_json::from_str(out.lines().next().unwrap()).unwrap();
    assert_eq!(record["stdout_path"], "old.log");
    let (_, out, err) = tasks(&state, &["--output", "bash-2"]);
    assert!(!out.contains(SECRET), "{out}");
    assert!(err.contains("bash-2"), "{err}");
}
