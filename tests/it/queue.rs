//! The queue (issue 44) with the real binary: `[tasks] max_running` runs tasks a few at a time,
//! principals take turns, `after` runs a task after others or fails it naming the one that failed,
//! a queued task can be killed without running, a SIGKILLed host's queue runs on the next host in
//! order, and the view lists queued tasks. Tasks record their own start and end (`date +%s%N`):
//! no assertion depends on how long anything took.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::fixtures::{eventually, scratch};
use crate::http_wire::Client;
use crate::mcp::{self, SocketHost, Watcher, read_waiting};

/// A command that prints its start, sleeps `seconds`, then prints its end (ns since the epoch).
fn timed(seconds: &str) -> String {
    format!("echo start $(date +%s%N); sleep {seconds}; echo end $(date +%s%N)")
}

/// The start and end a [`timed`] task printed.
fn span(output: &str) -> (u128, u128) {
    let at = |word: &str| {
        output
            .lines()
            .find_map(|l| l.strip_prefix(word)?.trim().parse::<u128>().ok())
            .unwrap_or_else(|| panic!("no {word} in {output}"))
    };
    (at("start "), at("end "))
}

/// A config file in `dir` with `[tasks] max_running = max` and no handover grace; its path.
fn config(dir: &Path, max: u64) -> String {
    let path = dir.join("queue.toml");
    std::fs::write(
        &path,
        format!("[tasks]\nmax_running = {max}\n[host]\nhandover_grace_ms = 0\n"),
    )
    .unwrap();
    path.display().to_string()
}

/// A host on a socket in `dir` with `[tasks] max_running = max` and its state in `dir/state`.
fn queue_host(dir: &Path, max: u64) -> SocketHost {
    let (config, state) = (config(dir, max), dir.join("state").display().to_string());
    SocketHost::start(dir, &["--no-watch", "--config", &config, "--state", &state])
}

/// Starts `args` (with `run_in_background`) over `client`; the answer's text and task id.
async fn start(client: &mcp::Client, mut args: serde_json::Value) -> (String, String) {
    args["run_in_background"] = json!(true);
    let answer = mcp::answer(client, "bash", args).await;
    let id = mcp::started_id(&answer);
    // Notices of tasks that ended meanwhile may ride along after the start's own sentence.
    let sentence = answer.text.split("\n---\n").next().unwrap_or_default();
    (sentence.to_owned(), id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_max_running_two_five_tasks_run_two_at_a_time_and_all_complete() {
    let dir = scratch("queue-two");
    let mut host = queue_host(&dir, 2);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let mut answers = Vec::new();
    for _ in 0..5 {
        answers.push(start(&client, json!({"command": timed("1")})).await);
    }
    assert!(
        answers[1].0.starts_with("started background task"),
        "{answers:?}"
    );
    assert_eq!(
        answers[2].0,
        format!("queued background task {} (0 ahead of it)", answers[2].1)
    );
    assert_eq!(
        answers[4].0,
        format!("queued background task {} (2 ahead of it)", answers[4].1)
    );
    let mut spans = Vec::new();
    for (_, id) in &answers {
        let output = read_waiting(&client, id, 30_000).await;
        assert!(
            output.ends_with("[status: completed, exit code: 0]"),
            "{output}"
        );
        spans.push(span(&output));
    }
    for (start, _) in &spans {
        let running = spans
            .iter()
            .filter(|(s, e)| s <= start && start < e)
            .count();
        assert!(running <= 2, "{running} ran at once: {spans:?}");
    }
    drop(client);
    host.stop();
}

#[test]
fn a_second_principals_single_task_runs_before_the_first_principals_fourth() {
    let dir = scratch("queue-turns");
    let config = config(&dir, 2);
    let (host, _, _) = crate::web::web_host(&dir, &["--no-watch", "--config", &config]);
    let (alice, bob) = (
        Client::new(&host, &host.token("alice")),
        Client::new(&host, &host.token("bob")),
    );
    let started = |client: &Client| {
        let answer = client.answer(
            "bash",
            json!({"command": timed("1"), "run_in_background": true}),
        );
        mcp::started_id(&answer)
    };
    let alices: Vec<String> = (0..4).map(|_| started(&alice)).collect();
    let bobs = started(&bob);
    let waited = |client: &Client, id: &str| {
        let text = client.call(
            "task_output",
            json!({"task_id": id, "wait": true, "timeout_ms": 30_000}),
        );
        // Notices of the principal's other tasks may follow the read, each in a block of its own.
        let read = text.split("\n---\n").next().unwrap_or_default();
        assert!(
            read.ends_with("[status: completed, exit code: 0]"),
            "{text}"
        );
        span(read)
    };
    let fourth = waited(&alice, &alices[3]);
    let single = waited(&bob, &bobs);
    assert!(
        single.0 < fourth.0,
        "bob's task began at {}, after alice's fourth at {}",
        single.0,
        fourth.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_runs_a_test_after_its_build_and_fails_it_naming_the_build_that_failed() {
    let dir = scratch("queue-after");
    let mut host = queue_host(&dir, 8);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let (_, build) = start(&client, json!({"command": timed("0.5")})).await;
    let (text, test) = start(&client, json!({"command": timed("0"), "after": [build]})).await;
    assert_eq!(
        text,
        format!("queued background task {test} (waiting for {build})")
    );
    let built = span(&read_waiting(&client, &build, 30_000).await);
    let tested = read_waiting(&client, &test, 30_000).await;
    assert!(
        tested.ends_with("[status: completed, exit code: 0]"),
        "{tested}"
    );
    assert!(
        built.1 <= span(&tested).0,
        "the test began before its build ended"
    );

    let (_, broken) = start(&client, json!({"command": "exit 1"})).await;
    let (_, skipped) = start(
        &client,
        json!({"command": "echo ran", "after": [broken.as_str()]}),
    )
    .await;
    let skipped_out = read_waiting(&client, &skipped, 30_000).await;
    assert!(!skipped_out.contains("ran\n"), "{skipped_out}");
    assert!(
        skipped_out.ends_with(&format!(
            "[status: failed, did not run: {broken}, which it waited for, did not complete with \
             exit 0 (completed, exit code: 1)]"
        )),
        "{skipped_out}"
    );
    drop(client);
    host.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cycle_and_another_owners_task_are_refused_and_nothing_is_recorded() {
    let dir = scratch("queue-refused");
    let mut host = queue_host(&dir, 8);
    let (alice, bob) = (
        mcp::socket_client(&host.socket, Watcher::default()).await,
        mcp::socket_client(&host.socket, Watcher::default()).await,
    );
    let (_, alices) = start(&alice, json!({"command": "sleep 30"})).await;
    let args =
        |after: &str| json!({"command": "true", "run_in_background": true, "after": [after]});
    let foreign = mcp::call(&bob, "bash", args(&alices)).await;
    assert!(
        foreign.starts_with(&format!("Error: after: unknown task {alices}")),
        "{foreign}"
    );
    // The next id is bash-2: a task naming it would wait for itself.
    let cycle = mcp::call(&alice, "bash", args("bash-2")).await;
    assert!(
        cycle.starts_with("Error: after: unknown task bash-2"),
        "{cycle}"
    );
    assert!(cycle.contains("no cycle can form"), "{cycle}");
    let listed = mcp::call(&bob, "task_list", json!({})).await;
    assert!(!listed.contains("bash-"), "{listed}");
    let (_, next) = start(&alice, json!({"command": "true"})).await;
    assert_eq!(next, "bash-2", "a refused start burns no id");
    mcp::call(&alice, "task_kill", json!({"task_id": alices})).await;
    drop((alice, bob));
    host.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_task_killed_never_runs() {
    let dir = scratch("queue-kill");
    let marker = dir.join("ran");
    let mut host = queue_host(&dir, 1);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let (_, first) = start(&client, json!({"command": "sleep 30"})).await;
    let touch = format!("touch {}", marker.display());
    let (text, queued) = start(&client, json!({"command": touch})).await;
    assert!(text.starts_with("queued background task"), "{text}");
    let output = mcp::call(&client, "task_output", json!({"task_id": queued})).await;
    assert!(
        output.ends_with("[status: queued, 0 ahead of it]"),
        "{output}"
    );
    mcp::call(&client, "task_kill", json!({"task_id": queued})).await;
    let killed = read_waiting(&client, &queued, 30_000).await;
    assert!(
        killed.ends_with("[status: killed, removed from the queue before it ran]"),
        "{killed}"
    );
    mcp::call(&client, "task_kill", json!({"task_id": first})).await;
    read_waiting(&client, &first, 30_000).await;
    let (_, after_it) = start(&client, json!({"command": "true"})).await;
    read_waiting(&client, &after_it, 30_000).await;
    assert!(!marker.exists(), "the killed task ran");
    drop(client);
    host.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkilled_hosts_three_queued_tasks_run_on_the_next_host_in_order() {
    let dir = scratch("queue-crash");
    let order = dir.join("order");
    let mut host = queue_host(&dir, 1);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let (_, running) = start(&client, json!({"command": "echo $$; exec sleep 1000"})).await;
    mcp::printed_pids(&client, &running, 1).await;
    let mut queued = Vec::new();
    for n in 1..=3 {
        let command = format!("echo {n} >> {}", order.display());
        queued.push(start(&client, json!({"command": command})).await.1);
    }
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    drop(client);
    let records = crate::state::records(&dir.join("state"));
    for id in &queued {
        assert_eq!(records[id]["status"], "queued", "{}", records[id]);
    }

    let mut next = queue_host(&dir, 1);
    let ran = eventually(Duration::from_secs(30), || {
        std::fs::read_to_string(&order).is_ok_and(|o| o.lines().count() == 3)
    });
    assert!(
        ran,
        "the queued tasks ran: {:?}",
        std::fs::read_to_string(&order)
    );
    assert_eq!(std::fs::read_to_string(&order).unwrap(), "1\n2\n3\n");
    let completed = eventually(Duration::from_secs(30), || {
        let records = crate::state::records(&dir.join("state"));
        queued.iter().all(|id| records[id]["status"] == "completed")
    });
    assert!(completed, "{:?}", crate::state::records(&dir.join("state")));
    next.stop();
    let records = crate::state::records(&dir.join("state"));
    assert_eq!(records[&running]["status"], "lost");
}

#[test]
fn the_view_lists_queued_tasks() {
    let dir = scratch("queue-view");
    let config = config(&dir, 1);
    let (host, _, _) = crate::web::web_host(&dir, &["--no-watch", "--config", &config]);
    let token = host.token("alice");
    let client = Client::new(&host, &token);
    crate::web::start(&client, "sleep 30");
    let queued = crate::web::start(&client, "true");
    let bearer = format!("Bearer {token}");
    let listed = crate::web::get(&host, "GET", "/api/tasks", &[("Authorization", &bearer)]);
    assert_eq!(listed.status, 200, "{listed:?}");
    let tasks: serde_json::Value = serde_json::from_str(&listed.body).unwrap();
    let row = tasks
        .as_array()
        .or_else(|| tasks["tasks"].as_array())
        .and_then(|rows| rows.iter().find(|r| r["id"] == queued.as_str()))
        .unwrap_or_else(|| panic!("{queued} is not listed: {}", listed.body))
        .clone();
    assert_eq!(row["status"], "queued", "{row}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_hosts_queued_task_stays_queued_and_runs_on_the_next_host() {
    let dir = scratch("queue-stop");
    let marker = dir.join("ran");
    let mut host = queue_host(&dir, 1);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let (_, running) = start(&client, json!({"command": "exec sleep 1000"})).await;
    let touch = format!("touch {}", marker.display());
    let (_, queued) = start(&client, json!({"command": touch})).await;
    host.stop();
    drop(client);
    let records = crate::state::records(&dir.join("state"));
    assert_eq!(
        records[&running]["status"], "killed",
        "{}",
        records[&running]
    );
    assert_eq!(records[&queued]["status"], "queued", "{}", records[&queued]);
    assert!(!marker.exists(), "it ran while its host stopped");

    let mut next = queue_host(&dir, 1);
    let ran = eventually(Duration::from_secs(30), || marker.exists());
    assert!(ran, "the next host ran the queued task");
    next.stop();
}

/// A task the keeper handed to the next host keeps its slot there: with `max_running = 1`, a start
/// on the next host queues behind it, and runs once the handed task ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handed_over_task_holds_its_slot_on_the_next_host() {
    let dir = scratch("queue-handed");
    let marker = dir.join("ran");
    let path = dir.join("handed.toml");
    std::fs::write(
        &path,
        "[tasks]\nmax_running = 1\n[host]\nhandover_grace_ms = 60000\n",
    )
    .unwrap();
    let (config, state) = (
        path.display().to_string(),
        dir.join("state").display().to_string(),
    );
    let args = ["--no-watch", "--config", &config, "--state", &state];
    let mut host = SocketHost::start(&dir, &args);
    let client = mcp::socket_client(&host.socket, Watcher::default()).await;
    let (_, handed) = start(&client, json!({"command": "echo $$; exec sleep 1000"})).await;
    let pid = mcp::printed_pids(&client, &handed, 1).await[0];
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    drop(client);

    let mut next = SocketHost::start(&dir, &args);
    let client = mcp::socket_client(&next.socket, Watcher::default()).await;
    let touch = format!("touch {}", marker.display());
    let (answer, queued) = start(&client, json!({"command": touch})).await;
    assert_eq!(
        answer,
        format!("queued background task {queued} (0 ahead of it)"),
        "the handed task holds the only slot"
    );
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let ran = eventually(Duration::from_secs(30), || marker.exists());
    assert!(ran, "the queued task ran once the handed task ended");
    client.cancel().await.expect("close");
    next.stop();
}
