//! A restart loses nothing, with the real binary: a `--listen` host's running tasks outlive it (a
//! SIGKILL included) in its keeper, which drains their output into their kept files, and the next
//! host on the same state directory and address takes them back: same processes, every byte once,
//! the completion told once; with no successor within the grace they end as before.

use std::time::Duration;

use serde_json::json;

use crate::clients::bridged;
use crate::fixtures::*;
use crate::mcp::{self, Client, SocketHost, Watcher, alive, call, try_call};

/// A socket host on the state directory `<dir>/state`, plugins not watched: the first, or the
/// next once one is gone.
pub(crate) fn state_host(dir: &std::path::Path) -> SocketHost {
    let state = dir.join("state").display().to_string();
    SocketHost::start(dir, &["--no-watch", "--state", &state])
}

/// A [`state_host`] and a client bridged to it.
async fn bridged_state_host(dir: &std::path::Path) -> (SocketHost, Client) {
    let host = state_host(dir);
    let (client, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    (host, client)
}

/// What a task's reads and the notices riding on them said, gathered across calls.
#[derive(Default)]
struct Seen {
    /// The task's output lines, in the order read.
    lines: Vec<String>,
    /// Notices of the task's end.
    notices: usize,
    /// Calls that failed because the host went away under them.
    failed: usize,
    /// A read showed the task's end (its owner was told by the read: no notice is due).
    read_the_end: bool,
}

impl Seen {
    fn take(&mut self, id: &str, answer: &str) {
        let mut blocks = answer.split("\n---\n");
        if let Some(read) = blocks.next() {
            self.read_the_end |= read.contains("[status: completed");
            self.lines.extend(
                read.lines()
                    .filter(|l| l.starts_with('n') || l.starts_with("pid "))
                    .map(str::to_owned),
            );
        }
        self.notices += blocks
            .filter(|b| b.contains(&format!("background task {id} ")))
            .count();
    }

    fn numbers(&self) -> Vec<u32> {
        self.lines
            .iter()
            .filter_map(|l| l.strip_prefix('n')?.parse().ok())
            .collect()
    }
}

/// Reads `id` until a line `until` was read (failed calls counted and tried again).
async fn read_until(client: &Client, id: &str, until: &str, seen: &mut Seen) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !seen.lines.iter().any(|l| l == until) {
        assert!(
            std::time::Instant::now() < deadline,
            "{until} never read: {:?}",
            seen.lines
        );
        match try_call(client, "task_output", json!({"task_id": id})).await {
            Ok(answer) => seen.take(id, &answer),
            Err(_) => seen.failed += 1,
        }
        // Polling pace for a task that prints every 20 ms.
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

/// Waits for task `id`'s end to be told (the task sleeps a second after its last line, so it is
/// told on a later answer, unless a loaded machine read its end with the last line: that read told
/// it), then checks it was told once; the last `task_list` answer.
async fn told_once(client: &Client, id: &str, seen: &mut Seen) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while seen.notices == 0 && !seen.read_the_end {
        assert!(
            std::time::Instant::now() < deadline,
            "the end was never told"
        );
        let answer = call(client, "task_list", json!({})).await;
        seen.take(id, &answer);
        // Polling pace for the task's last second.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = call(client, "task_list", json!({})).await;
    seen.take(id, &after);
    assert!(
        seen.notices == 1 || (seen.notices == 0 && seen.read_the_end),
        "told once, by a notice or by the read: {} notices",
        seen.notices
    );
    after
}

/// Starts a task printing its pid, then a numbered line every 20 ms (150 of them), then sleeping a
/// second, and reads it to its fifth line: its id, its pid and what was read.
async fn numbered_task(client: &Client) -> (String, i32, Seen) {
    let id = mcp::start(
        client,
        "echo pid $$; for i in $(seq 1 150); do echo n$i; sleep 0.02; done; sleep 1",
    )
    .await;
    let mut seen = Seen::default();
    read_until(client, &id, "n5", &mut seen).await;
    let pid: i32 = seen.lines[0]
        .strip_prefix("pid ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid line first: {:?}", seen.lines));
    (id, pid, seen)
}

/// Proves (a): a task printing a numbered line every 20 ms, its host SIGKILLed and another started
/// on the same socket and state: the task is the same process, the client (through `taskhost
/// connect`) reads every number exactly once and in order, then is told of its end once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_task_is_handed_to_the_next_host_after_a_sigkill_with_every_line_once() {
    let dir = scratch("handover-kill");
    let (mut host, a) = bridged_state_host(&dir).await;
    let (id, pid, mut seen) = numbered_task(&a).await;
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    assert!(alive(pid), "the task outlives its host");
    // Another host starting meanwhile (it ends what the cgroups of dead hosts hold) leaves the
    // waiting keeper's cgroup alone.
    let other = scratch("handover-kill-other");
    drop(SocketHost::start(&other, &["--no-watch"]));
    assert!(alive(pid), "the task outlives another host's start");
    let _next = state_host(&dir);
    read_until(&a, &id, "n150", &mut seen).await;
    assert!(alive(pid), "the same process runs on under the next host");
    assert_eq!(
        seen.numbers(),
        (1..=150).collect::<Vec<_>>(),
        "every number once, in order"
    );
    assert_eq!(
        seen.lines.iter().filter(|l| l.starts_with("pid ")).count(),
        1
    );
    let after = told_once(&a, &id, &mut seen).await;
    assert!(after.contains(&format!("{id} [bash] completed")), "{after}");
    a.cancel().await.expect("close");
}

/// A background task whose first act has its host SIGKILLed (through a FIFO the test reads: a
/// task cannot signal its host) is handed over all the same: it was numbered durably before its start, and the keeper holds it under that id from its
/// start (the host had no time to ask for it after). Whether or not the start's answer left before
/// the host died, the task is in the next host's `task_list`, every line once, its end told once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_task_that_kills_its_host_as_it_starts_is_handed_to_the_next_host() {
    let dir = scratch("handover-start-kill");
    let (mut host, a) = bridged_state_host(&dir).await;
    let fifo = dir.path().join("kill-host");
    kill_on_write(&fifo, host.child.id() as i32);
    let command = format!(
        "echo > {}; echo pid $$; for i in $(seq 1 20); do echo n$i; sleep 0.02; done; sleep 1",
        fifo.display()
    );
    let starting = try_call(
        &a,
        "bash",
        json!({"command": command, "run_in_background": true}),
    );
    let next_host = async {
        host.child.wait().unwrap();
        state_host(&dir)
    };
    let (_answer, _next) = tokio::join!(starting, next_host);
    let list = call(&a, "task_list", json!({})).await;
    let id = list
        .split_whitespace()
        .find(|w| w.starts_with("bash-"))
        .unwrap_or_else(|| panic!("the task is listed: {list}"))
        .to_owned();
    assert!(!list.contains("lost"), "{list}");
    let mut seen = Seen::default();
    read_until(&a, &id, "n20", &mut seen).await;
    assert_eq!(
        seen.numbers(),
        (1..=20).collect::<Vec<_>>(),
        "every number once"
    );
    let after = told_once(&a, &id, &mut seen).await;
    assert!(after.contains(&format!("{id} [bash] completed")), "{after}");
    a.cancel().await.expect("close");
}

/// As [`state_host`], the handover waiting `grace_ms` for a successor (0: none, a SIGKILLed host's
/// tasks end at once); called again for the next host on the same directory.
pub(crate) fn grace_host(dir: &std::path::Path, grace_ms: u64) -> SocketHost {
    let state = dir.join("state").display().to_string();
    let config = grace_config(dir, grace_ms);
    SocketHost::start(dir, &["--no-watch", "--state", &state, "--config", &config])
}

/// A config file in `dir` with `[host] handover_grace_ms = grace_ms`; its path.
pub(crate) fn grace_config(dir: &std::path::Path, grace_ms: u64) -> String {
    let path = dir.join(format!("handover-{grace_ms}.toml"));
    std::fs::write(&path, format!("[host]\nhandover_grace_ms = {grace_ms}\n")).unwrap();
    path.display().to_string()
}

/// Proves (c): with no successor, a SIGKILLed host's running task lives through the grace, then is
/// ended; the next look at the records (`taskhost tasks`, no host running) finds it `lost`, its
/// output kept to the last line it wrote while no host ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_successor_the_tasks_end_after_the_grace_and_are_recorded_lost() {
    let dir = scratch("handover-none");
    let state = dir.join("state");
    let mut host = grace_host(&dir, 3000);
    let (a, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let id = mcp::start(
        &a,
        "echo pid $$; sleep 2; echo while no host ran; exec sleep 1000",
    )
    .await;
    let pid = first_pid(&a, &id).await;
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    assert!(alive(pid), "the task waits for a successor");
    assert!(
        eventually(Duration::from_secs(30), || !alive(pid)),
        "the task ended after the grace"
    );
    // The gone host is seen gone once its keeper has exited (it holds the host's lock).
    let record = || {
        let out = output_within(
            std::process::Command::new(mcp::binary())
                .args(["tasks", "--json", "--all", "--state"])
                .arg(&state),
            Duration::from_secs(30),
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.contains(&format!("\"{id}\"")))
            .map(str::to_owned)
            .unwrap_or_default()
    };
    assert!(
        eventually(Duration::from_secs(30), || record()
            .contains("\"status\":\"lost\"")),
        "{}",
        record()
    );
    let kept = output_within(
        std::process::Command::new(mcp::binary())
            .args(["tasks", "--output", &id, "--state"])
            .arg(&state),
        Duration::from_secs(30),
    );
    let kept = String::from_utf8_lossy(&kept.stdout).into_owned();
    assert!(
        kept.contains("while no host ran"),
        "drained into the kept file: {kept}"
    );
    a.cancel().await.ok();
}

/// The pid a task printed as its first line (`pid N`), once it did.
pub(crate) async fn first_pid(client: &Client, id: &str) -> i32 {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let answer = try_call(
            client,
            "task_output",
            json!({"task_id": id, "wait": true, "timeout_ms": 200}),
        )
        .await
        .unwrap_or_default();
        if let Some(pid) = answer
            .lines()
            .find_map(|l| l.strip_prefix("pid ")?.parse().ok())
        {
            return pid;
        }
        assert!(std::time::Instant::now() < deadline, "no pid line");
    }
}

/// Proves (d): a second `serve` on the address and state of a live host is refused with a clear
/// error, and the live host's task is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_host_on_a_live_hosts_state_and_address_is_refused() {
    let dir = scratch("handover-twice");
    let state = dir.join("state");
    let args = ["--no-watch", "--state", state.to_str().unwrap()];
    let host = SocketHost::start(&dir, &args);
    let out = output_within(
        std::process::Command::new(mcp::binary())
            .arg("serve")
            .arg("--listen")
            .arg(format!("unix:{}", host.socket.display()))
            .args(args)
            .env("XDG_RUNTIME_DIR", &*dir)
            .stdin(std::process::Stdio::null()),
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("another taskhost serves"), "{err}");
    assert!(std::os::unix::net::UnixStream::connect(&host.socket).is_ok());
}

/// A host run from a copy of the binary at `exe`, on `<dir>/taskhost.sock` with its state in
/// `<dir>/state`, serving the bash and tasks plugins built beside the original.
fn copied_host(dir: &std::path::Path, exe: &std::path::Path) -> SocketHost {
    copied_host_logging(dir, exe, None, &[])
}

/// A [`copied_host`] whose log goes to the file `log` (inherited when `None`), with `extra`
/// arguments after its own.
pub(crate) fn copied_host_logging(
    dir: &std::path::Path,
    exe: &std::path::Path,
    log: Option<&std::path::Path>,
    extra: &[&str],
) -> SocketHost {
    let socket = dir.join("taskhost.sock");
    let mut command = std::process::Command::new(exe);
    command
        .args(["serve", "--no-watch", "--listen"])
        .arg(format!("unix:{}", socket.display()))
        .arg("--state")
        .arg(dir.join("state"))
        .arg("--plugin")
        .arg(built("taskhost_plugin_tasks"))
        .arg("--plugin")
        .arg(built("taskhost_plugin_bash"))
        .args(extra)
        .env("RUST_LOG", "warn")
        .env("XDG_RUNTIME_DIR", dir)
        .stdin(std::process::Stdio::null());
    let mut child = None;
    // A fork of another test's thread may still hold the copy open for writing (ETXTBSY) until
    // its child's `exec`.
    eventually(Duration::from_secs(20), || {
        if let Some(log) = log {
            command.stderr(std::fs::File::create(log).unwrap());
        }
        match command.spawn() {
            Ok(c) => child = Some(c),
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ETXTBSY as i32) => {}
            Err(e) => panic!("spawn the copied taskhost: {e}"),
        }
        child.is_some()
    });
    let child = child.expect("spawn the copied taskhost: text file busy");
    assert!(
        eventually(Duration::from_secs(20), || {
            std::os::unix::net::UnixStream::connect(&socket).is_ok()
        }),
        "the copied host never listened"
    );
    SocketHost { child, socket }
}

/// A socket host running a copy of the binary in `<dir>/bin`, which a test may replace on disk
/// ([`replace_binary`]) and then upgrade to; the copy's path.
pub(crate) fn upgradable_host(dir: &std::path::Path) -> (SocketHost, std::path::PathBuf) {
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let exe = bin.join("taskhost");
    std::fs::copy(mcp::binary(), &exe).unwrap();
    (copied_host(dir, &exe), exe)
}

/// Replaces the binary at `exe` as a rebuild does (a new file renamed over it); the new inode.
pub(crate) fn replace_binary(exe: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let rebuilt = exe.with_extension("new");
    std::fs::copy(mcp::binary(), &rebuilt).unwrap();
    std::fs::rename(&rebuilt, exe).unwrap();
    std::fs::metadata(exe).unwrap().ino()
}

/// Replaces the binary `exe` of host `host_pid`, asks the host to upgrade (`SIGHUP`) and waits until
/// the new image runs.
pub(crate) fn upgrade_in_place(host_pid: u32, exe: &std::path::Path) {
    let new_inode = replace_binary(exe);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(host_pid as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    assert!(
        eventually(Duration::from_secs(20), || running_inode(host_pid)
            == Some(new_inode)),
        "the host was not upgraded"
    );
}

/// The inode of the file `pid` runs.
pub(crate) fn running_inode(pid: u32) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/{pid}/exe"))
        .ok()
        .map(|m| m.ino())
}

/// Proves (b): `SIGHUP` to a `--listen` host whose binary was replaced on disk (a rebuild renames a
/// new file over it) re-executes the new binary in the same process, which takes the running task
/// back: its client, polling all along through `taskhost connect`, sees no error, reads every
/// number once and in order, and is told of the end once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_re_executes_the_binary_on_disk_and_the_client_sees_no_error() {
    let dir = scratch("handover-hup");
    let (host, exe) = upgradable_host(&dir);
    let host_pid = host.child.id();
    let (a, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let (id, pid, mut seen) = numbered_task(&a).await;
    let new_inode = replace_binary(&exe);
    assert_ne!(running_inode(host_pid), Some(new_inode));
    let polling = async {
        read_until(&a, &id, "n150", &mut seen).await;
    };
    let hup = async {
        // While the client polls: the upgrade lands between, or during, its calls.
        tokio::time::sleep(Duration::from_millis(100)).await;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(host_pid as i32),
            nix::sys::signal::Signal::SIGHUP,
        )
        .unwrap();
    };
    tokio::join!(polling, hup);
    assert!(
        eventually(Duration::from_secs(20), || running_inode(host_pid)
            == Some(new_inode)),
        "the same process runs the new binary"
    );
    assert!(alive(pid), "the task runs on under the new image");
    assert_eq!(seen.failed, 0, "the client saw no error");
    assert_eq!(seen.numbers(), (1..=150).collect::<Vec<_>>());
    told_once(&a, &id, &mut seen).await;
    drop(host);
    a.cancel().await.ok();
}

/// The watchdog among `keeper`'s children.
fn watchdog_of(keeper: u32) -> Option<i32> {
    children(keeper).into_iter().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == b"--watchdog"))
    })
}

/// The children of process `parent`.
fn children(parent: u32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The keeper among `host`'s children.
pub(crate) fn keeper_of(host: u32) -> Option<i32> {
    children(host).into_iter().find(|pid| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(b"keeper".as_slice()))
    })
}

/// Proves (f): the keeper SIGKILLed while it holds a dead host's tasks for a successor leaves no
/// task behind (its watchdog ends them): with both the host and the keeper gone, nothing of the
/// host's work outlives them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keeper_killed_while_it_waits_for_a_successor_leaves_no_task_behind() {
    let dir = scratch("handover-keeper-killed");
    let (mut host, a) = bridged_state_host(&dir).await;
    let id = mcp::start(&a, "echo pid $$; exec sleep 1000").await;
    let pid = first_pid(&a, &id).await;
    let keeper = keeper_of(host.child.id()).expect("the host's keeper");
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    assert!(alive(pid), "the task waits for a successor");
    // The keeper notices its host's end and starts its watchdog, then is killed.
    assert!(
        eventually(Duration::from_secs(30), || watchdog_of(keeper as u32)
            .is_some()),
        "the waiting keeper started no watchdog"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(keeper),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(
        eventually(Duration::from_secs(20), || !alive(pid)),
        "the task ended with its keeper"
    );
    a.cancel().await.ok();
}

/// Proves (e): a task on a terminal keeps taking input across a handover: a line typed before the
/// host's SIGKILL and one typed to the next host are both read by the same process, and its
/// screen shows both answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_task_keeps_taking_input_across_a_handover() {
    let dir = scratch("handover-tty");
    let (mut host, a) = bridged_state_host(&dir).await;
    let started = mcp::answer(
        &a,
        "bash",
        json!({"command": "echo pid $$; while read line; do echo got:$line; done",
               "run_in_background": true, "tty": true}),
    )
    .await;
    let id = mcp::started_id(&started);
    let wait_for = |pattern: &'static str| {
        let (a, id) = (&a, id.clone());
        async move {
            call(
                a,
                "task_output",
                json!({"task_id": id, "wait_for": pattern, "timeout_ms": 20000}),
            )
            .await
        }
    };
    let first = wait_for("pid ").await;
    let pid: i32 = first
        .lines()
        .find_map(|l| l.trim().strip_prefix("pid ")?.parse().ok())
        .unwrap_or_else(|| panic!("no pid: {first}"));
    call(&a, "task_input", json!({"task_id": id, "text": "one\n"})).await;
    assert!(wait_for("got:one").await.contains("got:one"));
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    let _next = state_host(&dir);
    // The first call after the restart waits for the bridge to come back.
    let typed = call(&a, "task_input", json!({"task_id": id, "text": "two\n"})).await;
    assert!(!typed.starts_with("Error"), "{typed}");
    assert!(
        wait_for("got:two").await.contains("got:two"),
        "the same process read the line typed to the next host"
    );
    assert!(alive(pid));
    a.cancel().await.ok();
}

/// Found by an attacker: the keeper of a gone host handed its tasks' descriptors, its lock and its
/// listening sockets to the first peer of the host's user on the handover socket, so a process
/// that connected while the host ran was taken for its successor (and the real one found nothing).
/// A bounded task always runs in a mount namespace of its own: the keeper takes a successor only
/// from its own, and the real successor carries the task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_in_another_mount_namespace_is_never_handed_the_tasks() {
    use std::io::BufRead;
    let dir = scratch("handover-intruder");
    let (mut host, a) = bridged_state_host(&dir).await;
    let (id, pid, mut seen) = numbered_task(&a).await;
    let socket = std::fs::read_dir(dir.join("state").join("hosts"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "sock"))
        .expect("the handover socket");
    let grab = "import socket,sys\n\
                s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print('connected', flush=True)\n\
                s.settimeout(30)\n\
                msg,anc,_,_=s.recvmsg(65536, socket.CMSG_SPACE(256))\n\
                print('got' if msg or anc else 'refused', flush=True)";
    let mut intruder = std::process::Command::new("unshare")
        .args(["-m", "python3", "-c", grab])
        .arg(&socket)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("unshare");
    let mut out = std::io::BufReader::new(intruder.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "connected");
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    let answer = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        out.read_line(&mut line).map(|_| line)
    })
    .await
    .unwrap()
    .unwrap();
    intruder.wait().ok();
    assert_eq!(
        answer.trim(),
        "refused",
        "the intruder was handed the tasks"
    );
    let _next = state_host(&dir);
    read_until(&a, &id, "n150", &mut seen).await;
    assert!(alive(pid), "the same process runs on under the next host");
    assert_eq!(seen.numbers(), (1..=150).collect::<Vec<_>>());
    a.cancel().await.ok();
}
