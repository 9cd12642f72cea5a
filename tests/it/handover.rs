//! A restart loses nothing, with the real binary: a `--listen` host's running tasks outlive it (a
//! SIGKILL included) in its keeper, which drains their output into their kept files, and the next
//! host on the same state directory and address takes them back: same processes, every byte once,
//! the completion told once; with no successor within the grace they end as before.

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::clients::bridged;
use crate::fixtures::*;
use crate::mcp::{self, Client, SocketHost, Watcher, alive, call};

/// A call whose failure (the host restarted while it ran) is returned, not a panic.
async fn try_call(client: &Client, tool: &str, args: Value) -> Result<String, String> {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let result = client
        .peer()
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .map_err(|e| e.to_string())?;
    Ok(result
        .content
        .iter()
        .filter_map(|b| b.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n---\n"))
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
}

impl Seen {
    fn take(&mut self, id: &str, answer: &str) {
        let mut blocks = answer.split("\n---\n");
        if let Some(read) = blocks.next() {
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

/// Proves (a): a task printing a numbered line every 20 ms, its host SIGKILLed and another started
/// on the same socket and state: the task is the same process, the client (through `taskhost
/// connect`) reads every number exactly once and in order, then is told of its end once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_task_is_handed_to_the_next_host_after_a_sigkill_with_every_line_once() {
    let dir = scratch("handover-kill");
    let state = dir.join("state");
    let args = ["--no-watch", "--state", state.to_str().unwrap()];
    let mut host = SocketHost::start(&dir, &args);
    let (a, _) = bridged(&host.socket, Watcher::default(), &[]).await;
    let id = mcp::start(
        &a,
        "echo pid $$; for i in $(seq 1 150); do echo n$i; sleep 0.02; done; sleep 1",
    )
    .await;
    let mut seen = Seen::default();
    read_until(&a, &id, "n5", &mut seen).await;
    let pid: i32 = seen.lines[0]
        .strip_prefix("pid ")
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no pid line first: {:?}", seen.lines));
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    assert!(alive(pid), "the task outlives its host");
    let _next = SocketHost::start(&dir, &args);
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
    // The task sleeps a second after its last line: its end is told on a later answer, once.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while seen.notices == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the end was never told"
        );
        let answer = call(&a, "task_list", json!({})).await;
        seen.take(&id, &answer);
        // Polling pace for the task's last second.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = call(&a, "task_list", json!({})).await;
    seen.take(&id, &after);
    assert_eq!(seen.notices, 1, "told once");
    assert!(after.contains(&format!("{id} [bash] completed")), "{after}");
    a.cancel().await.expect("close");
}
