//! One principal's task cannot take the keeper, or the host, from another principal: its signals
//! at them fail, and the other principal's task is carried across the next upgrade.

use std::time::Duration;

use serde_json::json;

use crate::clients::bridged;
use crate::fixtures::*;
use crate::handover::{first_pid, keeper_of, replace_binary, running_inode, upgradable_host};
use crate::mcp::{self, Watcher, alive, call};

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_cannot_kill_the_keeper_or_the_host_and_another_principals_task_is_carried() {
    let dir = scratch("keeper-reach");
    let (host, exe) = upgradable_host(&dir);
    let host_pid = host.child.id();
    let (alice, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let (bob, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let bobs = mcp::start(&bob, "echo pid $$; exec sleep 400").await;
    let bobs_pid = first_pid(&bob, &bobs).await;
    let keeper = keeper_of(host_pid).expect("the host's keeper");
    let attack = format!(
        "kill -9 $PPID; echo parent=$?; kill -9 {keeper}; echo keeper=$?; \
         kill -9 {host_pid}; echo host=$?; kill -9 -- -{keeper}; echo group=$?; echo tried"
    );
    let alices = mcp::start(&alice, &attack).await;
    let said = call(
        &alice,
        "task_output",
        json!({"task_id": alices, "wait_for": "tried", "timeout_ms": 20000}),
    )
    .await;
    for refused in ["parent=1", "keeper=1", "host=1", "group=1"] {
        assert!(said.contains(refused), "{refused} not in: {said}");
    }
    let new_inode = replace_binary(&exe);
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
    let listed = call(&bob, "task_list", json!({})).await;
    assert!(
        listed.contains(&bobs) && listed.contains("running"),
        "Bob's task after the upgrade: {listed}"
    );
    assert!(alive(bobs_pid), "Bob's process runs on, same pid");
    assert!(
        eventually(Duration::from_secs(10), || zombies_of(host_pid).is_empty()),
        "zombies under the host: {:?}",
        zombies_of(host_pid)
    );
    drop(host);
    alice.cancel().await.ok();
    bob.cancel().await.ok();
}

/// A keeper killed from outside (no task can) leaves its tasks to the host; after the next upgrade
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
    let new_inode = replace_binary(&exe);
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

/// The host that took a keeper over after its predecessor was killed is as out of reach of the
/// tasks that keeper starts from then on as the first host was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_cannot_kill_the_host_that_took_its_keeper_over_after_a_crash() {
    let dir = scratch("keeper-reach-successor");
    let mut first = crate::handover::state_host(&dir);
    let (client, _) = bridged(&first.socket, Watcher::default(), &[]).await;
    // A running task makes the keeper wait for the next host, which takes it over.
    let sleeper = mcp::start(&client, "echo pid $$; exec sleep 400").await;
    first_pid(&client, &sleeper).await;
    let keeper = keeper_of(first.child.id()).expect("the first host's keeper");
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let next = crate::handover::state_host(&dir);
    let next_pid = next.child.id();
    assert_eq!(
        keeper_of(next_pid),
        None,
        "the next host took the waiting keeper over instead of starting one"
    );
    assert!(alive(keeper));
    let attack = format!("kill -9 {next_pid}; echo host=$?; echo tried");
    let id = mcp::start(&client, &attack).await;
    let said = call(
        &client,
        "task_output",
        json!({"task_id": id, "wait_for": "tried", "timeout_ms": 20000}),
    )
    .await;
    assert!(said.contains("host=1"), "{said}");
    assert!(alive(next_pid as i32), "the next host runs on");
    drop(next);
    client.cancel().await.ok();
}
