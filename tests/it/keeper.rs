//! The keeper spawns the host's task processes, with the real binary: a start never copies the host's
//! descriptor table (two pipes per live task), and a keeper that dies takes no task with it.

use std::time::Duration;

use serde_json::json;

use crate::fixtures::*;
use crate::mcp::{self, SocketHost, Watcher, alive, call, printed_pids, read_waiting};

fn descriptors(pid: i32) -> Vec<String> {
    let mut fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("fd dir")
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .collect();
    fds.sort();
    fds
}

/// The keeper: the host's child whose command line names it, waited for a while: a keeper started
/// by a host thread that has since ended is missing from every thread's `children` while the
/// kernel hands it to another thread.
pub(crate) fn keeper_of(host: i32) -> i32 {
    let mut found = None;
    eventually(Duration::from_secs(10), || {
        found = find_keeper(host);
        found.is_some()
    });
    found.expect("the host runs a keeper")
}

fn find_keeper(host: i32) -> Option<i32> {
    let children: Vec<i32> = std::fs::read_dir(format!("/proc/{host}/task"))
        .expect("tasks")
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|l| {
            l.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect();
    children.into_iter().find(|c| {
        std::fs::read(format!("/proc/{c}/cmdline"))
            .is_ok_and(|cmd| cmd.split(|b| *b == 0).any(|arg| arg == b"keeper"))
    })
}

/// Proves: a task's process, piped or on a terminal, is a child of the keeper, not of the host, and
/// holds only its three standard streams: nothing the host or the keeper opened reaches it, nor what
/// the host inherited from whoever started it (the test gives the host a descriptor without
/// close-on-exec). A terminal task leads its own session with its terminal as the controlling one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_process_is_the_keepers_child_and_holds_only_its_standard_streams() {
    let dir = scratch("keeper-child");
    let setup = "umask 077; exec 9</dev/null";
    let mut host =
        SocketHost::start_after(&dir, &dir.join("taskhost.sock"), setup, &["--no-watch"]);
    assert!(
        descriptors(host.child.id() as i32).contains(&"9".to_owned()),
        "the host inherited descriptor 9"
    );
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let id = mcp::start(&client, "echo $$; exec sleep 1000").await;
    let pid = printed_pids(&client, &id, 1).await[0];
    let keeper = keeper_of(host.child.id() as i32);
    assert_eq!(parent_of(pid), keeper, "the task's parent");
    assert_eq!(descriptors(pid), ["0", "1", "2"], "the task's descriptors");
    call(&client, "task_kill", json!({"task_id": id})).await;

    // A terminal task too: the keeper's child, the leader of its own session on its terminal.
    let text = call(
        &client,
        "bash",
        json!({"command": "echo $$; exec sleep 1000", "run_in_background": true, "tty": true}),
    )
    .await;
    let tty_id = text
        .strip_prefix("started background task ")
        .expect("started")
        .to_owned();
    let tty_pid = printed_pids(&client, &tty_id, 1).await[0];
    assert_eq!(parent_of(tty_pid), keeper, "the terminal task's parent");
    let stat = std::fs::read_to_string(format!("/proc/{tty_pid}/stat")).expect("stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("fields")
        .1
        .split_whitespace()
        .collect();
    // state ppid pgrp session tty_nr
    assert_eq!(fields[2], tty_pid.to_string(), "its process group");
    assert_eq!(fields[3], tty_pid.to_string(), "its session");
    assert_ne!(fields[4], "0", "it has a controlling terminal");
    assert_eq!(
        descriptors(tty_pid),
        ["0", "1", "2"],
        "the terminal task's descriptors"
    );
    call(&client, "task_kill", json!({"task_id": tty_id})).await;
    drop(client);
    host.stop();
    assert!(!alive(pid) && !alive(tty_pid));
}

/// Proves: each live task holds two descriptors in the host (its stdout and stderr pipes) and none
/// in the keeper, whose table stays as small as it started: the table a spawn copies does not grow
/// with the tasks alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_tasks_hold_two_descriptors_each_in_the_host_and_none_in_the_keeper() {
    const TASKS: usize = 100;
    let dir = scratch("keeper-fds");
    let config = dir.join("taskhost.toml");
    // Without a handover (which has the keeper hold every task's read ends and kept files).
    std::fs::write(
        &config,
        "[tasks]\nmax_concurrent_tasks_per_owner = 200\n[host]\nhandover_grace_ms = 0\n",
    )
    .unwrap();
    let mut host = SocketHost::start(&dir, &["--no-watch", "--config", config.to_str().unwrap()]);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    // One task first, so that whatever the host opens once (the spill directory, the runtime's
    // pipes) is open before counting.
    let first = mcp::start(&client, "sleep 1000").await;
    let host_pid = host.child.id() as i32;
    let keeper = keeper_of(host_pid);
    let (host_before, keeper_before) = (descriptors(host_pid), descriptors(keeper));
    let mut ids = vec![first];
    for _ in 0..TASKS {
        ids.push(mcp::start(&client, "sleep 1000").await);
    }
    let (host_after, keeper_after) = (descriptors(host_pid), descriptors(keeper));
    let per_task = (host_after.len() - host_before.len()) as f64 / TASKS as f64;
    assert!(
        (host_after.len() - host_before.len()) <= 2 * TASKS,
        "host descriptors: {} before, {} after {TASKS} more tasks ({per_task:.2} each)",
        host_before.len(),
        host_after.len()
    );
    assert_eq!(
        keeper_after.len(),
        keeper_before.len(),
        "the keeper's descriptors"
    );
    assert!(
        keeper_after.len() <= 8,
        "keeper descriptors: {keeper_after:?}"
    );
    drop(client);
    host.stop();
}

/// Proves: when the keeper dies, the tasks it started run on and settle with their own exit codes
/// (the host adopts and reaps them), and later starts still work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_outlives_a_killed_keeper_and_settles_with_its_exit_code() {
    let dir = scratch("keeper-killed");
    let mut host = SocketHost::start(&dir, &["--no-watch"]);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let id = mcp::start(&client, "echo $$; sleep 1; echo done; exit 3").await;
    let pid = printed_pids(&client, &id, 1).await[0];
    let keeper = keeper_of(host.child.id() as i32);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(keeper),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the keeper");
    assert!(alive(pid), "the task runs on");
    let text = read_waiting(&client, &id, 10_000).await;
    assert!(text.contains("done"), "{text}");
    assert!(text.contains("[status: completed, exit code: 3]"), "{text}");
    let after = mcp::start(&client, "echo after; exit 4").await;
    let text = read_waiting(&client, &after, 10_000).await;
    assert!(text.contains("after"), "{text}");
    assert!(text.contains("[status: completed, exit code: 4]"), "{text}");
    drop(client);
    host.stop();
    assert!(!alive(pid));
}

/// Proves: a keeper killed by a task of the same user is replaced: the new one spawns the later
/// tasks, is told of the earlier ones' groups (their processes adopted by the host), and when the
/// host is SIGKILLed it ends them all within a second, the earlier one by its group alone (it
/// cleared its environment, so no marker names it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_keeper_is_replaced_and_the_new_one_ends_every_task_when_the_host_dies() {
    let dir = scratch("keeper-replaced");
    // No handover: a SIGKILLed host's tasks end at once.
    let config = crate::handover::grace_config(&dir, 0);
    let mut host = SocketHost::start(&dir, &["--no-watch", "--config", &config]);
    let host_pid = host.child.id() as i32;
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let first = mcp::start(&client, "echo $$; exec env -i sleep 1000").await;
    let first_pid = printed_pids(&client, &first, 1).await[0];
    let keeper = keeper_of(host_pid);
    // Killed from outside, as any process of the user but its tasks could.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(keeper),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(
        eventually(Duration::from_secs(10), || {
            find_keeper(host_pid).is_some_and(|k| k != keeper)
        }),
        "a new keeper runs"
    );
    let second_keeper = keeper_of(host_pid);
    assert_eq!(
        parent_of(first_pid),
        host_pid,
        "the host adopted the first task"
    );
    let second = mcp::start(&client, "echo $$; exec sleep 1000").await;
    let second_pid = printed_pids(&client, &second, 1).await[0];
    assert_eq!(
        parent_of(second_pid),
        second_keeper,
        "the new keeper spawned the second"
    );

    host.child.kill().expect("SIGKILL the host");
    host.child.wait().expect("reap the host");
    assert_all_end(&[first_pid, second_pid]);
    drop(client);
}

/// Every one of `pids` ends once the host is gone (the keeper's rounds take up to a second; the
/// deadline leaves room for a busy machine).
fn assert_all_end(pids: &[i32]) {
    let ended = eventually(Duration::from_secs(10), || !pids.iter().any(|&p| alive(p)));
    let survivors: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(ended, "alive after the host died: {survivors:?}");
}

/// Proves: the attack that switched the crash promise off fails. The keeper is killed six times
/// (from outside: a task cannot signal it), one more than the old lifetime budget of restarts;
/// every time another keeper takes over (never the host: no task is its child), and a SIGKILL of
/// the host afterwards leaves no task alive.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn six_keeper_kills_then_a_host_kill_leave_no_task_alive() {
    let dir = scratch("keeper-six-kills");
    // No handover: a SIGKILLed host's tasks end at once.
    let config = crate::handover::grace_config(&dir, 0);
    let mut host = SocketHost::start(&dir, &["--no-watch", "--config", &config]);
    let host_pid = host.child.id() as i32;
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let sleeper = mcp::start(&client, "echo $$; exec sleep 1010").await;
    let sleeper_pid = printed_pids(&client, &sleeper, 1).await[0];
    for round in 0..6 {
        let keeper = keeper_of(host_pid);
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(keeper),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        assert!(
            eventually(Duration::from_secs(20), || {
                find_keeper(host_pid).is_some_and(|k| k != keeper)
            }),
            "round {round}: another keeper runs"
        );
    }
    let last = mcp::start(&client, "echo $$; echo $PPID; exec sleep 1010").await;
    let pids = printed_pids(&client, &last, 2).await;
    assert_eq!(
        pids[1],
        keeper_of(host_pid),
        "a keeper, not the host, started it"
    );
    host.child.kill().expect("SIGKILL the host");
    host.child.wait().expect("reap the host");
    assert_all_end(&[sleeper_pid, pids[0]]);
    drop(client);
}

/// Proves: a keeper that stops answering (here stopped with SIGSTOP) fails the start it
/// was asked for after 10 s, naming why, and is replaced: the next start works through a new keeper,
/// and a task the old one started runs on and is ended by a kill.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keeper_that_stops_answering_is_ended_and_replaced() {
    let dir = scratch("keeper-stopped");
    let mut host = SocketHost::start(&dir, &["--no-watch"]);
    let host_pid = host.child.id() as i32;
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let first = mcp::start(&client, "echo $$; exec sleep 1000").await;
    let first_pid = printed_pids(&client, &first, 1).await[0];
    let keeper = keeper_of(host_pid);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(keeper),
        nix::sys::signal::Signal::SIGSTOP,
    )
    .expect("stop the keeper");
    let refused = call(
        &client,
        "bash",
        json!({"command": "echo never", "run_in_background": true}),
    )
    .await;
    assert!(
        refused.contains("the keeper did not answer within 10 s; it was ended and another started"),
        "{refused}"
    );
    assert!(
        eventually(Duration::from_secs(10), || {
            find_keeper(host_pid).is_some_and(|k| k != keeper)
        }),
        "a new keeper runs"
    );
    let second = mcp::start(&client, "echo $$; exec sleep 1000").await;
    let second_pid = printed_pids(&client, &second, 1).await[0];
    assert_eq!(parent_of(second_pid), keeper_of(host_pid));
    assert!(alive(first_pid), "the first task runs on");
    call(&client, "task_kill", json!({"task_id": first})).await;
    let text = read_waiting(&client, &first, 10_000).await;
    assert!(text.contains("[status: killed"), "{text}");
    drop(client);
    host.stop();
    assert!(!alive(first_pid) && !alive(second_pid));
}

/// The keeper `keeper` still runs and answers: a new process starts through it, prints `text` and
/// exits 0.
fn assert_keeper_serves(f: &Fixture, keeper: u32, text: &str) {
    use taskhost::process::{Exit, ProcessSpec};
    let processes = f.host.processes();
    assert_eq!(processes.keeper_pid(), Some(keeper));
    let echo = processes
        .spawn(&ProcessSpec::new(format!("echo {text}")), "s")
        .expect("spawn");
    assert_eq!(f.rt.block_on(echo.wait()), Exit::Code(0));
    assert_eq!(echo.read(), format!("{text}\n"));
}

/// Proves: programs that cannot be executed, started again and again while other children of the
/// keeper exit around them, are each refused naming the OS's cause, and the keeper serves on (the
/// spawn that reports the failure reaps its child, never the keeper's reaper).
#[test]
fn failed_executions_among_exiting_children_leave_the_keeper_serving() {
    use taskhost::process::{Exit, ProcessSpec};
    let f = Fixture::new("keeper-exec-failures");
    let processes = f.host.processes();
    let keeper = processes.keeper_pid().expect("the fixture runs a keeper");
    let mut quick = Vec::new();
    for i in 0..100 {
        // A bare name not on PATH: std forks, the exec fails, and std waits for that child itself.
        let mut missing = ProcessSpec::new("");
        missing.argv = Some(vec![format!("taskhost-no-such-program-{i}")]);
        let err = processes
            .spawn(&missing, "s")
            .err()
            .expect("a missing program is refused");
        assert!(err.0.contains("No such file or directory"), "{err}");
        quick.push(
            processes
                .spawn(&ProcessSpec::new("exit 7"), "s")
                .expect("spawn"),
        );
    }
    for p in quick {
        assert_eq!(f.rt.block_on(p.wait()), Exit::Code(7));
    }
    assert_keeper_serves(&f, keeper, "still serving");
    processes.remove_spills("s");
}

/// Proves: a start too large for the keeper's frames (a 70 MB environment) is refused before it is
/// sent, naming its size, and the keeper and its other processes go on (a frame it could not read
/// would end it, and every task with it).
#[test]
fn a_start_too_large_for_the_keeper_is_refused_and_the_keeper_serves_on() {
    use taskhost::process::{Exit, ProcessSpec};
    let f = Fixture::new("keeper-too-large");
    let processes = f.host.processes();
    let keeper = processes.keeper_pid().expect("the fixture runs a keeper");
    let running = processes
        .spawn(&ProcessSpec::new("sleep 1; exit 5"), "s")
        .expect("spawn");
    let mut huge = ProcessSpec::new("true");
    huge.extra_env = vec![("HUGE".into(), "x".repeat(70 << 20))];
    let err = processes.spawn(&huge, "s").err().expect("refused");
    assert!(
        err.0.contains("more than a start may carry"),
        "{}",
        &err.0[..err.0.len().min(300)]
    );
    assert_eq!(f.rt.block_on(running.wait()), Exit::Code(5));
    assert_keeper_serves(&f, keeper, "after");
    processes.remove_spills("s");
}

/// Proves: a host without a keeper (an embedding, the testkit) spawns piped and terminal processes
/// itself, with the same streams, exits and terminal as through the keeper.
#[test]
fn without_a_keeper_the_host_spawns_piped_and_terminal_processes_itself() {
    use taskhost::process::{Exit, ProcessSpec, TtySize};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let dir = scratch("no-keeper");
    let host = taskhost::Taskhost::new(
        taskhost_registry::RegistryConfig::new(),
        rt.handle().clone(),
        taskhost::LoadOptions::new(dir.join("gen")),
        taskhost::ServiceOptions::default(),
    );
    let processes = host.processes();
    assert_eq!(processes.keeper_pid(), None);
    let piped = processes
        .spawn(&ProcessSpec::new("echo out; echo err >&2; exit 3"), "s")
        .expect("spawn");
    assert_eq!(rt.block_on(piped.wait()), Exit::Code(3));
    assert_eq!(piped.read(), "out\n[stderr]\nerr\n");
    let mut on_tty = ProcessSpec::new("tty >/dev/null && echo on a terminal; stty size");
    on_tty.tty = Some(TtySize {
        cols: 100,
        rows: 30,
    });
    let tty = processes.spawn(&on_tty, "s").expect("spawn");
    assert!(tty.takes_input());
    assert_eq!(rt.block_on(tty.wait()), Exit::Code(0));
    let text = tty.read();
    assert!(
        text.contains("on a terminal") && text.contains("30 100"),
        "{text}"
    );
    processes.remove_spills("s");
    rt.block_on(host.shutdown());
}

/// The host's cgroup, when it runs its tasks in one (root here; a delegated subtree elsewhere).
fn host_cgroup(host: i32) -> Option<std::path::PathBuf> {
    let keeper = find_keeper(host)?;
    let cgroups = std::fs::read_to_string(format!("/proc/{keeper}/cgroup")).ok()?;
    let own = cgroups.lines().find_map(|l| l.strip_prefix("0::"))?;
    own.contains("taskhost-").then(|| own.into())
}

/// Proves: where the host may make a cgroup, a task's descendant that left its group and session
/// and cleared its environment (nothing else names it as the host's) is still ended when the host
/// is SIGKILLed, and the cgroup is removed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_descendant_that_hid_from_group_and_marker_ends_with_the_host_in_its_cgroup() {
    let dir = scratch("keeper-cgroup");
    // No handover: a SIGKILLed host's tasks end at once.
    let config = crate::handover::grace_config(&dir, 0);
    let mut host = SocketHost::start(&dir, &["--no-watch", "--config", &config]);
    let host_pid = host.child.id() as i32;
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let id = mcp::start(
        &client,
        "setsid env -i sh -c 'echo $$; exec sleep 1000' & wait",
    )
    .await;
    let hidden = printed_pids(&client, &id, 1).await[0];
    // Looked up once the keeper runs (it starts with the first task).
    if host_cgroup(host_pid).is_none() {
        eprintln!(
            "a_descendant_that_hid_from_group_and_marker_ends_with_the_host_in_its_cgroup: skipped: no cgroup v2 this user may write"
        );
        return;
    }
    assert!(alive(hidden));
    host.child.kill().expect("SIGKILL the host");
    host.child.wait().expect("reap the host");
    assert_all_end(&[hidden]);
    drop(client);
}

/// Proves: where the host may make a cgroup, tasks left behind when both the keeper and the host
/// were killed (the keeper first, the host before another keeper started) are ended by the next host
/// started on the machine, which finds the dead host's cgroup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_host_ends_what_a_dead_host_and_its_keeper_left() {
    let dir = scratch("keeper-both-killed");
    next_host_ends_what_both_left(&dir, &[], "echo $$; exec sleep 1000").await;
}

/// Found by an attacker: a task whose process has `keeper` for its first argument (`sh keeper`)
/// passed for a dead host's keeper that still holds its tasks, and the next host left the dead
/// host's cgroup to it: the task ran on. A bounded task (`no_new_privs`, which a keeper never sets)
/// is no keeper, whatever its arguments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_task_named_like_a_keeper_is_ended_by_the_next_host() {
    let dir = scratch("keeper-spoofed");
    let config = dir.join("config.toml");
    std::fs::write(&config, "[policy.default]\n").unwrap();
    let spoof = format!(
        "cd {} && printf 'echo $$; sleep 1000\\n' > keeper && exec sh keeper",
        dir.display()
    );
    let config = config.to_string_lossy().into_owned();
    next_host_ends_what_both_left(&dir, &["--config", &config], &spoof).await;
}

/// Starts a host in `dir` with `args` and a task running `command` (which prints its pid), stops
/// and kills the keeper and the host, and checks that the next host ends the task and removes the
/// dead host's cgroup. Skipped where there is no cgroup v2 this user may write.
async fn next_host_ends_what_both_left(dir: &std::path::Path, args: &[&str], command: &str) {
    let mut host = SocketHost::start(dir, &[&["--no-watch"], args].concat());
    let host_pid = host.child.id() as i32;
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let id = mcp::start(&client, command).await;
    let task = printed_pids(&client, &id, 1).await[0];
    // Looked up once the keeper runs (it starts with the first task).
    let Some(cgroup) = host_cgroup(host_pid) else {
        eprintln!("skipped: no cgroup v2 this user may write");
        return;
    };
    // Both stopped first, then killed: no keeper can be restarted in between.
    let keeper = keeper_of(host_pid);
    for pid in [host_pid, keeper] {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGSTOP,
        )
        .expect("stop");
    }
    for pid in [keeper, host_pid] {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        )
        .expect("kill");
    }
    host.child.wait().expect("reap the host");
    drop(client);
    assert!(
        alive(task),
        "the task outlived both, as nothing was left to end it"
    );
    let next = SocketHost::start_with(dir, &dir.join("next.sock"), "077", &["--no-watch"]);
    assert_all_end(&[task]);
    let name = cgroup.file_name().unwrap().to_owned();
    assert!(
        eventually(Duration::from_secs(10), || {
            !std::fs::read_dir("/sys/fs/cgroup")
                .into_iter()
                .chain(std::fs::read_dir("/sys/fs/cgroup/unified"))
                .flatten()
                .flatten()
                .any(|e| e.file_name() == name)
        }),
        "the dead host's cgroup is removed"
    );
    drop(next);
}

/// Proves: a Ctrl-C typed into a task's terminal interrupts it even when the host was started with
/// SIGINT and SIGQUIT ignored, as a shell without job control starts `taskhost serve &` (ignored
/// signals stay ignored across `exec`; the keeper gives its tasks the default actions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_reaches_a_task_of_a_host_started_with_sigint_ignored() {
    let dir = scratch("keeper-sigint");
    let socket = dir.join("taskhost.sock");
    let mut host = SocketHost::start_after(&dir, &socket, "trap '' INT QUIT", &["--no-watch"]);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let started = call(
        &client,
        "bash",
        // One process from the first byte: `cat` prints its own status, then reads the terminal, so
        // the Ctrl-C below cannot land in a shell between two commands (where bash would hold it
        // and lose it at its `exec`).
        json!({"command": "exec cat /proc/self/status -", "run_in_background": true, "tty": true}),
    )
    .await;
    let id = started
        .split('\n')
        .next()
        .and_then(|l| l.strip_prefix("started background task "))
        .unwrap_or_else(|| panic!("not started: {started}"))
        .to_owned();
    let ignored = call(
        &client,
        "task_output",
        json!({"task_id": id, "wait_for": "SigIgn", "timeout_ms": 20000}),
    )
    .await;
    let mask = ignored
        .split_whitespace()
        .skip_while(|w| *w != "SigIgn:")
        .nth(1)
        .and_then(|m| u64::from_str_radix(m, 16).ok())
        .unwrap_or_else(|| panic!("no mask: {ignored}"));
    assert_eq!(
        mask & 0b110,
        0,
        "SIGINT or SIGQUIT ignored in the task: {ignored}"
    );
    call(
        &client,
        "task_input",
        json!({"task_id": id, "text": "\u{3}"}),
    )
    .await;
    let end = read_waiting(&client, &id, 20_000).await;
    assert!(end.contains("[status: killed, signal: SIGINT]"), "{end}");
    drop(client);
    host.stop();
}
