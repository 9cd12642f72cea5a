//! What a keeper's death leaves under the host: its tasks carried by the next keeper, and after an
//! upgrade no zombie.

use std::time::Duration;

use serde_json::json;

use crate::clients::bridged;
use crate::crash_reads::read_until;
use crate::fixtures::*;
use crate::handover::{first_pid, keeper_of, upgradable_host, upgrade_in_place};
use crate::mcp::{self, Watcher, call};

/// The children of `parent` that are zombies (`/proc/*/stat`: state Z, that parent).
fn zombies_of(parent: u32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            let fields: Vec<&str> = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .collect();
            fields.first() == Some(&"Z") && fields.get(1) == Some(&parent.to_string().as_str())
        })
        .collect()
}

/// A killed keeper leaves its tasks to the host; after the next upgrade
/// the new image reaps whatever the old one left: no zombie stays under the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_keepers_death_and_an_upgrade_no_zombie_remains_under_the_host() {
    let dir = scratch("keeper-zombies");
    let (host, exe) = upgradable_host(&dir);
    let host_pid = host.child.id();
    let (bob, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let bobs = mcp::start(&bob, "echo pid $$; exec sleep 400").await;
    first_pid(&bob, &bobs).await;
    let keeper = keeper_of(host_pid).expect("the host's keeper");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(keeper),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(
        eventually(Duration::from_secs(20), || keeper_of(host_pid)
            .is_some_and(|k| k != keeper)),
        "no keeper took the dead one's place"
    );
    upgrade_in_place(host_pid, &exe);
    // Served again after the upgrade: the new image runs.
    call(&bob, "task_list", json!({})).await;
    assert!(
        eventually(Duration::from_secs(10), || zombies_of(host_pid).is_empty()),
        "zombies under the host: {:?}",
        zombies_of(host_pid)
    );
    drop(host);
    bob.cancel().await.ok();
}

/// Proves (issue 40, 6): Alice's unbounded task SIGKILLs its parent; Bob's running task is still
/// carried through the next upgrade (`SIGHUP`), runs on, settles with its exit, and no old keeper,
/// shell or sleep stays a zombie under the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_kills_its_parent_costs_another_sessions_task_nothing_at_the_next_upgrade() {
    let dir = scratch("keeper-killer");
    let (host, exe) = upgradable_host(&dir);
    let host_pid = host.child.id();
    let (bob, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let (alice, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let bobs = mcp::start(&bob, "echo pid $$; exec sleep 400").await;
    let pid = first_pid(&bob, &bobs).await;
    let keeper = keeper_of(host_pid).expect("the host's keeper");
    // After the keeper's answer to the start: a task that kills it sooner fails its own start.
    let alices = mcp::start(&alice, "sleep 0.5; kill -9 $PPID; echo sent").await;
    read_until(&alice, &alices, "[status: ").await;
    assert!(
        eventually(Duration::from_secs(20), || keeper_of(host_pid)
            .is_some_and(|k| k != keeper)),
        "the task did not kill its keeper, or none took its place"
    );
    upgrade_in_place(host_pid, &exe);
    call(&bob, "task_list", json!({})).await;
    assert!(mcp::alive(pid), "Bob's task was ended by the upgrade");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let read = read_until(&bob, &bobs, "[status: ").await;
    assert!(!read.contains("lost"), "{read}");
    assert!(
        eventually(Duration::from_secs(10), || zombies_of(host_pid).is_empty()),
        "zombies under the host: {:?}",
        zombies_of(host_pid)
    );
    drop(host);
    bob.cancel().await.ok();
    alice.cancel().await.ok();
}

/// How a deployment keeps tasks from the keeper and the host: any policy, even `[policy.default]`
/// with no key, gives each task a Landlock domain whose signal scope refuses a signal to any
/// process outside it, and a seccomp filter refuses `prlimit` on another process (a CPU limit of
/// zero kills). The attack of the test above, `kill -9 $PPID`, a signal to the host and a change of
/// the keeper's limits are refused, and the keeper is the same process after (with no policy the
/// same command kills it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_any_policy_a_task_cannot_signal_its_keeper_or_its_host() {
    let dir = scratch("keeper-fenced");
    let config = dir.join("taskhost.toml");
    std::fs::write(&config, "[policy.default]\n").unwrap();
    let host =
        crate::mcp::SocketHost::start(&dir, &["--no-watch", "--config", config.to_str().unwrap()]);
    let host_pid = host.child.id();
    let (alice, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    assert!(
        eventually(Duration::from_secs(20), || keeper_of(host_pid).is_some()),
        "no keeper"
    );
    let keeper = keeper_of(host_pid).expect("the host's keeper");
    let attack = format!(
        "kill -9 $PPID || echo refused-keeper; kill -0 {host_pid} || echo refused-host; \
         prlimit --pid $PPID --core=0 || echo refused-limits; echo done"
    );
    let answer = call(&alice, "bash", json!({"command": attack})).await;
    assert!(answer.contains("refused-keeper"), "{answer}");
    assert!(answer.contains("refused-host"), "{answer}");
    assert!(answer.contains("refused-limits"), "{answer}");
    assert_eq!(keeper_of(host_pid), Some(keeper), "{answer}");
    drop(host);
    alice.cancel().await.ok();
}
