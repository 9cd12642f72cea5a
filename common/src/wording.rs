//! The words the model reads, in one place: the status line every read ends with, the body of a
//! read, the completion notice, the answers of the task tools, how a foreground run ended, and the
//! common parts of a process read. Functions of plain values: the host and the plugins call the same
//! ones, and the boundary carries data, not text to agree on.

/// `[status: <status>]`, or `[status: <status>, <detail>]` with a detail (an exit code, a signal,
/// why it failed).
pub fn status_line(status: &str, detail: Option<&str>) -> String {
    match detail {
        Some(d) => format!("[status: {status}, {d}]"),
        None => format!("[status: {status}]"),
    }
}

/// What a read of a task returns: its new output (`(no new output)` when there is none), then on a
/// line of its own the status line.
pub fn read_reply(body: &str, status_line: &str) -> String {
    let body = if body.is_empty() {
        "(no new output)"
    } else {
        body
    };
    format!("{body}{}{status_line}", line_break(body))
}

/// The notice an owner gets when its task settled and nobody reported it.
pub fn completion_notice(id: &str, kind: &str, label: &str, status_line: &str) -> String {
    format!(
        "background task {id} ({kind}: {label}) finished {status_line}. Read its output with task_output."
    )
}

/// The answer to a started background task, as the model reads it. Nothing parses it: a producer
/// gives the id as data (`ToolResult::started`).
pub fn started(what: &str, id: &str) -> String {
    format!("started background {what} {id}")
}

/// The answer to a start that was recorded and waits, queued (issue 44): `note` says for what
/// (`2 ahead of it`, `waiting for bash-3`).
pub fn queued(what: &str, id: &str, note: &str) -> String {
    format!("queued background {what} {id} ({note})")
}

/// A queued task's detail: how many tasks run before it.
pub fn ahead_note(ahead: usize) -> String {
    format!("{ahead} ahead of it")
}

/// A queued task's detail while the tasks it runs after have not all ended.
pub fn waiting_note(ids: &[String]) -> String {
    format!("waiting for {}", ids.join(", "))
}

/// The detail of a task that did not run because task `id`, which it waited for, did not
/// complete with exit 0 (`how`: its status line's inside, `completed, exit code: 1`).
pub fn not_run_after(id: &str, how: &str) -> String {
    format!("did not run: {id}, which it waited for, did not complete with exit 0 ({how})")
}

/// The answer to a kill of a live task.
pub fn kill_requested(id: &str) -> String {
    format!("requested cancellation of task {id}")
}

/// The answer to a kill of a task that had already finished.
pub fn already_finished(id: &str, status_line: &str) -> String {
    format!("task {id} had already finished {status_line}")
}

/// One line of the task list.
pub fn list_line(id: &str, kind: &str, status: &str, label: &str) -> String {
    format!("{id} [{kind}] {status} — {label}")
}

/// The task list when there is none.
pub const NO_TASKS: &str = "(no background tasks)";

/// A process's end as a task's detail: `exit code: N`.
pub fn exit_detail(code: i32) -> String {
    format!("exit code: {code}")
}

/// A process's end by a signal as a task's detail: `signal: SIGTERM`.
pub fn signal_detail(signal: &str) -> String {
    format!("signal: {signal}")
}

/// How a foreground run ended, as the marker after its output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForegroundEnd<'a> {
    /// It exited with a code.
    Exited(i32),
    /// A signal ended it.
    Signalled(&'a str),
    /// It was ended before an exit was seen.
    Ended,
}

/// A foreground run's output, then on lines of their own what happened to it: `[timed out after N
/// ms]`, `[cancelled]`, and its end (`[exit code: N]`, `[killed: SIG]`, `[killed before exit]`).
pub fn foreground_reply(
    output: &str,
    timed_out_after_ms: Option<u64>,
    cancelled: bool,
    end: ForegroundEnd<'_>,
) -> String {
    let mut text = output.to_owned();
    text.push_str(line_break(&text));
    if let Some(ms) = timed_out_after_ms {
        text.push_str(&format!("[timed out after {ms} ms]\n"));
    }
    if cancelled {
        text.push_str("[cancelled]\n");
    }
    match end {
        ForegroundEnd::Exited(code) => text.push_str(&format!("[exit code: {code}]")),
        ForegroundEnd::Signalled(signal) => text.push_str(&format!("[killed: {signal}]")),
        ForegroundEnd::Ended => text.push_str("[killed before exit]"),
    }
    text
}

/// A foreground run that outlived its timeout and became a background task.
pub fn promoted_reply(output: &str, timeout_ms: u64, id: &str) -> String {
    format!(
        "{output}{}[still running after {timeout_ms} ms: continues as background task {id}; read it with task_output]",
        line_break(output)
    )
}

/// The reply to a foreground call whose host began an upgrade while it ran: it goes on as
/// background task `id`, or, with none, it was ended.
pub fn restarted_reply(output: &str, id: Option<&str>) -> String {
    let what = match id {
        Some(id) => format!(
            "the taskhost host is restarting (an upgrade): this command continues as background task {id}; read it with task_output"
        ),
        None => "the taskhost host restarted (an upgrade) while this ran: the command was ended; run it again".to_owned(),
    };
    format!("{output}{}[{what}]", line_break(output))
}

/// The error a bridge answers a call with when its host went away while the call ran: the
/// command the call ran continues as background task `id` under the next host, or, with none,
/// the call may be retried.
pub fn host_gone_error(id: Option<&str>) -> String {
    match id {
        Some(id) => format!(
            "the taskhost host restarted (it stopped unexpectedly) while this command ran: the command continues as background task {id}; read it with task_output"
        ),
        None => "the taskhost host restarted while this request ran: it can be retried (a task it started is in task_list)".to_owned(),
    }
}

/// The header between a process's stdout and its stderr in a read.
pub const STDERR_HEADER: &str = "[stderr]\n";

/// The note after a read whose output was partly dropped from memory: where all of it is (`files`,
/// already joined, or `(unavailable)`).
pub fn dropped_output(files: &str) -> String {
    format!("[some output was dropped from memory; full output: {files}]")
}

/// The notice an owner gets when the keeper that held its running tasks `ids` (joined) for a
/// successor died: they run on, but a crash of the host now ends them.
pub fn unheld_notice(ids: &str) -> String {
    format!(
        "taskhost's keeper died: background task(s) {ids} keep running but lost their crash protection (should the host stop or crash, they end with it instead of being handed to the next host)"
    )
}

/// The note after a read that took at most its share of a handed-over task's kept output:
/// `bytes` more are unread, for the next read.
pub fn more_kept_output(bytes: u64) -> String {
    format!("[{bytes} more bytes of output are unread; read again for them]")
}

/// A newline unless `text` is empty or already ends with one.
pub fn line_break(text: &str) -> &'static str {
    if text.is_empty() || text.ends_with('\n') {
        ""
    } else {
        "\n"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_ends_with_its_status_line_on_a_line_of_its_own() {
        let line = status_line("completed", Some("exit code: 0"));
        assert_eq!(line, "[status: completed, exit code: 0]");
        assert_eq!(
            read_reply("", &line),
            "(no new output)\n[status: completed, exit code: 0]"
        );
        assert_eq!(
            read_reply("a\n", "[status: running]"),
            "a\n[status: running]"
        );
        assert_eq!(read_reply("a", "[status: running]"), "a\n[status: running]");
    }

    #[test]
    fn a_foreground_reply_says_how_the_run_ended() {
        assert_eq!(
            foreground_reply("hi", None, false, ForegroundEnd::Exited(0)),
            "hi\n[exit code: 0]"
        );
        assert_eq!(
            foreground_reply("", Some(5), false, ForegroundEnd::Signalled("SIGTERM")),
            "[timed out after 5 ms]\n[killed: SIGTERM]"
        );
        assert_eq!(
            foreground_reply("x\n", None, true, ForegroundEnd::Ended),
            "x\n[cancelled]\n[killed before exit]"
        );
        assert_eq!(
            promoted_reply("x", 10, "bash-1"),
            "x\n[still running after 10 ms: continues as background task bash-1; read it with task_output]"
        );
    }
}
