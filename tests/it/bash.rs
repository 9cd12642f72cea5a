//! The bash producer and the tasks surface with real processes.

use std::time::Duration;

use serde_json::json;

use crate::fixtures::*;

/// A host with the real bash and tasks plugins, and one open session `s`.
pub(crate) fn host(name: &str, bash_config: &str) -> Fixture {
    let f = Fixture::new(name);
    let bash = plugin_copy("taskhost_plugin_bash", &f.dir, &format!("bash_{name}"));
    f.host
        .plugins()
        .load(&bash, Some(bash_config.to_owned()), false)
        .expect("bash");
    f.load("taskhost_plugin_tasks", &format!("tasks_{name}"));
    f.host.sessions().open("s");
    f
}

pub(crate) fn start(f: &Fixture, session: &str, command: &str) -> String {
    let text = f.call(
        "bash",
        session,
        json!({"command": command, "run_in_background": true}),
    );
    text.strip_prefix("started background task ")
        .unwrap_or_else(|| panic!("not started: {text}"))
        .to_owned()
}

pub(crate) fn wait(f: &Fixture, session: &str, id: &str) -> String {
    f.call(
        "task_output",
        session,
        json!({"task_id": id, "wait": true, "timeout_ms": 20000}),
    )
}

/// The new output of a `task_output` result (nothing for `(no new output)`).
pub(crate) fn new_output(text: &str) -> &str {
    let body = split_status(text).0;
    if body == "(no new output)\n" {
        ""
    } else {
        body
    }
}

/// The pid a task printed as its first line of output.
pub(crate) fn first_line_pid(f: &Fixture, id: &str) -> i32 {
    let mut text = String::new();
    assert!(eventually(Duration::from_secs(5), || {
        text.push_str(new_output(&f.call(
            "task_output",
            "s",
            json!({"task_id": id}),
        )));
        text.contains('\n')
    }));
    text.lines()
        .next()
        .unwrap_or_default()
        .trim()
        .parse()
        .expect("a pid")
}

pub(crate) fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

#[test]
fn a_background_command_reports_stdout_stderr_and_its_exit_code() {
    let f = host("exit", "{}");
    let id = start(&f, "s", "echo hi; echo err >&2; exit 3");
    assert_eq!(id, "bash-1");
    assert_eq!(
        wait(&f, "s", &id),
        "hi\n[stderr]\nerr\n[status: completed, exit code: 3]"
    );
    assert_eq!(
        f.call("task_output", "s", json!({"task_id": id})),
        "(no new output)\n[status: completed, exit code: 3]"
    );
}

#[test]
fn a_foreground_command_returns_its_output_then_the_exit_code() {
    // Without promotion, so the timeout kills (promotion: tests/it/interactive.rs).
    let f = host("fg", r#"{"promote_on_timeout": false}"#);
    assert_eq!(
        f.call("bash", "s", json!({"command": "echo out; exit 2"})),
        "out\n[exit code: 2]"
    );
    assert_eq!(
        f.call("bash", "s", json!({"command": "printf x"})),
        "x\n[exit code: 0]"
    );
    let timed = f.call(
        "bash",
        "s",
        json!({"command": "sleep 5", "timeout_ms": 100}),
    );
    assert_eq!(timed, "[timed out after 100 ms]\n[killed: SIGTERM]");
    assert_eq!(
        f.host.processes().spill_files(),
        0,
        "runs that never spilled leave nothing to remove"
    );
}

#[test]
fn task_kill_ends_a_command_by_sigterm_and_a_self_signal_reads_the_same() {
    let f = host("kill", "{}");
    let id = start(&f, "s", "sleep 60");
    assert_eq!(
        f.call("task_output", "s", json!({"task_id": id})),
        "(no new output)\n[status: running]"
    );
    assert_eq!(
        f.call("task_kill", "s", json!({"task_id": id, "reason": "test"})),
        format!("requested cancellation of task {id}")
    );
    assert_eq!(
        wait(&f, "s", &id),
        "(no new output)\n[status: killed, signal: SIGTERM]"
    );
    assert_eq!(
        f.call("task_kill", "s", json!({"task_id": id})),
        format!("task {id} had already finished [status: killed, signal: SIGTERM]")
    );
    let own = start(&f, "s", "kill -TERM $$");
    assert_eq!(
        wait(&f, "s", &own),
        "(no new output)\n[status: killed, signal: SIGTERM]"
    );
}

#[test]
fn a_term_trapping_command_dies_by_sigkill_after_the_grace() {
    let f = host("trap", r#"{"grace_ms": 300}"#);
    let id = start(&f, "s", "trap '' TERM; echo ready; sleep 30");
    // The trap is set once `ready` is printed.
    assert_eq!(
        f.call(
            "task_output",
            "s",
            json!({"task_id": id, "wait_for": "ready", "timeout_ms": 20000}),
        ),
        "ready\n[status: running]"
    );
    f.call("task_kill", "s", json!({"task_id": id}));
    assert_eq!(
        wait(&f, "s", &id),
        "(no new output)\n[status: killed, signal: SIGKILL]"
    );
}

#[test]
fn a_killed_group_and_a_finished_one_leave_no_grandchild_behind() {
    let f = host("orphans", r#"{"grace_ms": 300}"#);
    let killed = start(&f, "s", "sleep 1000 & echo $!; wait");
    let finished = start(&f, "s", "sleep 1000 & echo $!");
    let (a, b) = (first_line_pid(&f, &killed), first_line_pid(&f, &finished));
    f.call("task_kill", "s", json!({"task_id": killed}));
    wait(&f, "s", &killed);
    wait(&f, "s", &finished);
    assert!(
        eventually(Duration::from_secs(5), || !alive(a) && !alive(b)),
        "grandchildren alive: {a} {b}"
    );
}

#[test]
fn ten_megabytes_of_output_spill_to_a_private_file_and_the_read_says_so() {
    use std::os::unix::fs::PermissionsExt;
    let f = host("spill", "{}");
    let id = start(&f, "s", "head -c 10000000 /dev/zero | tr '\\0' 'a'");
    let text = wait(&f, "s", &id);
    let (body, status) = split_status(&text);
    assert_eq!(status, "[status: completed, exit code: 0]");
    let marker = "[some output was dropped from memory; full output: ";
    let at = body
        .find(marker)
        .unwrap_or_else(|| panic!("no drop notice in {} bytes", body.len()));
    assert_eq!(
        at, 64_001,
        "the whole tail, then a newline, then the notice"
    );
    assert!(body[..64_000].bytes().all(|b| b == b'a'));
    let path = body[at + marker.len()..]
        .trim_end()
        .trim_end_matches(']')
        .to_owned();
    let meta = std::fs::metadata(&path).expect("spill file");
    assert_eq!(meta.len(), 10_000_000);
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(
        f.host.processes().spill_files(),
        1,
        "only the stdout spill exists"
    );
    f.rt.block_on(f.host.close_session("s"));
    assert!(
        !std::path::Path::new(&path).exists(),
        "spill file removed with its session"
    );
}

/// The spill file a read names (paths here hold no space).
fn spill_named(text: &str) -> Option<String> {
    let marker = "[some output was dropped from memory; full output: ";
    let at = text.find(marker)?;
    text[at + marker.len()..]
        .split([' ', ']'])
        .next()
        .map(str::to_owned)
}

/// Proves: past the spill cap the file stays at the cap, holding the head and the latest output, and
/// the read says so.
#[test]
fn output_past_the_spill_cap_keeps_the_head_and_the_tail_and_the_read_says_so() {
    let f = host("cap", r#"{"max_spill_bytes": 100000}"#);
    let id = start(
        &f,
        "s",
        "head -c 1000000 /dev/zero | tr '\\0' 'b'; echo; echo end",
    );
    let text = wait(&f, "s", &id);
    let path = spill_named(&text).unwrap_or_else(|| panic!("{}", &text[text.len() - 200..]));
    let file = std::fs::read(&path).expect("the spill file stays");
    assert!(file.len() <= 100_000, "{} bytes", file.len());
    assert!(file.starts_with(&[b'b'; 25_000]) && file.ends_with(b"bbb\nend\n"));
}

/// Proves: past the cap, output reaches the spill file in batches, and a batch is written once the
/// task goes quiet: the file ends with the latest line while the task is still running. (The pauses
/// put the last line in a batch of its own, written only because the pipe went quiet.)
#[test]
fn a_rolling_spill_file_catches_up_when_the_task_goes_quiet() {
    let f = host("quiet", r#"{"max_spill_bytes": 100000}"#);
    let id = start(
        &f,
        "s",
        "head -c 1000000 /dev/zero | tr '\\0' 'b'; sleep 0.2; echo; sleep 0.02; echo end; exec sleep 600",
    );
    let mut path = None;
    assert!(eventually(Duration::from_secs(30), || {
        let text = f.call("task_output", "s", json!({"task_id": id}));
        path = path.take().or_else(|| spill_named(&text));
        path.as_ref()
            .is_some_and(|p| std::fs::read(p).is_ok_and(|file| file.ends_with(b"bbb\nend\n")))
    }));
    let file = std::fs::read(path.unwrap()).unwrap();
    assert!(file.len() <= 100_000, "{} bytes", file.len());
    assert!(f.call("task_list", "s", json!({})).contains("running"));
    f.call("task_kill", "s", json!({"task_id": id}));
}

/// Run by `credentials_never_reach_a_child` in a child test process whose environment holds a token.
#[test]
#[ignore = "run by credentials_never_reach_a_child, in a child process with a token set"]
fn scrub_probe() {
    assert!(std::env::var("MY_API_TOKEN").is_ok(), "the parent set it");
    let f = host("scrub", "{}");
    let out = f.call(
        "bash",
        "s",
        json!({"command": "echo ${MY_API_TOKEN:-absent} $NO_COLOR $TERM $PAGER $GIT_PAGER"}),
    );
    assert_eq!(out, "absent 1 dumb cat cat\n[exit code: 0]");
}

#[test]
fn credentials_never_reach_a_child() {
    let exe = std::env::current_exe().unwrap();
    let status = std::process::Command::new(exe)
        .args(["--exact", "bash::scrub_probe", "--ignored", "--nocapture"])
        .env("MY_API_TOKEN", "hunter2")
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn a_completion_notice_reaches_its_owner_once_and_never_after_a_kill_or_a_wait() {
    let f = host("notice", "{}");
    f.host.sessions().open("other");
    let id = start(&f, "s", "echo done");
    // Wait for settlement without reporting it (get does not mark it reported).
    assert!(eventually(Duration::from_secs(10), || f
        .host
        .registry()
        .get(&id, f.host.sessions().agent("s").as_ref())
        .unwrap()
        .status
        .is_terminal()));
    let mut notices = Vec::new();
    assert!(eventually(Duration::from_secs(5), || {
        notices.extend(f.host.sessions().take_notices("s"));
        !notices.is_empty()
    }));
    std::thread::sleep(Duration::from_millis(100));
    notices.extend(f.host.sessions().take_notices("s"));
    assert_eq!(
        notices,
        [format!(
            "background task {id} (bash: echo done) finished [status: completed, exit code: 0]. Read its output with task_output."
        )]
    );
    assert!(f.host.sessions().take_notices("other").is_empty());

    let killed = start(&f, "s", "sleep 30");
    f.call("task_kill", "s", json!({"task_id": killed}));
    let waited = start(&f, "s", "sleep 0.2");
    wait(&f, "s", &waited);
    wait(&f, "s", &killed);
    std::thread::sleep(Duration::from_millis(200));
    assert!(f.host.sessions().take_notices("s").is_empty());
}

#[test]
fn two_sessions_are_isolated() {
    let f = host("isolation", "{}");
    f.host.sessions().open("other");
    let id = start(&f, "s", "echo secret-label-output");
    assert_eq!(
        f.call("task_output", "other", json!({"task_id": id})),
        format!("Error: unknown task {id}")
    );
    assert_eq!(
        f.call("task_kill", "other", json!({"task_id": id})),
        format!("Error: unknown task {id}")
    );
    assert_eq!(
        f.call("task_list", "other", json!({})),
        "(no background tasks)"
    );
    wait(&f, "s", &id);
    assert_eq!(
        f.call("task_list", "s", json!({})),
        format!("{id} [bash] completed — echo secret-label-output")
    );
}

#[test]
fn bad_input_gets_a_clear_error() {
    let f = host("input", "{}");
    assert_eq!(
        f.call("task_output", "s", json!({"task_id": ""})),
        "Error: invalid task_id: expected a non-empty string, got \"\""
    );
    assert_eq!(
        f.call("task_output", "s", json!({"task_id": "bash-99"})),
        "Error: unknown task bash-99"
    );
    let id = start(&f, "s", "sleep 5");
    assert_eq!(
        f.call(
            "task_output",
            "s",
            json!({"task_id": id, "wait": true, "timeout_ms": 0})
        ),
        "Error: invalid wait timeout: expected a positive number of milliseconds, got 0"
    );
    assert_eq!(
        f.call("bash", "s", json!({})),
        "Error: invalid arguments: missing field `command`"
    );
    assert_eq!(
        f.call("bash", "s", json!({"command": "  "})),
        "Error: invalid command: expected a non-empty string, got \"  \""
    );
    assert_eq!(
        f.call(
            "bash",
            "s",
            json!({"command": "true", "timeout_ms": "soon"})
        ),
        "Error: invalid timeout_ms: expected u64, got \"soon\""
    );
    assert_eq!(
        f.call("task_output", "s", json!({"task_id": 7})),
        "Error: invalid task_id: expected a string, got 7"
    );
    assert_eq!(
        f.call("no_such_tool", "s", json!({})),
        "call error: unknown tool no_such_tool"
    );
    f.call("task_kill", "s", json!({"task_id": id}));
}

#[test]
fn closing_a_session_kills_its_processes() {
    let f = host("close", "{}");
    let id = start(&f, "s", "echo $$; sleep 1000");
    let pid = first_line_pid(&f, &id);
    f.rt.block_on(f.host.close_session("s"));
    assert!(eventually(Duration::from_secs(5), || !alive(pid)));
    assert_eq!(f.host.processes().live(), 0);
}

#[test]
fn reloading_bash_and_tasks_while_tasks_stream_loses_no_byte() {
    let f = host("reload", "{}");
    let bash = f
        .host
        .plugins()
        .paths()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("bash_reload"))
        .unwrap();
    let tasks = f
        .host
        .plugins()
        .paths()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("tasks_reload"))
        .unwrap();
    let ids: Vec<String> = (0..4)
        .map(|_| {
            start(
                &f,
                "s",
                "for i in $(seq 1 300); do echo line $i; sleep 0.002; done",
            )
        })
        .collect();
    let mut outputs = vec![String::new(); ids.len()];
    for round in 0..10 {
        let path = if round % 2 == 0 { &bash } else { &tasks };
        f.host.plugins().load(path, None, false).expect("reload");
        for (i, id) in ids.iter().enumerate() {
            outputs[i].push_str(new_output(&f.call(
                "task_output",
                "s",
                json!({"task_id": id}),
            )));
        }
    }
    let expected: String = (1..=300).map(|i| format!("line {i}\n")).collect();
    for (i, id) in ids.iter().enumerate() {
        let text = wait(&f, "s", id);
        let (rest, status) = split_status(&text);
        outputs[i].push_str(rest.strip_prefix("(no new output)\n").unwrap_or(rest));
        assert_eq!(status, "[status: completed, exit code: 0]");
        assert_eq!(outputs[i], expected, "output of {id}");
    }
}

/// What the attacker's tasks printed: clear screen, a window title, an OSC 8 link, an OSC 52
/// clipboard write, DCS and APC strings, C0 and C1 controls, and a raw 8-bit CSI.
const HOSTILE: &str = r"printf '\033[2J\033[Hone\033]0;title\007 \033]8;;http://x\033\\link\033]8;;\033\\ \033]52;c;ZXZpbA==\007two\033Pq#0\033\\ \033_apc\033\\three\001\002\033\n\302\233\061mfour \23331mfive\233m\n'";

/// Asserts `text` holds the hostile output cleaned: its words, no escape and no control but
/// newline and tab.
fn assert_clean(text: &str) {
    assert!(text.contains("one link two three\nfour five\n"), "{text:?}");
    assert!(
        !text
            .chars()
            .any(|c| c.is_control() && c != '\n' && c != '\t'),
        "{text:?}"
    );
    assert!(!text.contains('\u{fffd}'), "{text:?}");
}

/// Proves: escape sequences and controls in a task's output never reach the model, in a foreground
/// result, a background read, or a read of a task on a terminal.
#[test]
fn escapes_and_controls_never_reach_the_model() {
    let f = host("escapes", "{}");
    assert_clean(&f.call("bash", "s", json!({"command": HOSTILE})));
    let id = start(&f, "s", HOSTILE);
    assert_clean(&wait(&f, "s", &id));
    let tty = f.call(
        "bash",
        "s",
        json!({"command": HOSTILE, "run_in_background": true, "tty": true}),
    );
    let id = tty
        .strip_prefix("started background task ")
        .unwrap_or_else(|| panic!("not started: {tty}"));
    assert_clean(&wait(&f, "s", id));
}
