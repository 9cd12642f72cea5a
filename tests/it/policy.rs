//! Policies (SPEC 9.2) with the real binary: `[policy.NAME]` tables checked at load, principals
//! bound to one by `token create --policy`, `[policy.default]` for every other owner, every start
//! of an owner under its policy (or refused, never run free), `policy-check` and the host's refusal
//! to start when a policy cannot be enforced here.
//!
//! Until every mechanism is built, a bounded start is refused by the wrapper ("does not enforce it
//! yet"; the host is started with `TASKHOST_BOUNDS_UNCHECKED`): the attacks below accept that
//! refusal or the OS's, and fail only when the bounded write lands.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::fixtures::*;
use crate::http_wire::{Client, HttpHost, token_made};
use crate::mcp::{binary, started_id};

const UNCHECKED: (&str, &str) = ("TASKHOST_BOUNDS_UNCHECKED", "1");

/// Writes `text` as `<dir>/config.toml`; its path.
fn config(dir: &Path, text: &str) -> std::path::PathBuf {
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `taskhost ARGS` with `env`, to its end.
fn run(args: &[&str], env: &[(&str, &str)]) -> (Option<i32>, String, String) {
    let out = output_within(
        Command::new(binary())
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null()),
        Duration::from_secs(60),
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// True when `answer` shows a bounded command refused or denied: the wrapper's refusal naming
/// `policy`, or the OS's error.
fn bounded(answer: &str, policy: &str) -> bool {
    answer.contains(&format!("policy '{policy}'"))
        || answer.contains("Permission denied")
        || answer.contains("Read-only file system")
}

#[test]
fn a_bad_policy_key_or_value_refuses_the_config_naming_it() {
    let dir = scratch("policy-bad-config");
    let cases = [
        ("bogus = 1", "bogus"),
        ("memory_max = \"lots\"", "memory_max"),
        ("memory_max = 0", "memory_max"),
        ("network = \"some\"", "some"),
        ("cpu_max = 0", "cpu_max"),
        ("pids_max = 0", "pids_max"),
        ("write = \"/one/path\"", "write"),
        (
            "run_as = \"no-such-user-taskhost\"",
            "no-such-user-taskhost",
        ),
    ];
    for (line, named) in cases {
        let path = config(&dir, &format!("[policy.agents]\n{line}\n"));
        let path = path.to_str().unwrap();
        let (code, _, err) = run(&["policy-check", "--config", path], &[]);
        assert_eq!(code, Some(2), "{line}: {err}");
        assert!(err.contains(named), "{line}: {err}");
        let (code, _, err) = run(&["serve", "--no-state", "--config", path], &[]);
        assert_eq!(code, Some(2), "serve, {line}: {err}");
        assert!(err.contains(named), "serve, {line}: {err}");
    }
}

#[test]
fn token_create_binds_a_principal_to_a_policy_and_token_list_shows_it() {
    let dir = scratch("policy-tokens");
    let state = dir.join("state");
    let state_arg = state.to_str().unwrap();
    let path = config(&dir, "[policy.agents]\nnetwork = \"none\"\n");
    let path = path.to_str().unwrap();
    token_made(&state, "bot", &["--policy", "agents", "--config", path]);
    token_made(&state, "person", &[]);
    let (code, out, err) = run(&["token", "list", "--state", state_arg], &[]);
    assert_eq!(code, Some(0), "{err}");
    let bot = out.lines().find(|l| l.starts_with("bot ")).unwrap();
    let person = out.lines().find(|l| l.starts_with("person ")).unwrap();
    assert!(bot.contains(" agents "), "{out}");
    assert!(!person.contains("agents"), "{out}");
    let (_, json, _) = run(&["token", "list", "--json", "--state", state_arg], &[]);
    assert!(json.contains("\"policy\":\"agents\""), "{json}");
    assert!(json.contains("\"policy\":null"), "{json}");

    let (code, _, err) = run(
        &[
            "token", "create", "carol", "--policy", "ghost", "--config", path, "--state", state_arg,
        ],
        &[],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("[policy.ghost]"), "{err}");
    let (_, out, _) = run(&["token", "list", "--state", state_arg], &[]);
    assert!(!out.contains("carol"), "no principal was made: {out}");
}

#[test]
fn policy_check_says_each_part_and_exits_2_when_one_cannot_be_enforced() {
    let dir = scratch("policy-check");
    let (code, out, err) = run(&["policy-check"], &[]);
    assert_eq!(code, Some(0), "{out}{err}");
    assert!(out.contains("every task runs unbounded"), "{out}");

    let work = dir.join("work");
    let path = config(
        &dir,
        &format!(
            "[policy.locked]\nwrite = [{:?}]\nmemory_max = \"64M\"\n",
            work.display().to_string()
        ),
    );
    let (code, out, err) = run(
        &["policy-check", "--config", path.to_str().unwrap()],
        &[("TASKHOST_BOUNDS_DENY", "memory")],
    );
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(out.contains("policy locked:"), "{out}");
    let write = out
        .lines()
        .find(|l| l.trim_start().starts_with("write"))
        .unwrap();
    assert!(write.contains(&work.display().to_string()), "{out}");
    let memory = out
        .lines()
        .find(|l| l.trim_start().starts_with("memory_max"))
        .unwrap();
    assert!(memory.contains("64 MiB"), "{out}");
    assert!(
        out.contains("NOT ENFORCEABLE here: policy 'locked'"),
        "{out}"
    );
    assert!(err.contains("`serve` refuses to start"), "{err}");
}

#[test]
fn serve_refuses_to_start_when_a_policy_cannot_be_enforced() {
    let dir = scratch("policy-serve-refused");
    let work = dir.join("work");
    let path = config(
        &dir,
        &format!(
            "[policy.locked]\nwrite = [{:?}]\nmemory_max = \"64M\"\n",
            work.display().to_string()
        ),
    );
    let (code, _, err) = run(
        &["serve", "--no-state", "--config", path.to_str().unwrap()],
        &[
            ("TASKHOST_BOUNDS_DENY", "memory"),
            ("XDG_RUNTIME_DIR", dir.to_str().unwrap()),
        ],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("policy 'locked'"), "{err}");
    assert!(err.contains("the host does not start"), "{err}");
}

#[test]
fn a_bound_principals_commands_run_under_its_policy_and_an_unbound_one_beside_it_runs_free() {
    let dir = scratch("policy-http");
    let (work, outside) = (dir.join("work"), dir.join("outside"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let path = config(
        &dir,
        &format!(
            "[policy.agents]\nwrite = [{:?}]\n",
            work.display().to_string()
        ),
    );
    let host = HttpHost::start_with_env(
        &dir,
        "http://127.0.0.1:0",
        &["--no-watch", "--config", path.to_str().unwrap()],
        &[UNCHECKED],
    );
    let bot = Client::new(
        &host,
        &token_made(&host.state, "bot", &["--policy", "agents"]),
    );
    let person = Client::new(&host, &host.token("person"));
    let touch = |name: &str| format!("touch {}/{name} && echo wrote", outside.display());

    let free = started_id(&person.answer(
        "bash",
        json!({"command": touch("person"), "run_in_background": true}),
    ));
    let caged = started_id(&bot.answer(
        "bash",
        json!({"command": touch("bot"), "run_in_background": true}),
    ));
    let read = |client: &Client, task: &str| {
        let mut text = String::new();
        eventually(Duration::from_secs(30), || {
            text = client.call("task_output", json!({"task_id": task, "wait": true}));
            text.contains("exit code")
        });
        text
    };
    let free_read = read(&person, &free);
    assert!(
        free_read.contains("wrote") && free_read.contains("exit code: 0"),
        "{free_read}"
    );
    assert!(
        outside.join("person").exists(),
        "the attack works unbounded"
    );
    let caged_read = read(&bot, &caged);
    assert!(bounded(&caged_read, "agents"), "{caged_read}");
    assert!(!outside.join("bot").exists(), "{caged_read}");

    let foreground = bot.call("bash", json!({"command": touch("bot-fg")}));
    assert!(bounded(&foreground, "agents"), "{foreground}");
    assert!(!outside.join("bot-fg").exists(), "{foreground}");
}

#[test]
fn a_principal_bound_to_a_policy_the_config_lacks_has_its_calls_refused() {
    let dir = scratch("policy-missing");
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let host = HttpHost::start(&dir, &[]);
    let ghost = Client::new(
        &host,
        &token_made(&host.state, "ghost", &["--policy", "ghost"]),
    );
    let command = format!("touch {}/ghost", outside.display());
    for args in [
        json!({"command": command, "run_in_background": true}),
        json!({"command": command}),
    ] {
        let answer = ghost.modern(
            "tools/call",
            Some("bash"),
            json!({"name": "bash", "arguments": args}),
        );
        assert_eq!(answer.status, 403, "{answer:?}");
        assert!(answer.body.contains("policy 'ghost'"), "{answer:?}");
    }
    let listed = ghost.modern("tools/list", None, json!({}));
    assert_eq!(listed.status, 403, "{listed:?}");
    assert!(!outside.join("ghost").exists());
    let person = Client::new(&host, &host.token("person"));
    assert!(
        person
            .call("bash", json!({"command": "echo free"}))
            .contains("free")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_policy_bounds_a_local_stdio_session() {
    let dir = scratch("policy-default");
    let (work, outside) = (dir.join("work"), dir.join("outside"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let path = config(
        &dir,
        &format!(
            "[policy.default]\nwrite = [{:?}]\n",
            work.display().to_string()
        ),
    );
    let mut cmd = tokio::process::Command::new(binary());
    cmd.args(["serve", "--no-watch", "--config"])
        .arg(&path)
        .env(UNCHECKED.0, UNCHECKED.1)
        .env("XDG_RUNTIME_DIR", dir.path());
    let client = crate::mcp::command_client(cmd, crate::mcp::Watcher::default()).await;
    let command = format!("touch {}/local && echo wrote", outside.display());
    let answer = crate::mcp::call(&client, "bash", json!({"command": command})).await;
    assert!(bounded(&answer, "default"), "{answer}");
    assert!(!outside.join("local").exists(), "{answer}");
    let _ = client.cancel().await;
}
