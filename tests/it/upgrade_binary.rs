//! `SIGHUP` re-executes only a binary that this user or root laid out: one another user could
//! have written is refused, and the host serves on with the image it runs.

use std::time::Duration;

use crate::clients::bridged;
use crate::fixtures::*;
use crate::handover::{copied_host_logging, first_pid, replace_binary, running_inode};
use crate::mcp::{self, Watcher, alive, call};

/// The uid of `nobody`.
const NOBODY: u32 = 65534;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_refuses_a_binary_in_a_directory_of_another_user_and_serves_on() {
    let dir = scratch("upgrade-untrusted");
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let exe = bin.join("taskhost");
    std::fs::copy(mcp::binary(), &exe).unwrap();
    let log = dir.path().join("host.log");
    let host = copied_host_logging(dir.path(), &exe, Some(&log), &[]);
    let host_pid = host.child.id();
    let (a, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let id = mcp::start(&a, "echo pid $$; exec sleep 1000").await;
    let pid = first_pid(&a, &id).await;
    // Another user owns the directory, and put a new build in it.
    std::os::unix::fs::chown(&bin, Some(NOBODY), Some(NOBODY)).unwrap();
    let planted = replace_binary(&exe);
    let running = running_inode(host_pid);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(host_pid as i32),
        nix::sys::signal::Signal::SIGHUP,
    )
    .unwrap();
    let refused = eventually(Duration::from_secs(20), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("not upgrading"))
    });
    let said = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(
        refused,
        "the host said nothing of a refusal; the running inode is {:?} (planted {planted}): {said}",
        running_inode(host_pid)
    );
    assert!(said.contains("is owned by another user"), "{said}");
    assert_eq!(running_inode(host_pid), running, "the old image runs on");
    assert_ne!(running_inode(host_pid), Some(planted));
    let listed = call(&a, "task_list", serde_json::json!({})).await;
    assert!(
        listed.contains(&id) && listed.contains("running"),
        "{listed}"
    );
    assert!(alive(pid), "the task runs on");
    drop(host);
    a.cancel().await.ok();
}
