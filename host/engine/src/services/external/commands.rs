//! The commands an external task runs through the process service: the start, each poll, the
//! cancel; and what their answers mean.

use std::time::Duration;

use taskhost_registry::TaskOutcome;

use crate::process::{Exit, ProcessService, ProcessSpec};

/// How long one start, poll or cancel command may run.
const COMMAND_LIMIT: Duration = Duration::from_secs(60);

/// Runs `command` (bash) for `session` to its end; its stdout, or why it failed.
pub(super) async fn run_command(
    processes: &ProcessService,
    session: &str,
    command: &str,
) -> Result<String, String> {
    let process = processes
        .spawn(&ProcessSpec::new(command), session)
        .map_err(|e| e.to_string())?;
    let exit = match tokio::time::timeout(COMMAND_LIMIT, process.wait()).await {
        Ok(exit) => exit,
        Err(_) => {
            process.kill();
            process.wait().await;
            return Err(format!("{command:?} did not end within {COMMAND_LIMIT:?}"));
        }
    };
    let (out, err) = process.read_streams();
    match exit {
        Exit::Code(0) => Ok(out),
        Exit::Code(c) => Err(format!("{} (exit code {c})", err.trim())),
        other => Err(format!("{} ({other:?})", err.trim())),
    }
}

/// The work's id as the start command printed it: its last non-empty line, which must be safe to put
/// into a shell command.
pub(super) fn work_id(stdout: &str) -> Result<String, String> {
    let id = stdout
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or_default();
    let safe = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if safe {
        Ok(id.to_owned())
    } else {
        Err(format!(
            "the start command printed no usable id (letters, digits, '.', '_', '-'): {:?}",
            taskhost_registry::excerpt(stdout.trim())
        ))
    }
}

/// What a poll answered.
pub(super) fn parse_state(line: &str) -> Option<TaskOutcome> {
    let line = line.trim();
    let (word, detail) = line.split_once(' ').unwrap_or((line, ""));
    let with = |o: TaskOutcome| {
        if detail.is_empty() {
            o
        } else {
            o.with_detail(detail)
        }
    };
    match word {
        "completed" => Some(with(TaskOutcome::completed())),
        "killed" => Some(with(TaskOutcome::killed())),
        "failed" => Some(with(TaskOutcome::failed(detail))),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_is_the_last_line_and_must_be_shell_safe() {
        assert_eq!(work_id("Submitted\n1234\n\n"), Ok("1234".to_owned()));
        assert!(work_id("").is_err());
        assert!(work_id("12; rm -rf /").is_err());
    }

    #[test]
    fn a_poll_line_maps_to_an_outcome_or_to_still_running() {
        assert_eq!(parse_state("running"), None);
        assert_eq!(parse_state("PENDING"), None);
        let done = parse_state("completed exit code: 0").unwrap();
        assert_eq!(done.detail.as_deref(), Some("exit code: 0"));
        let failed = parse_state("failed TIMEOUT, exit code: 0, signal: 15").unwrap();
        assert_eq!(failed.status, taskhost_registry::TerminalStatus::Failed);
        assert_eq!(
            failed.detail.as_deref(),
            Some("TIMEOUT, exit code: 0, signal: 15")
        );
        assert_eq!(
            parse_state("killed").unwrap().status,
            taskhost_registry::TerminalStatus::Killed
        );
    }
}
