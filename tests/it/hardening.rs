//! Attacks a second local user (uid `nobody`) or a planted file could make on a running host, each
//! performed for real, and the environment every child gets. The tests run as root (CI does): they
//! make files owned by `nobody` and run clients and hosts as `nobody`; as another user they are
//! skipped with a message.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::fixtures::*;
use crate::mcp::{self, SocketHost, Watcher, binary, call};

const NOBODY: u32 = 65534;

/// True (and says why) when this test cannot act as another user here.
fn skip_unless_root(test: &str) -> bool {
    if taskhost::rundir::euid() == 0 {
        return false;
    }
    eprintln!("{test}: skipped: it needs root to act as uid {NOBODY}");
    true
}

fn chown_nobody(p: &Path) {
    std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).expect("chown");
}

/// A directory owned by `nobody` with mode 0777, as an attacker would leave it.
fn attacker_dir(p: &Path) {
    std::fs::create_dir_all(p).expect("mkdir");
    set_mode(p, 0o777);
    chown_nobody(p);
}

/// Every file below `dir` (directories excluded).
fn files_below(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(files_below(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Proves: the attack that ran code as the host's user fails. An attacker pre-created the
/// directories the host used to take (`<tmp>/taskhost-<pid>/{gen,spill}`, mode 0777, owned by
/// `nobody`) for every pid the host could get; the host makes its own unpredictable 0700 directory
/// instead, and nothing it writes (generation copies, spill files) lands in the attacker's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directories_pre_created_by_another_user_are_never_used() {
    if skip_unless_root("directories_pre_created_by_another_user_are_never_used") {
        return;
    }
    let tmp = scratch("pre-created");
    set_mode(&tmp, 0o1777);
    let next_pid: u32 = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(1);
    let traps: Vec<PathBuf> = (next_pid..next_pid + 300)
        .map(|pid| tmp.join(format!("taskhost-{pid}")))
        .collect();
    for t in &traps {
        attacker_dir(t);
        attacker_dir(&t.join("gen"));
        attacker_dir(&t.join("spill"));
    }
    // An unsafe XDG_RUNTIME_DIR (another user's, open to all) is not used either.
    let xdg = tmp.join("xdg");
    attacker_dir(&xdg);
    let mut cmd = tokio::process::Command::new(binary());
    // Memory-only records: what this test attacks is where the runtime directory and its spill
    // files go.
    cmd.args(["serve", "--no-watch", "--no-state"])
        .env("XDG_RUNTIME_DIR", &xdg)
        .env("TMPDIR", tmp.path());
    let client = mcp::command_client(cmd, Watcher::default()).await;
    let id = mcp::start(&client, "head -c 200000 /dev/zero | tr '\\0' x; echo end").await;
    let read = mcp::read_waiting(&client, &id, 10_000).await;
    assert!(
        read.contains("full output: "),
        "the output spilled: {read:.300}"
    );
    let own: Vec<PathBuf> = std::fs::read_dir(tmp.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.uid() == 0 && m.is_dir()))
        .collect();
    assert_eq!(own.len(), 1, "one directory of the host's own: {own:?}");
    let meta = std::fs::symlink_metadata(&own[0]).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    assert!(!traps.contains(&own[0]));
    assert!(
        read.contains(&own[0].display().to_string()),
        "the spill file is in the host's directory: {read:.300}"
    );
    for t in &traps {
        assert!(
            files_below(t).is_empty(),
            "the host wrote into {}",
            t.display()
        );
    }
    assert!(
        files_below(&xdg).is_empty(),
        "the host used the unsafe XDG_RUNTIME_DIR"
    );
    client.cancel().await.expect("close");
    assert!(!own[0].exists(), "the host removed its directory at exit");
}

/// Proves: a generation directory that is not private (another user's, open to all, or a symlink)
/// is refused with a clear error, and nothing is written into it.
#[test]
fn a_generation_directory_others_can_write_is_refused() {
    let f = Fixture::new("foreign-gen");
    let plugin = plugin_copy("taskhost_test_probe", &f.dir, "probe_foreign_gen");
    let open = f.dir.join("open");
    std::fs::create_dir(&open).unwrap();
    set_mode(&open, 0o777);
    let link = f.dir.join("link");
    std::os::unix::fs::symlink(&open, &link).unwrap();
    for dir in [&open, &link] {
        let options = taskhost::LoadOptions::new(dir.clone());
        let host = taskhost::Taskhost::new(
            Default::default(),
            f.rt.handle().clone(),
            options,
            Default::default(),
        );
        let err = host
            .plugins()
            .load(&plugin, None, false)
            .map(|_| ())
            .expect_err("loaded into a directory others can write");
        let text = err.to_string();
        assert!(
            text.contains("open to other users") || text.contains("symbolic link"),
            "{text}"
        );
        assert!(files_below(&open).is_empty(), "{:?}", files_below(&open));
    }
}

/// Proves: a symlink planted where a generation file would go is never followed: the host takes
/// another name, the link's target is untouched, and the plugin serves from its own file.
#[test]
fn a_symlink_planted_at_a_generation_path_is_never_followed() {
    let f = Fixture::new("planted-gen");
    let gen_dir = f.dir.join("gen");
    std::fs::create_dir(&gen_dir).unwrap();
    set_mode(&gen_dir, 0o700);
    let victim = f.dir.join("victim.so");
    std::fs::write(&victim, b"not a library").unwrap();
    std::os::unix::fs::symlink(&victim, gen_dir.join("libprobe_planted.g1.so")).unwrap();
    f.load("taskhost_test_probe", "probe_planted");
    f.load("taskhost_test_surface", "surface_planted");
    f.host.sessions().open("s");
    assert_eq!(std::fs::read(&victim).unwrap(), b"not a library");
    let mapped = mapped_generations("probe_planted");
    assert_eq!(mapped.len(), 1, "{mapped:?}");
    assert!(mapped[0].contains("libprobe_planted.g1-1.so"), "{mapped:?}");
    let id = f.start_probe("s", json!({"lines": 3}));
    assert_eq!(f.drain("s", &id).0, probe_lines(3));
}

/// `taskhost call` of `bash` with `command`, run as `uid`.
fn call_as(uid: u32, socket: &Path, command: &str) -> std::process::Output {
    std::process::Command::new(binary())
        .args(["call", "--connect"])
        .arg(format!("unix:{}", socket.display()))
        .args(["bash", &json!({"command": command}).to_string()])
        .env("RUST_LOG", "warn")
        .uid(uid)
        .gid(uid)
        .output()
        .expect("run taskhost call")
}

/// Proves: under `umask 000` the socket is still created 0600.
#[test]
fn a_socket_created_under_umask_000_is_private() {
    let dir = scratch("umask");
    let socket = dir.join("taskhost.sock");
    let mut host = SocketHost::start_with(&dir, &socket, "000", &[]);
    let mode = std::fs::symlink_metadata(&socket)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {:o}", mode & 0o777);
    host.stop();
}

/// Proves: a peer of another uid is refused before any tool runs, even when the socket file was
/// opened to everyone; `--allow-uid` admits it on purpose.
#[test]
fn a_connection_from_another_user_is_refused_before_any_tool_runs() {
    if skip_unless_root("a_connection_from_another_user_is_refused_before_any_tool_runs") {
        return;
    }
    let dir = scratch("peer");
    set_mode(&dir, 0o711);
    let socket = dir.join("taskhost.sock");
    let marker = dir.join("ran");
    let command = format!("touch {}", marker.display());
    let mut host = SocketHost::start_with(&dir, &socket, "077", &[]);
    set_mode(&socket, 0o666);
    let out = call_as(NOBODY, &socket, &command);
    assert!(!out.status.success(), "nobody's call went through");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("closed the connection before its welcome"),
        "nobody reached the socket and was refused by the host, not by file permissions: {stderr}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(!marker.exists(), "nobody ran a command as the host's user");
    // The host's own user is served.
    assert!(call_as(0, &socket, "true").status.success());
    host.stop();

    let mut shared = SocketHost::start_with(&dir, &socket, "077", &["--allow-uid", "65534"]);
    set_mode(&socket, 0o666);
    let out = call_as(NOBODY, &socket, &command);
    assert!(
        out.status.success(),
        "an allowed uid is served: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(marker.exists());
    shared.stop();
}

/// Proves: `--listen` on a regular file or on a live host's socket fails with exit 2 and leaves
/// both untouched; a stale socket is replaced.
#[test]
fn listen_refuses_a_regular_file_and_a_live_socket_and_replaces_a_stale_one() {
    let dir = scratch("listen-refusals");
    let file = dir.join("notes.txt");
    std::fs::write(&file, "keep me").unwrap();
    let run = |path: &Path| {
        std::process::Command::new(binary())
            .args(["serve", "--no-watch", "--listen"])
            .arg(format!("unix:{}", path.display()))
            .env("XDG_RUNTIME_DIR", dir.path())
            .env("XDG_STATE_HOME", dir.join("state-home"))
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    };
    let out = run(&file);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not a socket"), "{stderr}");
    assert!(stderr.contains(&file.display().to_string()), "{stderr}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");

    let socket = dir.join("taskhost.sock");
    let mut first = SocketHost::start_with(&dir, &socket, "077", &[]);
    let inode = std::fs::metadata(&socket).unwrap().ino();
    let out = run(&socket);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("another taskhost serves"), "{stderr}");
    assert_eq!(std::fs::metadata(&socket).unwrap().ino(), inode);
    assert!(
        call_as(0, &socket, "true").status.success(),
        "the first host still serves"
    );

    // SIGKILL leaves a stale socket behind; the next host replaces it.
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    assert!(socket.exists());
    let mut next = SocketHost::start_with(&dir, &socket, "077", &[]);
    assert!(call_as(0, &socket, "true").status.success());
    next.stop();
}

/// Proves: a host removes its socket at exit only while it is still its own: after the path was
/// taken over by another host (the first one's file removed meanwhile), stopping the first leaves
/// the second's socket in place.
#[test]
fn stopping_one_host_never_removes_another_hosts_socket() {
    let dir = scratch("socket-owner");
    let socket = dir.join("taskhost.sock");
    let mut first = SocketHost::start_with(&dir, &socket, "077", &[]);
    std::fs::remove_file(&socket).unwrap();
    let mut second = SocketHost::start_with(&dir, &socket, "077", &[]);
    let inode = std::fs::metadata(&socket).unwrap().ino();
    first.stop();
    assert_eq!(
        std::fs::metadata(&socket).map(|m| m.ino()).ok(),
        Some(inode),
        "the second host's socket is still there"
    );
    assert!(call_as(0, &socket, "true").status.success());
    second.stop();
    assert!(!socket.exists(), "a host removes its own socket");
}

/// The variables a child of a host started with `vars` and `config` (an `[env]` table, or none)
/// sees, from `env`.
async fn child_env(dir: &Path, vars: &[(&str, &str)], config: Option<&str>) -> Vec<String> {
    let mut cmd = tokio::process::Command::new(binary());
    cmd.envs(vars.iter().copied()).args(["serve", "--no-watch"]);
    if let Some(text) = config {
        let file = dir.join("env.toml");
        std::fs::write(&file, text).unwrap();
        cmd.arg("--config").arg(&file);
    }
    let client = mcp::command_client(cmd, Watcher::default()).await;
    let out = call(&client, "bash", json!({"command": "env"})).await;
    client.cancel().await.expect("close");
    out.lines()
        .filter(|l| l.contains('='))
        .map(str::to_owned)
        .collect()
}

fn names(env: &[String]) -> Vec<&str> {
    env.iter().filter_map(|l| l.split('=').next()).collect()
}

const SECRETS: [(&str, &str); 29] = [
    ("GITHUB_PAT", "ghp_canary"),
    ("DATABASE_URL", "postgres://u:canary@h/db"),
    ("PASSWD", "canary"),
    ("DB_PASS", "canary"),
    ("CREDENTIALS_JSON", "{\"canary\": 1}"),
    ("SSH_AUTH_SOCK", "/run/canary"),
    ("MY_API_KEY", "canary"),
    ("SESSION_COOKIE", "canary"),
    ("MYSQL_PWD", "canary"),
    // Secrets whose names say nothing: found by their values.
    ("ERRORS_AT", "https://canary0123@o1.ingest.sentry.io/42"),
    (
        "NOTIFY_URL",
        "https://hooks.slack.com/services/T0/B0/canary",
    ),
    ("PG", "postgres://h/db?sslmode=require&password=canary"),
    ("BLOB", "https://acct.blob.example/c?sv=1&sig=canary"),
    ("ADO", "Server=db;User Id=sa;Password=canary;"),
    (
        "CERT",
        "-----BEGIN PRIVATE KEY-----\ncanary\n-----END PRIVATE KEY-----",
    ),
    ("BEARER", "eyJhbGciOiJIUzI1NiJ9.eyJjYW5hcnkiOjF9.canary"),
    // Providers' tokens under plain names, known by their shapes.
    ("OPENAI", "sk-proj-canary0123456789abcdefghij"),
    ("GH", "ghp_canary0123456789abcdefghijklmnopqrst"),
    ("GL", "glpat-canary0123456789abcd"),
    ("SLACKBOT", "xoxb-1234567890-canary-abcdefghij"),
    ("HF", "hf_canaryABCDEFGHIJKLMNOPQRSTUVWXYZab"),
    (
        "GCP_SA",
        "{\"type\":\"service_account\",\"private_key\":\"canary\"}",
    ),
    ("AWS_ACCESS", "AKIACANARY0123456789"),
    // And names that do.
    ("X_PW", "canary"),
    ("SENTRY_DSN", "canary"),
    ("TEAM_WEBHOOK", "canary"),
    ("SESSIONID", "canary"),
    ("JWT", "canary"),
    ("MY_JWT_FILE", "canary"),
];

/// Ordinary values that look a little like the secrets above and must still reach a child.
const ORDINARY: [(&str, &str); 6] = [
    ("HOMEPAGE", "https://example.com/"),
    ("PKG", "sk-learn"),
    (
        "ACCOUNT",
        "{\"type\":\"service_account\",\"project\":\"p\"}",
    ),
    ("SEARCH", "https://example.com/q?page=2&sort=name"),
    ("LANG", "C.UTF-8"),
    ("HARMLESS", "kept"),
];

/// Proves: every default-excluded kind of secret, by name or by the shape of its value, is absent
/// from a real child's environment, a `bash` task's and a subagent's, while `PATH`, `HOME`, the
/// working directory and ordinary URLs reach both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_policy_keeps_every_kind_of_secret_from_a_child() {
    let dir = scratch("env-default");
    set_mode(&dir, 0o755);
    let agent_env = dir.join("agent.env");
    let agent = artifacts().join("taskhost-test-agent");
    let config = format!(
        "[[plugin]]\npath = {:?}\n[[plugin]]\npath = {:?}\n[[plugin]]\npath = {:?}\n[plugin.config]\ncommand = [\"sh\", \"-c\", \"env > {}; exec {}\"]\n",
        built("taskhost_plugin_tasks"),
        built("taskhost_plugin_bash"),
        built("taskhost_plugin_subagent"),
        agent_env.display(),
        agent.display()
    );
    let mut vars = SECRETS.to_vec();
    vars.extend(ORDINARY);
    vars.push(("HOME", "/root"));
    let file = dir.join("env.toml");
    std::fs::write(&file, config).unwrap();
    let mut cmd = tokio::process::Command::new(binary());
    cmd.envs(vars.iter().copied())
        .args(["serve", "--no-watch", "--config"])
        .arg(&file);
    let client = mcp::command_client(cmd, Watcher::default()).await;
    let out = call(&client, "bash", json!({"command": "env"})).await;
    let answer = call(
        &client,
        "subagent",
        json!({"description": "env", "prompt": "echo: done"}),
    )
    .await;
    client.cancel().await.expect("close");
    assert!(answer.contains("done"), "{answer}");
    let agent_text = std::fs::read_to_string(&agent_env).expect("the agent wrote its environment");
    for (who, text) in [("bash", out.as_str()), ("subagent", agent_text.as_str())] {
        let env: Vec<String> = text
            .lines()
            .filter(|l| l.contains('='))
            .map(str::to_owned)
            .collect();
        assert!(
            !text.contains("canary"),
            "a secret reached the {who} child: {env:?}"
        );
        let names = names(&env);
        for (name, _) in SECRETS {
            assert!(
                !names.contains(&name),
                "the secret {name} reached the {who} child: {env:?}"
            );
        }
        for kept in [
            "PATH", "HOME", "LANG", "HARMLESS", "PWD", "HOMEPAGE", "SEARCH", "PKG", "ACCOUNT",
        ] {
            assert!(
                names.contains(&kept),
                "{kept} missing from the {who} child: {names:?}"
            );
        }
    }
}

/// Proves: `inherit`, `exclude`, `include_only` and `set` each change what a real child sees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_env_setting_changes_what_a_child_sees() {
    let dir = scratch("env-settings");
    let vars = [("EDITOR", "vi"), ("VISUAL", "vim"), ("LANG", "C.UTF-8")];
    let has = |env: &[String], name: &str| names(env).contains(&name);

    let core = child_env(&dir, &vars, Some("[env]\ninherit = \"core\"\n")).await;
    assert!(
        has(&core, "PATH") && has(&core, "LANG") && !has(&core, "EDITOR"),
        "{core:?}"
    );

    let none = child_env(&dir, &vars, Some("[env]\ninherit = \"none\"\n")).await;
    assert!(!has(&none, "LANG") && !has(&none, "EDITOR"), "{none:?}");

    let exclude = child_env(&dir, &vars, Some("[env]\nexclude = [\"vis*\"]\n")).await;
    assert!(
        has(&exclude, "EDITOR") && !has(&exclude, "VISUAL"),
        "{exclude:?}"
    );

    let only = child_env(
        &dir,
        &vars,
        Some("[env]\ninclude_only = [\"PATH\", \"editor\"]\n"),
    )
    .await;
    assert!(has(&only, "PATH") && has(&only, "EDITOR"), "{only:?}");
    assert!(!has(&only, "VISUAL") && !has(&only, "LANG"), "{only:?}");

    let set = child_env(
        &dir,
        &vars,
        Some("[env.set]\nCI = \"1\"\nEDITOR = \"nano\"\n"),
    )
    .await;
    assert!(set.contains(&"CI=1".to_owned()), "{set:?}");
    assert!(set.contains(&"EDITOR=nano".to_owned()), "{set:?}");
}

/// Proves: a child cannot read its host's environment through `/proc/<pid>/environ`, nor its
/// parent's, the keeper (neither is dumpable). Root reads any process's environment whatever that
/// flag says, so this host runs as `nobody`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_cannot_read_the_hosts_environment_from_proc() {
    if skip_unless_root("a_child_cannot_read_the_hosts_environment_from_proc") {
        return;
    }
    let dir = scratch("environ");
    set_mode(&dir, 0o711);
    let home = dir.join("nobody");
    std::fs::create_dir(&home).unwrap();
    chown_nobody(&home);
    let mut cmd = tokio::process::Command::new(binary());
    cmd.env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", &home)
        .env("XDG_STATE_HOME", &home)
        .env("MY_SECRET", "canary")
        .current_dir(&home)
        .uid(NOBODY)
        .gid(NOBODY);
    cmd.args(["serve", "--no-watch", "--allow-untrusted-plugins"]);
    let client = mcp::command_client(cmd, Watcher::default()).await;
    let out = call(
        &client,
        "bash",
        json!({"command": "id -u; echo ${MY_SECRET:-absent}; for p in $PPID $(cut -d' ' -f4 /proc/$PPID/stat); do tr '\\0' '\\n' < /proc/$p/environ 2>&1 | grep -c canary; done"}),
    )
    .await;
    client.cancel().await.expect("close");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        NOBODY.to_string(),
        "the host ran as nobody: {out}"
    );
    assert_eq!(lines[1], "absent", "{out}");
    assert!(
        !out.contains("canary"),
        "the child read the host's environment: {out}"
    );
    assert_eq!(out.matches("Permission denied").count(), 2, "{out}");
}

/// Runs `script` with `sh` as `nobody` until the returned guard is dropped (then it is killed).
fn as_nobody(script: &str) -> KilledOnDrop {
    KilledOnDrop(
        std::process::Command::new("sh")
            .args(["-c", script])
            .uid(NOBODY)
            .gid(NOBODY)
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("run as nobody"),
    )
}

struct KilledOnDrop(std::process::Child);

impl Drop for KilledOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Proves: the symlink race that loaded another user's library into a root host fails. The plugin
/// path runs through a directory of `nobody`'s, where a link flips between a root-owned directory
/// (the real plugin) and `nobody`'s own (another library); over 200 loads none loads anything, each
/// refused naming the directory. A link in a directory only root can write loads as before.
#[test]
fn a_symlink_flipped_by_another_user_never_loads_their_library() {
    if skip_unless_root("a_symlink_flipped_by_another_user_never_loads_their_library") {
        return;
    }
    let f = Fixture::new("symlink-flip");
    set_mode(&f.dir, 0o755);
    let good = f.dir.join("good");
    std::fs::create_dir(&good).unwrap();
    std::fs::copy(built("taskhost_test_probe"), good.join("lib.so")).unwrap();
    let theirs = f.dir.join("theirs");
    let evil = theirs.join("evil");
    std::fs::create_dir_all(&evil).unwrap();
    std::fs::copy(built("taskhost_test_surface"), evil.join("lib.so")).unwrap();
    for p in [&theirs, &evil, &evil.join("lib.so")] {
        chown_nobody(p);
    }
    set_mode(&theirs, 0o755);
    let flipper = as_nobody(&format!(
        "cd {}; while :; do ln -sfn {} link.new && mv -T link.new link; ln -sfn evil link.new && mv -T link.new link; done",
        theirs.display(),
        good.display()
    ));
    let plugin = theirs.join("link/lib.so");
    assert!(
        eventually(Duration::from_secs(10), || plugin.exists()),
        "the link is in place"
    );
    for _ in 0..200 {
        let err = f.load_error(&plugin, None);
        assert!(
            err.contains(&format!("{} is owned by another user", theirs.display())),
            "{err}"
        );
    }
    drop(flipper);
    assert!(f.host.plugins().info().is_empty(), "nothing was loaded");
    let trusted_link = f.dir.join("link");
    std::os::unix::fs::symlink(&good, &trusted_link).unwrap();
    f.host
        .plugins()
        .load(&trusted_link.join("lib.so"), None, false)
        .expect("a link only root could have made loads");
}

/// `taskhost ARGS...` run as `uid`.
fn taskhost_as(uid: u32, args: &[&str]) -> std::process::Output {
    std::process::Command::new(binary())
        .args(args)
        .env("RUST_LOG", "warn")
        .uid(uid)
        .gid(uid)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run taskhost")
}

/// Proves: root's `taskhost call`, `plugins` and `connect` refuse a socket served by another user
/// (here a host run by `nobody` in its own directory, as an attacker would serve one in `/tmp`), naming
/// both users, before anything is sent; `--allow-server-uid` opts in.
#[test]
fn clients_refuse_a_server_run_by_another_user() {
    if skip_unless_root("clients_refuse_a_server_run_by_another_user") {
        return;
    }
    let dir = scratch("server-uid");
    set_mode(&dir, 0o711);
    let home = dir.join("nobody");
    std::fs::create_dir(&home).unwrap();
    chown_nobody(&home);
    let socket = home.join("taskhost.sock");
    let mut server = std::process::Command::new(binary());
    server
        .args([
            "serve",
            "--no-watch",
            "--allow-untrusted-plugins",
            "--listen",
        ])
        .arg(format!("unix:{}", socket.display()))
        .env_remove("XDG_RUNTIME_DIR")
        .env("XDG_STATE_HOME", &home)
        .env("TMPDIR", &home)
        .env("RUST_LOG", "warn")
        .current_dir(&home)
        .uid(NOBODY)
        .gid(NOBODY)
        .stdin(std::process::Stdio::null());
    let _server = KilledOnDrop(server.spawn().expect("start nobody's host"));
    assert!(
        eventually(Duration::from_secs(20), || {
            std::os::unix::net::UnixStream::connect(&socket).is_ok()
        }),
        "nobody's host listens"
    );
    let spec = format!("unix:{}", socket.display());
    let marker = home.join("ran");
    let command = json!({"command": format!("touch {}", marker.display())}).to_string();
    for args in [
        vec!["call", "--connect", &spec, "bash", &command],
        vec!["plugins", "--connect", &spec],
        vec!["connect", &spec],
    ] {
        let out = taskhost_as(0, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "refusing {}: its server runs as nobody (uid 65534), not as you (root (uid 0)) or root; pass --allow-server-uid 65534",
                socket.display()
            )),
            "{args:?}: {stderr}"
        );
    }
    assert!(!marker.exists(), "the refused call reached the host");
    let out = taskhost_as(
        0,
        &[
            "call",
            "--connect",
            &spec,
            "--allow-server-uid",
            "65534",
            "bash",
            &command,
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(marker.exists(), "an allowed server is used");
}

/// Proves: a `TMPDIR` another user can rename entries in is not used. The attack: `TMPDIR` is a
/// directory of the host's user inside one `nobody` owns and anyone can write, so `nobody` could move
/// the host's directory aside and put an open one in its place; the host puts its directory under
/// `/tmp` instead (root's, sticky), nothing lands in the attacker's directory, and the host's
/// directory is removed at exit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tmpdir_another_user_controls_is_not_used() {
    if skip_unless_root("a_tmpdir_another_user_controls_is_not_used") {
        return;
    }
    let dir = scratch("hostile-tmpdir");
    let theirs = dir.join("theirs");
    attacker_dir(&theirs);
    let mine = theirs.join("mine");
    std::fs::create_dir(&mine).unwrap();
    set_mode(&mine, 0o700);
    // Memory-only records: what this test attacks is where the runtime directory and its spill
    // files go.
    let mut cmd = tokio::process::Command::new(binary());
    cmd.args(["serve", "--no-watch", "--no-state"])
        .env_remove("XDG_RUNTIME_DIR")
        .env("TMPDIR", &mine);
    let client = mcp::command_client(cmd, Watcher::default()).await;
    let id = mcp::start(&client, "head -c 200000 /dev/zero | tr '\\0' x; echo end").await;
    let read = mcp::read_waiting(&client, &id, 10_000).await;
    let spill = read
        .split("full output: ")
        .nth(1)
        .and_then(|rest| rest.split([',', ' ', ']']).next())
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("the output spilled: {read:.300}"));
    assert!(
        spill.to_string_lossy().starts_with("/tmp/taskhost-"),
        "{}",
        spill.display()
    );
    assert!(
        files_below(&theirs).is_empty(),
        "{:?}",
        files_below(&theirs)
    );
    client.cancel().await.expect("close");
    let host_dir = spill.parent().and_then(Path::parent).unwrap().to_owned();
    assert!(
        eventually(Duration::from_secs(10), || !host_dir.exists()),
        "the host removed {} at exit",
        host_dir.display()
    );
}

/// The spill files a read names.
fn spill_paths(read: &str) -> Vec<PathBuf> {
    read.split("full output: ")
        .skip(1)
        .flat_map(|rest| rest.split(", "))
        .filter_map(|p| p.split([' ', ']']).next())
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .collect()
}

/// Proves: the host's kept output has a budget across tasks. With `spill_budget` at 4 MiB, a task
/// that wrote 3 MiB and ended, then one that writes 20 MiB: the old file is trimmed to its head and
/// end with a line saying what went, the new one stops growing and keeps its head and latest
/// output (its read says so), and the spill files hold about the budget, not 23 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_output_stays_within_the_hosts_budget() {
    let dir = scratch("spill-budget");
    let config = dir.join("budget.toml");
    std::fs::write(&config, format!("[tasks]\nspill_budget = {}\n", 4 << 20)).unwrap();
    let mut cmd = tokio::process::Command::new(binary());
    cmd.args(["serve", "--no-watch", "--config"]).arg(&config);
    let client = mcp::command_client(cmd, Watcher::default()).await;
    let write = |mib: u32, last: &str| {
        format!(
            "head -c {} /dev/zero | tr '\\0' x; echo; echo {last}",
            mib << 20
        )
    };
    let old = mcp::start(&client, &write(3, "the old end")).await;
    let old_read = mcp::read_waiting(&client, &old, 30_000).await;
    let old_file = spill_paths(&old_read)[0].clone();
    assert!(
        old_read.contains("[status: completed, exit code: 0]"),
        "{old_read:.300}"
    );
    let new = mcp::start(&client, &write(20, "the new end")).await;
    let new_read = mcp::read_waiting(&client, &new, 30_000).await;
    assert!(
        new_read.contains("(its head and its latest output; the middle was skipped)"),
        "{new_read:.300}"
    );
    let old_text = std::fs::read_to_string(&old_file).unwrap();
    assert!(
        old_text.contains(
            "bytes removed here to keep the host's kept output within its budget of 4194304 bytes"
        ),
        "{:.200}",
        &old_text[old_text.len().saturating_sub(200)..]
    );
    assert!(old_text.trim_end().ends_with("the old end"));
    let new_file = spill_paths(&new_read)[0].clone();
    let new_text = std::fs::read_to_string(&new_file).unwrap();
    assert!(new_text.trim_end().ends_with("the new end"));
    let spill_dir = new_file.parent().unwrap();
    let total: u64 = files_below(spill_dir)
        .iter()
        .map(|p| std::fs::metadata(p).map_or(0, |m| m.len()))
        .sum();
    assert!(
        total <= (4 << 20) + (1 << 20),
        "spill files hold {total} bytes"
    );
    client.cancel().await.expect("close");
}
