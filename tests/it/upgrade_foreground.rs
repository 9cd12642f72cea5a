//! A foreground command in flight when its host is upgraded (`SIGHUP`) goes on as a background
//! task of its caller's, carried to the new image: the call answers at once, naming the task.

use std::time::Duration;

use serde_json::json;

use crate::clients::bridged;
use crate::fixtures::*;
use crate::handover::{replace_binary, running_inode, upgradable_host};
use crate::mcp::{Watcher, alive, call, read_waiting};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreground_command_in_flight_at_an_upgrade_continues_as_a_background_task() {
    let dir = scratch("upgrade-foreground");
    let (host, exe) = upgradable_host(&dir);
    let host_pid = host.child.id();
    let (a, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let started = dir.join("started");
    let release = dir.join("release");
    let command = format!(
        "echo before; echo $$ > {started}; while [ ! -e {release} ]; do sleep 0.05; done; echo after",
        started = started.display(),
        release = release.display()
    );
    let calling = call(
        &a,
        "bash",
        json!({"command": command, "timeout_ms": 300000}),
    );
    let upgrading = async {
        assert!(
            eventually(Duration::from_secs(20), || std::fs::read_to_string(
                &started
            )
            .is_ok_and(|p| p.ends_with('\n'))),
            "the command started"
        );
        let new_inode = replace_binary(&exe);
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(host_pid as i32),
            nix::sys::signal::Signal::SIGHUP,
        )
        .unwrap();
        new_inode
    };
    let (answer, new_inode) = tokio::join!(calling, upgrading);
    assert!(answer.starts_with("before\n"), "{answer}");
    let id = answer
        .split("continues as background task ")
        .nth(1)
        .and_then(|rest| rest.split(';').next())
        .unwrap_or_else(|| panic!("the answer names the task: {answer}"))
        .to_owned();
    let pid: i32 = std::fs::read_to_string(&started)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        eventually(Duration::from_secs(20), || running_inode(host_pid)
            == Some(new_inode)),
        "the same process runs the new binary"
    );
    assert!(alive(pid), "the command runs on under the new image");
    std::fs::write(&release, "").unwrap();
    let read = read_waiting(&a, &id, 30_000).await;
    assert!(
        read.contains("after\n"),
        "the rest of its output is the task's: {read}"
    );
    assert!(read.contains("exit code: 0"), "{read}");
    drop(host);
    a.cancel().await.ok();
}
