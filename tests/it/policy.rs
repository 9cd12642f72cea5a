//! Policies (SPEC 9.2) with the real binary: `[policy.NAME]` tables checked at load, principals
//! bound to one by `token create --policy`, `[policy.default]` for every other owner, every start
//! of an owner under its policy (or refused, never run free), `policy-check` and the host's refusal
//! to start when a policy cannot be enforced here.
//!
//! Each attack runs from inside a task of a bound principal over MCP, beside the same attack by an
//! unbound principal, which succeeds.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::fixtures::*;
use crate::http_wire::{Client, HttpHost, token_made};
use crate::mcp::{binary, started_id};

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

/// True when `answer` shows the OS denying a bounded command (never the wrapper's refusal: every
/// mechanism is enforced on the machines the suite runs on).
fn denied(answer: &str) -> bool {
    answer.contains("Permission denied") || answer.contains("Read-only file system")
}

/// A config of one policy `locked` writable beneath `work` with a 64 MiB memory limit.
fn locked_config(dir: &Path, work: &Path) -> std::path::PathBuf {
    config(
        dir,
        &format!(
            "[policy.locked]\nwrite = [{:?}]\nmemory_max = \"64M\"\n",
            work.display().to_string()
        ),
    )
}

/// A host on loopback HTTP whose config is `policy` (one `[policy.NAME]` table), with a principal
/// `bot` bound to `NAME` and an unbound `person`: the host and the two clients.
fn host_with_bound_bot(dir: &Path, policy: &str, name: &str) -> (HttpHost, Client, Client) {
    let path = config(dir, policy);
    let host = HttpHost::start_with_env(
        dir,
        "http://127.0.0.1:0",
        &["--no-watch", "--config", path.to_str().unwrap()],
        &[],
    );
    let bot = Client::new(&host, &token_made(&host.state, "bot", &["--policy", name]));
    let person = Client::new(&host, &host.token("person"));
    (host, bot, person)
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
    let path = locked_config(&dir, &work);
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
    let path = locked_config(&dir, &work);
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
    let (_host, bot, person) = host_with_bound_bot(
        &dir,
        &format!(
            "[policy.agents]\nwrite = [{:?}]\n",
            work.display().to_string()
        ),
        "agents",
    );
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
    assert!(denied(&caged_read), "{caged_read}");
    assert!(!outside.join("bot").exists(), "{caged_read}");

    let foreground = bot.call("bash", json!({"command": touch("bot-fg")}));
    assert!(denied(&foreground), "{foreground}");
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
        .env("XDG_RUNTIME_DIR", dir.path());
    let client = crate::mcp::command_client(cmd, crate::mcp::Watcher::default()).await;
    let command = format!("touch {}/local && echo wrote", outside.display());
    let answer = crate::mcp::call(&client, "bash", json!({"command": command})).await;
    assert!(denied(&answer), "{answer}");
    assert!(!outside.join("local").exists(), "{answer}");
    let _ = client.cancel().await;
}

/// The attacks of a stolen token on the host itself (issue 43, 2): a bound principal's task cannot
/// read the state directory (the task database, the token store, other owners' kept output), nor
/// signal the host or its keeper, nor reach a loopback listener under `network = "none"`; an unbound
/// principal beside it does each of these, and the host serves on.
#[test]
fn a_bound_principals_task_cannot_read_the_state_signal_the_host_or_keeper_or_reach_the_network() {
    let dir = scratch("policy-host-attacks");
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let (host, bot, person) = host_with_bound_bot(
        &dir,
        &format!(
            "[policy.agents]\nwrite = [{:?}]\nnetwork = \"none\"\n",
            work.display().to_string()
        ),
        "agents",
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let host_pid = host.child.id();
    let keeper = crate::handover::keeper_of(host_pid).expect("the host's keeper");
    let attack = format!(
        "ls {state} >/dev/null && echo listed; cat {state}/*.db > /dev/null && echo read-db; \
         kill -0 {host_pid} && echo signalled-host; kill -0 {keeper} && echo signalled-keeper; \
         (exec 3<>/dev/tcp/127.0.0.1/{port}) && echo connected; echo done",
        state = host.state.display(),
    );
    let free = person.call("bash", json!({"command": attack}));
    for done in [
        "listed",
        "read-db",
        "signalled-host",
        "signalled-keeper",
        "connected",
    ] {
        assert!(free.contains(done), "unbounded, {done} works: {free}");
    }
    let caged = bot.call("bash", json!({"command": attack}));
    assert!(caged.contains("done"), "{caged}");
    for done in ["read-db", "signalled-host", "signalled-keeper", "connected"] {
        assert!(!caged.contains(done), "bounded, {done} failed: {caged}");
    }
    assert!(
        caged.contains("Operation not permitted") && caged.contains("Permission denied"),
        "the OS's errors: {caged}"
    );
    assert!(crate::mcp::alive(host_pid as i32) && crate::mcp::alive(keeper));
    assert!(
        person
            .call("bash", json!({"command": "echo still"}))
            .contains("still")
    );
}

/// A bound principal's task over its memory is ended, and the model reads why (SPEC 9.2): the task
/// settles `killed` with `memory limit 256 MiB`; the same allocation by an unbound principal ends
/// by itself. (On cgroup v1 the OOM killer ends the process that outgrew the limit, here the last of
/// the pipeline, whose status is the task's.)
#[test]
fn a_bound_principals_task_over_its_memory_is_killed_and_its_status_names_the_limit() {
    let dir = scratch("policy-memory");
    let (_host, bot, person) =
        host_with_bound_bot(&dir, "[policy.small]\nmemory_max = \"256M\"\n", "small");
    let hog = json!({"command": "echo allocating; head -c 1G /dev/zero | tail > /dev/null",
                     "run_in_background": true});
    let read = |client: &Client, task: &str| {
        let mut text = String::new();
        eventually(Duration::from_secs(60), || {
            text = client.call("task_output", json!({"task_id": task, "wait": true}));
            text.contains("[status: ") && !text.contains("[status: running")
        });
        text
    };
    let free = started_id(&person.answer("bash", hog.clone()));
    let free = read(&person, &free);
    assert!(free.contains("exit code: 0"), "{free}");
    let caged = started_id(&bot.answer("bash", hog));
    let caged = read(&bot, &caged);
    assert!(caged.contains("memory limit 256 MiB"), "{caged}");
    assert!(caged.contains("killed"), "{caged}");
}

/// Found by an attacker: with the host's state directory below a write root (`write = ["/home/me"]`
/// and the default `~/.local/state/taskhost`), a bound task renamed a directory above it, read and
/// rewrote the task database (its own policy binding among it) and other principals' output, and
/// was unbound after the next upgrade. A hidden path deeper than directly in a write root refuses
/// the policy, for `serve` and `policy-check` alike.
#[test]
fn a_hidden_path_below_a_write_root_refuses_the_policy() {
    let dir = scratch("policy-hidden-below");
    let home = dir.join("home");
    let deep = home.join("sub").join("deep");
    std::fs::create_dir_all(&deep).unwrap();
    let path = config(
        &dir,
        &format!(
            "[policy.agents]\nwrite = [{:?}]\nhide = [{:?}]\n",
            home.display().to_string(),
            deep.display().to_string()
        ),
    );
    let (code, out, err) = run(&["policy-check", "--config", path.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("lies below the write root"), "{out}{err}");

    let state = home.join(".local").join("state").join("taskhost");
    std::fs::create_dir_all(state.parent().unwrap()).unwrap();
    let path = config(
        &dir,
        &format!(
            "[policy.agents]\nwrite = [{:?}]\n",
            home.display().to_string()
        ),
    );
    let (code, _, err) = run(
        &[
            "serve",
            "--state",
            state.to_str().unwrap(),
            "--config",
            path.to_str().unwrap(),
        ],
        &[("XDG_RUNTIME_DIR", dir.to_str().unwrap())],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("lies below the write root"), "{err}");
}

/// A write root with a `.git` inside another write root: every start would be refused (a task
/// could move the inner root aside, `bounds_git`), so the config is refused when it is read, for
/// `policy-check` and `serve` alike; with `git_writable = true` it stands.
#[test]
fn a_repository_root_inside_another_write_root_refuses_the_policy() {
    let dir = scratch("policy-git-below");
    let outer = dir.join("work");
    let repo = outer.join("repo");
    std::fs::create_dir_all(repo.join(".git")).unwrap();
    let roots = format!(
        "write = [{:?}, {:?}]\n",
        outer.display().to_string(),
        repo.display().to_string()
    );
    let path = config(&dir, &format!("[policy.agents]\n{roots}"));
    let (code, out, err) = run(&["policy-check", "--config", path.to_str().unwrap()], &[]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("lies below the write root"), "{out}{err}");
    assert!(err.contains("git_writable"), "{out}{err}");
    let path = config(
        &dir,
        &format!("[policy.agents]\n{roots}git_writable = true\n"),
    );
    let (code, out, err) = run(&["policy-check", "--config", path.to_str().unwrap()], &[]);
    assert_eq!(code, Some(0), "{out}{err}");
}

/// A subagent's agent is a process of its owner like any other (issue 43, 5): under
/// `[policy.default]` with `network = "none"` the scripted agent runs bounded (no new privileges,
/// the seccomp filter, no capability) and still answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagents_agent_runs_under_its_owners_policy_and_still_answers() {
    let dir = scratch("policy-subagent");
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let status = out.join("status");
    let config = format!(
        "[policy.default]\nwrite = [{:?}]\nnetwork = \"none\"\n\n[[plugin]]\npath = {:?}\n[[plugin]]\npath = {:?}\n[plugin.config]\ncommand = [\"sh\", \"-c\", \"grep -E 'NoNewPrivs|Seccomp:|CapEff' /proc/self/status > {}; exec {}\"]\n",
        out.display().to_string(),
        crate::fixtures::built("taskhost_plugin_tasks"),
        crate::fixtures::built("taskhost_plugin_subagent"),
        status.display(),
        crate::fixtures::artifacts()
            .join("taskhost-test-agent")
            .display()
    );
    let file = dir.join("config.toml");
    std::fs::write(&file, config).unwrap();
    let mut cmd = tokio::process::Command::new(binary());
    cmd.args(["serve", "--no-watch", "--config"])
        .arg(&file)
        .env("XDG_RUNTIME_DIR", dir.path());
    let client = crate::mcp::command_client(cmd, crate::mcp::Watcher::default()).await;
    let answer = crate::mcp::call(
        &client,
        "subagent",
        json!({"description": "bounded", "prompt": "echo: done"}),
    )
    .await;
    let _ = client.cancel().await;
    assert!(answer.contains("done"), "{answer}");
    let seen = std::fs::read_to_string(&status).expect("the agent wrote its status");
    assert!(seen.contains("NoNewPrivs:\t1"), "{seen}");
    assert!(seen.contains("Seccomp:\t2"), "{seen}");
    assert!(seen.contains("CapEff:\t0000000000000000"), "{seen}");
}

/// A plugin directory inside a write root: a bounded task puts a library there and the host,
/// watching the directory, loads it, so the task's code runs in the host past every bound (watched
/// happening before: the probe plugin's tools appeared). A policy whose write roots hold the host's
/// code (its binary, the bounds wrapper, a plugin or a plugin directory) is refused; were the host
/// to start, the library must not be loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_directory_inside_a_write_root_refuses_the_policy() {
    let dir = scratch("policy-code-below");
    let work = dir.join("work");
    let plugins = work.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let cfg = config(
        &dir,
        &format!(
            "[policy.default]\nwrite = [{:?}]\n",
            work.display().to_string()
        ),
    );
    let built = |name: &str| binary().with_file_name(format!("lib{name}.so"));
    let bash = built("taskhost_plugin_bash");
    let tasks = built("taskhost_plugin_tasks");
    let socket = dir.join("taskhost.sock");
    let child = crate::mcp::SocketHost::command_after(
        &dir,
        &socket,
        "umask 077",
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--plugin",
            bash.to_str().unwrap(),
            "--plugin",
            tasks.to_str().unwrap(),
            "--plugin-dir",
            plugins.to_str().unwrap(),
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Killed when dropped, should an assertion below fail.
    let mut host = crate::mcp::SocketHost {
        child,
        socket: socket.clone(),
    };
    let child = &mut host.child;
    let up = taskhost_tests::eventually(Duration::from_secs(20), || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
            || matches!(child.try_wait(), Ok(Some(_)))
    });
    assert!(up, "the host neither listened nor ended");
    if let Ok(Some(status)) = child.try_wait() {
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(2), "{err}");
        assert!(err.contains("the host's code"), "{err}");
        return;
    }
    let watcher = crate::mcp::Watcher::default();
    let client = crate::mcp::socket_client(&socket, watcher.clone()).await;
    let probe = built("taskhost_test_probe");
    let id = crate::mcp::start(
        &client,
        &format!(
            "cp {} {}/planted.so && echo planted",
            probe.display(),
            plugins.display()
        ),
    )
    .await;
    let out = crate::mcp::read_waiting(&client, &id, 20_000).await;
    // A library loaded changes the tool list: waited for (the host announces it), then looked at.
    taskhost_tests::eventually(Duration::from_secs(5), || {
        watcher
            .list_changed
            .load(std::sync::atomic::Ordering::SeqCst)
            > 0
    });
    let tools = client.peer().list_all_tools().await.expect("tools");
    let loaded = tools.iter().any(|t| t.name.starts_with("probe_"));
    drop(client);
    crate::mcp::stop_host(child);
    assert!(
        !loaded,
        "the task's library was loaded into the host: {out}"
    );
}

/// Found by an attacker helper once the test above passed: the host's code reached other ways from
/// a write root, each accepted by `policy-check` before (and served): the config itself in a write
/// root (a task rewrote it, dropping the policy, for the next upgrade), a plugin named through a
/// symbolic link that lies in a write root (the task pointed it at its own library, reloaded at
/// once), and a write root that is a library in the plugin directory. Each refuses the policy.
#[test]
fn the_config_a_link_to_a_plugin_or_a_root_in_the_plugin_directory_refuses_the_policy() {
    let dir = scratch("policy-code-ways");
    let work = dir.join("work");
    let outside = dir.join("outside");
    let plugins = dir.join("plugins");
    for d in [&work, &outside, &plugins] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(outside.join("p.so"), "").unwrap();
    std::os::unix::fs::symlink(outside.join("p.so"), work.join("link.so")).unwrap();
    std::fs::write(plugins.join("evil.so"), "").unwrap();
    let root = |p: &Path| format!("[policy.agents]\nwrite = [{:?}]\n", p.display().to_string());
    let cases = [
        (work.join("config.toml"), root(&work)),
        (
            dir.join("link.toml"),
            format!(
                "{}[[plugin]]\npath = {:?}\n",
                root(&work),
                work.join("link.so")
            ),
        ),
        (
            dir.join("dir.toml"),
            format!(
                "[host]\nplugin_dir = {:?}\n{}",
                plugins.display().to_string(),
                root(&plugins.join("evil.so"))
            ),
        ),
    ];
    for (path, text) in cases {
        std::fs::write(&path, &text).unwrap();
        let (code, out, err) = run(&["policy-check", "--config", path.to_str().unwrap()], &[]);
        assert_eq!(code, Some(2), "{text}\n{out}{err}");
        assert!(err.contains("the host's code"), "{text}\n{err}");
    }
}
