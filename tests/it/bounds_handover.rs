//! A bounded task handed over keeps its bounds, and the host that takes it over settles it as the
//! host that started it would have: a task over its memory limit after an upgrade settles `killed`
//! naming the limit, and its cgroups are gone once it ended.

use std::path::PathBuf;
use std::time::Duration;

use crate::clients::bridged;
use crate::fixtures::*;
use crate::handover::{copied_host_logging, first_pid, upgrade_in_place};
use crate::mcp::{self, Watcher};

/// The directory of the memory cgroup process `pid` is in, where it is one of the host's task
/// cgroups (`taskhost-…`).
fn task_memory_cgroup(pid: i32) -> Option<PathBuf> {
    let lines = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    lines.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        let memory = controllers.split(',').any(|c| c == "memory");
        let v2 = controllers.is_empty();
        let name = path.rsplit('/').next()?;
        if !name.starts_with("taskhost-") || !(memory || v2) {
            return None;
        }
        let point = cgroup_mount(v2, "memory")?;
        Some(point.join(path.trim_start_matches('/')))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_task_handed_over_is_ended_at_its_memory_limit_and_its_cgroups_removed() {
    let dir = scratch("bounds-handover");
    let config = dir.join("taskhost.toml");
    std::fs::write(&config, "[policy.default]\nmemory_max = \"256M\"\n").unwrap();
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let exe = bin.join("taskhost");
    std::fs::copy(mcp::binary(), &exe).unwrap();
    let host = copied_host_logging(&dir, &exe, None, &["--config", config.to_str().unwrap()]);
    let host_pid = host.child.id();
    let (client, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let go = dir.join("go");
    let command = format!(
        "echo pid $$; while [ ! -e {go} ]; do sleep 0.05; done; \
         head -c 1G /dev/zero | tail > /dev/null",
        go = go.display()
    );
    let id = mcp::start(&client, &command).await;
    let pid = first_pid(&client, &id).await;
    let cgroup = task_memory_cgroup(pid).expect("the task is in a memory cgroup of its own");

    upgrade_in_place(host_pid, &exe);
    // The new image has taken the task back once its list shows it running.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let listed = mcp::try_call(&client, "task_list", serde_json::json!({})).await;
        if listed.is_ok_and(|l| l.contains(&id) && l.contains("running")) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the task was not taken back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    std::fs::write(&go, "").unwrap();
    let settled = settled(&client, &id).await;
    assert!(settled.contains("memory limit 256 MiB"), "{settled}");
    assert!(settled.contains("killed"), "{settled}");
    assert!(
        eventually(Duration::from_secs(10), || !cgroup.exists()),
        "{} stays",
        cgroup.display()
    );
    drop(host);
    client.cancel().await.ok();
}

/// Found by an attacker: a bounded task whose leader ended while no host ran (its keeper reaped
/// it) had its cgroups looked up through the leader's `/proc` entry, which was gone, so the
/// successor found none: a process the task had detached (`setsid`) ran on with no task, its
/// cgroups never removed. The successor now finds them by their names and ends what is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_tasks_detached_process_ends_with_it_when_it_ended_while_no_host_ran() {
    let dir = scratch("bounds-handover-gone");
    let config = dir.join("taskhost.toml");
    std::fs::write(&config, "[policy.default]\nmemory_max = \"256M\"\n").unwrap();
    let args = ["--config", config.to_str().unwrap()];
    let mut host = copied_host_logging(&dir, &mcp::binary(), None, &args);
    let (client, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let go = dir.join("go");
    let command = format!(
        "setsid sleep 600 & echo pid $!; while [ ! -e {go} ]; do sleep 0.05; done; exit 0",
        go = go.display()
    );
    let id = mcp::start(&client, &command).await;
    let detached = first_pid(&client, &id).await;
    let cgroup = task_memory_cgroup(detached).expect("the task's memory cgroup");
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    std::fs::write(&go, "").unwrap();
    // The leader ends while no host runs: only the detached process is left in the cgroup.
    let only_detached = || {
        std::fs::read_to_string(cgroup.join("cgroup.procs"))
            .is_ok_and(|procs| procs.split_whitespace().eq([detached.to_string().as_str()]))
    };
    assert!(eventually(Duration::from_secs(20), only_detached));
    let _next = copied_host_logging(&dir, &mcp::binary(), None, &args);
    let settled = settled(&client, &id).await;
    assert!(settled.contains("exit code: 0"), "{settled}");
    assert!(
        eventually(Duration::from_secs(10), || !mcp::alive(detached)),
        "the detached process {detached} outlived its task"
    );
    assert!(
        eventually(Duration::from_secs(10), || !cgroup.exists()),
        "{} stays",
        cgroup.display()
    );
    client.cancel().await.ok();
}

/// Task `id`'s read once it no longer runs, waited for a second at a time (a wait the handover
/// cuts short is asked again), at most a minute; the last read else.
async fn settled(client: &mcp::Client, id: &str) -> String {
    let mut read = String::new();
    for _ in 0..60 {
        read = mcp::read_waiting(client, id, 1_000).await;
        if !read.contains("[status: running]") {
            break;
        }
    }
    read
}
