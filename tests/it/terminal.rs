//! The terminal client with the real binary: `run` starts a task of the person's that the next
//! command finds (`follow` prints its whole output and its status line, through a restart of the
//! host too; `kill` stops it), on the default socket `$XDG_RUNTIME_DIR/taskhost.sock`; a command
//! with no runtime directory refuses naming the variable; `--version` names the commit and the
//! plugin ABI; the start line, as JSON, names where the host listens.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use serde_json::Value;

use crate::fixtures::*;
use crate::mcp::{SocketHost, binary};

/// A client command of the person's, in `dir` as its runtime directory (the default socket's).
fn taskhost(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(binary());
    cmd.args(args)
        .env("XDG_RUNTIME_DIR", dir)
        .env_remove("TASKHOST_CONNECT")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null());
    cmd
}

/// Runs a client command to its end (within a minute).
fn finished(dir: &Path, args: &[&str]) -> Output {
    output_within(&mut taskhost(dir, args), Duration::from_secs(60))
}

/// `taskhost run -- LINE`'s task id (its last line), once it succeeded.
fn run(dir: &Path, line: &str) -> String {
    let out = finished(dir, &["run", "--", line]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().last().expect("an id").to_owned()
}

/// A host on the default socket of `dir` (`serve --listen unix:`), with a state directory that a
/// successor takes over within 20 s.
fn default_socket_host(dir: &Path) -> SocketHost {
    let config = crate::handover::grace_config(dir, 20_000);
    let state = dir.join("state").display().to_string();
    let child = Command::new(binary())
        .args([
            "serve",
            "--listen",
            "unix:",
            "--no-watch",
            "--state",
            &state,
        ])
        .args(["--config", &config])
        .env("XDG_RUNTIME_DIR", dir)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn taskhost");
    let socket = dir.join("taskhost.sock");
    let host = SocketHost { child, socket };
    assert!(
        eventually(Duration::from_secs(20), || {
            std::os::unix::net::UnixStream::connect(&host.socket).is_ok()
        }),
        "the host never listened on the default socket"
    );
    host
}

/// SIGKILLs `host` and starts its successor on the same socket and state.
fn restart(dir: &Path, mut host: SocketHost) -> SocketHost {
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    default_socket_host(dir)
}

/// A command that prints `one`, waits for the file `go`, then prints `two`.
fn waiting_for(go: &Path) -> String {
    format!(
        "echo one; while [ ! -e {} ]; do sleep 0.05; done; echo two",
        go.display()
    )
}

const COMPLETED: &str = "[status: completed, exit code: 0]";

#[test]
fn run_then_follow_in_another_command_prints_the_whole_output_and_the_status_line() {
    let dir = scratch("terminal-follow");
    let _host = default_socket_host(&dir);
    let id = run(&dir, "echo one; echo two");
    let out = finished(&dir, &["follow", &id]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("one\ntwo\n{COMPLETED}\n")
    );
    assert!(out.status.success());
}

#[test]
fn a_task_run_before_a_host_restart_is_followed_after_it() {
    let dir = scratch("terminal-restart-between");
    let host = default_socket_host(&dir);
    let go = dir.join("go");
    let id = run(&dir, &waiting_for(&go));
    let _host = restart(&dir, host);
    std::fs::write(&go, "").unwrap();
    let out = finished(&dir, &["follow", &id]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("one\ntwo\n{COMPLETED}\n"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn follow_goes_on_through_a_host_restart() {
    let dir = scratch("terminal-restart-during");
    let host = default_socket_host(&dir);
    let go = dir.join("go");
    let id = run(&dir, &waiting_for(&go));
    let mut follow = taskhost(&dir, &["follow", &id])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn follow");
    let (lines, seen) = std::sync::mpsc::channel();
    let stdout = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    assert_eq!(seen.recv_timeout(Duration::from_secs(30)).unwrap(), "one");
    let _host = restart(&dir, host);
    std::fs::write(&go, "").unwrap();
    let rest: Vec<String> = (0..2)
        .map(|_| seen.recv_timeout(Duration::from_secs(60)).unwrap())
        .collect();
    assert_eq!(rest, ["two", COMPLETED]);
    assert!(
        eventually(Duration::from_secs(10), || {
            matches!(follow.try_wait(), Ok(Some(status)) if status.success())
        }),
        "follow ended with success"
    );
}

#[test]
fn kill_stops_a_task_and_follow_ends_with_its_status() {
    let dir = scratch("terminal-kill");
    let _host = default_socket_host(&dir);
    let id = run(&dir, "sleep 1000");
    let killed = finished(&dir, &["kill", &id]);
    assert!(killed.status.success());
    assert_eq!(
        String::from_utf8_lossy(&killed.stdout),
        format!("requested cancellation of task {id}\n")
    );
    let out = finished(&dir, &["follow", &id]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("[status: killed"), "{stdout}");
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn a_background_call_starts_a_task_the_next_command_follows() {
    let dir = scratch("terminal-call");
    let _host = default_socket_host(&dir);
    let arguments = r#"{"command": "echo from call", "run_in_background": true}"#;
    let called = finished(&dir, &["call", "bash", arguments]);
    assert!(called.status.success());
    // The first task of a fresh state directory.
    let out = finished(&dir, &["follow", "bash-1"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("from call\n{COMPLETED}\n")
    );
}

#[test]
fn without_a_runtime_directory_the_default_socket_is_refused_naming_the_variable() {
    let dir = scratch("terminal-no-runtime-dir");
    for args in [
        &["follow", "bash-1"][..],
        &["plugins"],
        &["serve", "--no-watch", "--no-state", "--listen", "unix:"],
        &[
            "serve",
            "--no-watch",
            "--no-state",
            "--listen",
            "unix:/taskhost.sock",
        ],
    ] {
        let out = output_within(
            taskhost(&dir, args).env_remove("XDG_RUNTIME_DIR"),
            Duration::from_secs(30),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("XDG_RUNTIME_DIR"), "{args:?}: {stderr}");
    }
    assert!(!Path::new("/taskhost.sock").exists());
}

#[test]
fn version_names_the_commit_and_the_plugin_abi() {
    let dir = scratch("terminal-version");
    for flag in ["--version", "-V"] {
        let out = finished(&dir, &[flag]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success());
        assert!(
            stdout.starts_with(&format!("taskhost {} (commit ", env!("CARGO_PKG_VERSION"))),
            "{stdout}"
        );
        assert!(
            stdout
                .trim_end()
                .ends_with(&format!(", plugin ABI {})", taskhost_abi::ABI_VERSION)),
            "{stdout}"
        );
    }
}

/// Proves: with `--log-format json` every line on stderr is a JSON object, and the start line
/// names each place the host listens; rmcp's INFO lines are left out by default.
#[test]
fn json_logs_parse_and_the_start_line_names_where_the_host_listens() {
    let dir = scratch("terminal-json-logs");
    let mut host = Command::new(binary())
        .args(["serve", "--listen", "unix:", "--no-watch", "--no-state"])
        .args(["--log-format", "json"])
        .env("XDG_RUNTIME_DIR", dir.path())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn taskhost");
    let stderr = BufReader::new(host.stderr.take().unwrap());
    let (lines, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            let _ = lines.send(line);
        }
    });
    let socket = format!("unix:{}", dir.join("taskhost.sock").display());
    let start = loop {
        let line = seen
            .recv_timeout(Duration::from_secs(30))
            .expect("a log line");
        let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        if event["fields"]["message"] == "serving" {
            break event;
        }
    };
    assert!(
        start["fields"]["listening"]
            .as_str()
            .is_some_and(|l| l.contains(&socket)),
        "{start}"
    );
    let called = finished(&dir, &["call", "task_list"]);
    assert!(called.status.success());
    crate::mcp::stop_host(&mut host);
    for line in seen.try_iter() {
        let event: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(
            !(event["level"] == "INFO"
                && event["target"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("rmcp"))),
            "{line}"
        );
    }
}

#[test]
fn run_and_follow_reach_an_http_host_as_the_tokens_principal() {
    let dir = scratch("terminal-http");
    let host = crate::http_wire::HttpHost::start(&dir, &[]);
    let token = host.token("laptop");
    let address = format!("http://{}", host.authority());
    let over_http = |args: &[&str]| {
        let mut cmd = taskhost(&dir, args);
        cmd.env("TASKHOST_CONNECT", &address)
            .env("TASKHOST_TOKEN", &token);
        output_within(&mut cmd, Duration::from_secs(60))
    };
    let started = over_http(&["run", "--", "echo over http"]);
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );
    let id = String::from_utf8_lossy(&started.stdout).trim().to_owned();
    let out = over_http(&["follow", &id]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("over http\n{COMPLETED}\n")
    );
    let refused = output_within(
        taskhost(&dir, &["plugins", "--connect", &address]).env_remove("TASKHOST_TOKEN"),
        Duration::from_secs(30),
    );
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("TASKHOST_TOKEN"));
}

/// A reader that went away (`taskhost follow ID | head -1`): `follow` of a task that prints on
/// and on ends at once, quietly and with success, as `policy-check` does, where `println!` panicked.
#[test]
fn a_command_whose_reader_went_away_ends_quietly() {
    let dir = scratch("terminal-closed-reader");
    let _host = default_socket_host(&dir);
    let id = run(&dir, "while :; do echo line; sleep 0.05; done");
    for args in [vec!["follow", id.as_str()], vec!["policy-check"]] {
        let (reader, writer) = nix::unistd::pipe().unwrap();
        drop(reader);
        let mut child = taskhost(&dir, &args)
            .stdout(Stdio::from(writer))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let ended = eventually(Duration::from_secs(60), || {
            child.try_wait().is_ok_and(|s| s.is_some())
        });
        if !ended {
            let _ = child.kill();
        }
        let out = child.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(ended, "{args:?} went on writing to no reader: {err}");
        assert!(out.status.success(), "{args:?}: {:?} {err}", out.status);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    let _ = finished(&dir, &["kill", &id]);
}
