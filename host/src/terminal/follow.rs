//! `taskhost follow`: a task's output as it comes, then its status line, through restarts of the
//! host.
//!
//! Each round is one waiting read (`task_output` with `wait_for` any character): it returns as
//! soon as there is unread output, or the task ended, or its timeout passed. A read that fails
//! because the host went away dials again, as the same person, until `--reconnect-for-ms` passes;
//! the next host serves the task on (its reads going on where they stood) or says how it ended.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use serde_json::json;
use taskhost_registry::TaskStatus;

use super::link::{self, Client, Target};
use super::tasks::{call_tool, text_of};
use crate::client_cli::Outcome;

/// How long one waiting read lasts at most.
const ROUND_MS: u64 = 30_000;

/// `taskhost follow`: prints task `id`'s unread output until it ends, then its status line; exit 0
/// when it completed with exit code 0.
///
/// # Errors
/// `(2, why)` for a task the host does not know as the person's; `(1, why)` when the host cannot
/// be reached, or stayed gone past `reconnect_for`.
pub(super) async fn follow(target: &Target, id: &str, reconnect_for: Duration) -> Outcome {
    let mut client = link::open(target).await.map_err(|e| (1, e))?;
    let arguments = json!({"task_id": id, "wait_for": "[\\s\\S]", "timeout_ms": ROUND_MS});
    loop {
        let result = match call_tool(&client, "task_output", arguments.clone()).await {
            Ok(result) => result,
            Err(_) => {
                client = reopen(target, reconnect_for).await?;
                continue;
            }
        };
        let text = text_of(&result);
        if result.is_error == Some(true) {
            return Err((2, text));
        }
        let (body, status) = split_read(&text);
        crate::out::bytes(body.as_bytes());
        if let Some(ended) = ended(status) {
            crate::outln!("{status}");
            let _ = client.cancel().await;
            return Ok(if ended {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
    }
}

/// Dials the host again until it answers or `reconnect_for` passes.
async fn reopen(target: &Target, reconnect_for: Duration) -> Result<Client, (u8, String)> {
    let deadline = Instant::now() + reconnect_for;
    let mut pause = Duration::from_millis(20);
    loop {
        match link::open(target).await {
            Ok(client) => return Ok(client),
            Err(e) if Instant::now() >= deadline => {
                return Err((1, format!("the host is gone ({e})")));
            }
            Err(_) => {
                // Retry pacing while the host restarts, not a wait for an event.
                tokio::time::sleep(pause.min(deadline.saturating_duration_since(Instant::now())))
                    .await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
        }
    }
}

/// A read's output and its status line (`[status: ...]`, the read's last line); the output is
/// empty when the read says there was none.
fn split_read(text: &str) -> (&str, &str) {
    let at = text
        .match_indices("[status: ")
        .map(|(i, _)| i)
        .filter(|&i| i == 0 || text[..i].ends_with('\n'))
        .last();
    let Some(at) = at else {
        return (text, "");
    };
    let (body, status) = text.split_at(at);
    let body = if body == "(no new output)\n" {
        ""
    } else {
        body
    };
    (body, status.trim_end())
}

/// `Some(completed with exit code 0)` when `status_line` says the task ended, `None` while it
/// runs (or waits for its turn).
fn ended(status_line: &str) -> Option<bool> {
    let inner = status_line.strip_prefix("[status: ")?.trim_end_matches(']');
    let (name, detail) = inner.split_once(", ").unwrap_or((inner, ""));
    let status = TaskStatus::parse(name).filter(|s| s.is_terminal())?;
    Some(status == TaskStatus::Completed && detail == "exit code: 0")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_splits_into_its_output_and_its_status_line() {
        assert_eq!(
            split_read("one\ntwo\n[status: running]"),
            ("one\ntwo\n", "[status: running]")
        );
        assert_eq!(
            split_read("(no new output)\n[status: completed, exit code: 0]"),
            ("", "[status: completed, exit code: 0]")
        );
        assert_eq!(
            split_read("a [status: x]\n[status: killed, signal: SIGTERM]"),
            ("a [status: x]\n", "[status: killed, signal: SIGTERM]")
        );
    }

    #[test]
    fn only_a_completed_task_with_exit_code_0_follows_to_success() {
        assert_eq!(ended("[status: running]"), None);
        assert_eq!(ended("[status: queued]"), None);
        assert_eq!(ended("[status: completed, exit code: 0]"), Some(true));
        assert_eq!(ended("[status: completed, exit code: 3]"), Some(false));
        assert_eq!(ended("[status: lost, the host stopped]"), Some(false));
    }
}
