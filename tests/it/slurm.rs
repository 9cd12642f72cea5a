//! The Slurm producer against a real single-node cluster (`scripts/slurm-up`, which `.ci/run` starts):
//! jobs as tasks that read, list, wait and die like local ones. Each test says it was skipped when no
//! cluster runs here.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fixtures::*;

/// The cluster's slurm.conf when `scripts/slurm-up` has a cluster running, else `None` (and the
/// test says it was skipped), unless `TASKHOST_REQUIRE_SLURM=1` (CI), which makes a missing cluster
/// fail the test.
fn cluster(test: &str) -> Option<PathBuf> {
    let conf = std::env::var_os("TASKHOST_SLURM_CONF").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/slurm/etc/slurm.conf"),
        PathBuf::from,
    );
    let up = conf.is_file()
        && std::process::Command::new("sinfo")
            .args(["-h", "-o", "%t"])
            .env("SLURM_CONF", &conf)
            .output()
            .is_ok_and(|o| o.status.success() && !o.stdout.is_empty());
    // CI starts a cluster and sets this: there, a cluster that did not come up fails the test.
    let required = std::env::var_os("TASKHOST_REQUIRE_SLURM").is_some_and(|v| v == "1");
    assert!(
        up || !required,
        "{test}: TASKHOST_REQUIRE_SLURM=1 and no Slurm cluster answers at {}",
        conf.display()
    );
    if !up {
        eprintln!(
            "{test}: skipped: no Slurm cluster is running (scripts/slurm-up starts one as root)"
        );
    }
    up.then_some(conf)
}

/// A host with tasks and slurm (output under the test's directory), one session `s`.
fn host(name: &str, conf: &std::path::Path, extra: Value) -> Fixture {
    let f = Fixture::new(name);
    let out = f.dir.join("slurm-out");
    std::fs::create_dir_all(&out).unwrap();
    set_mode(&out, 0o755);
    let mut config = json!({
        "slurm_conf": conf.display().to_string(),
        "output_dir": out.display().to_string(),
        "poll_ms": 300,
    });
    if let (Some(c), Some(e)) = (config.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    let slurm = plugin_copy("taskhost_plugin_slurm", &f.dir, &format!("slurm_{name}"));
    f.host
        .plugins()
        .load(&slurm, Some(config.to_string()), false)
        .expect("slurm");
    f.load("taskhost_plugin_tasks", &format!("tasks_{name}"));
    f.host.sessions().open("s");
    f
}

/// Starts a background job; returns (task id, job id).
fn submit(f: &Fixture, args: Value) -> (String, String) {
    let mut args = args;
    args["run_in_background"] = json!(true);
    let text = f.call("slurm", "s", args);
    let rest = text
        .strip_prefix("started background slurm job ")
        .unwrap_or_else(|| panic!("not started: {text}"));
    let (task, job) = rest.split_once(" (job ").unwrap();
    (task.to_owned(), job.trim_end_matches(')').to_owned())
}

fn squeue_lists(conf: &std::path::Path, job: &str) -> bool {
    let out = std::process::Command::new("squeue")
        .args(["-h", "-j", job, "-o", "%T"])
        .env("SLURM_CONF", conf)
        .output()
        .unwrap();
    !String::from_utf8_lossy(&out.stdout).trim().is_empty()
}

fn wait_end(f: &Fixture, id: &str, secs: u64) -> String {
    f.call(
        "task_output",
        "s",
        json!({"task_id": id, "wait": true, "timeout_ms": secs * 1000}),
    )
}

/// Proves: a job's output arrives while it runs (two reads, each with new lines, the job still
/// running), it is named after its task, and it completes with its exit code.
#[test]
fn a_jobs_output_arrives_while_it_runs_and_it_completes_with_its_exit_code() {
    let Some(conf) = cluster("a_jobs_output_arrives_while_it_runs") else {
        return;
    };
    let f = host("slurm-stream", &conf, json!({}));
    let (id, job) = submit(
        &f,
        json!({"command": "for i in 1 2 3 4 5 6; do echo line $i; sleep 1; done", "description": "count"}),
    );
    let listed = f.call("task_list", "s", json!({}));
    assert!(
        listed.contains(&format!("{id} [slurm] running — count")),
        "{listed}"
    );
    let first = f.call(
        "task_output",
        "s",
        json!({"task_id": id, "wait_for": "line 2", "timeout_ms": 60000}),
    );
    assert!(
        first.contains("line 1\nline 2\n") && first.ends_with("[status: running]"),
        "{first}"
    );
    let second = f.call(
        "task_output",
        "s",
        json!({"task_id": id, "wait_for": "line 4", "timeout_ms": 60000}),
    );
    assert!(
        !second.contains("line 1") && second.contains("line 4"),
        "{second}"
    );
    let name = std::process::Command::new("squeue")
        .args(["-h", "-j", &job, "-o", "%j"])
        .env("SLURM_CONF", &conf)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&name.stdout).trim(),
        id,
        "the job is named after its task"
    );
    let end = wait_end(&f, &id, 60);
    assert!(
        end.ends_with("line 6\n[status: completed, exit code: 0]"),
        "{end}"
    );
}

/// Proves: a job that exits 3 settles `failed` with Slurm's state and the exit code (Slurm calls a
/// non-zero exit FAILED), in the background and in the foreground.
#[test]
fn a_job_that_exits_3_settles_failed_with_its_exit_code() {
    let Some(conf) = cluster("a_job_that_exits_3_settles_failed") else {
        return;
    };
    let f = host("slurm-exit3", &conf, json!({}));
    let (id, _) = submit(&f, json!({"command": "echo about to fail; exit 3"}));
    let end = wait_end(&f, &id, 60);
    assert_eq!(end, "about to fail\n[status: failed, FAILED, exit code: 3]");
    let fg = f.call("slurm", "s", json!({"command": "echo in front; exit 3"}));
    assert_eq!(fg, "in front\n[failed: FAILED, exit code: 3]");
    let ok = f.call("slurm", "s", json!({"command": "echo fine"}));
    assert_eq!(ok, "fine\n[exit code: 0]");
}

/// Proves: `task_kill` of a running job cancels it in the controller (squeue no longer lists it) and
/// the task settles killed.
#[test]
fn task_kill_cancels_a_running_job_in_the_controller() {
    let Some(conf) = cluster("task_kill_cancels_a_running_job") else {
        return;
    };
    let f = host("slurm-kill", &conf, json!({}));
    let (id, job) = submit(&f, json!({"command": "echo started; sleep 300"}));
    f.call(
        "task_output",
        "s",
        json!({"task_id": id, "wait_for": "started", "timeout_ms": 60000}),
    );
    assert_eq!(
        f.call("task_kill", "s", json!({"task_id": id})),
        format!("requested cancellation of task {id}")
    );
    let end = wait_end(&f, &id, 60);
    assert!(end.ends_with("[status: killed, CANCELLED]"), "{end}");
    assert!(!squeue_lists(&conf, &job), "squeue still lists job {job}");
}

/// Proves: a job over its time limit settles failed with TIMEOUT (Slurm enforces a one-minute limit
/// 60-95 s after the start).
#[test]
fn a_job_over_its_time_limit_settles_failed_with_timeout() {
    let Some(conf) = cluster("a_job_over_its_time_limit") else {
        return;
    };
    let f = host("slurm-timeout", &conf, json!({}));
    let (id, _) = submit(&f, json!({"command": "sleep 600", "time_limit": "1"}));
    let end = wait_end(&f, &id, 240);
    assert!(end.contains("[status: failed, TIMEOUT"), "{end}");
}

/// Proves: the owner's disconnect cancels its running jobs in the controller.
#[test]
fn the_owners_end_cancels_its_jobs() {
    let Some(conf) = cluster("the_owners_end_cancels_its_jobs") else {
        return;
    };
    let f = host("slurm-owner", &conf, json!({}));
    let jobs: Vec<String> = (0..2)
        .map(|_| submit(&f, json!({"command": "sleep 300"})).1)
        .collect();
    assert!(eventually(Duration::from_secs(30), || jobs
        .iter()
        .all(|j| squeue_lists(&conf, j))));
    f.rt.block_on(f.host.close_session("s"));
    assert!(
        eventually(Duration::from_secs(30), || jobs
            .iter()
            .all(|j| !squeue_lists(&conf, j))),
        "jobs {jobs:?} outlived their session"
    );
}

/// Proves: reloading the slurm plugin while jobs run loses no output, and every job settles once.
#[test]
fn a_reload_of_slurm_while_jobs_run_loses_no_output() {
    let Some(conf) = cluster("a_reload_of_slurm_while_jobs_run") else {
        return;
    };
    let f = host("slurm-reload", &conf, json!({}));
    let settled = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = settled.clone();
    let _l = f
        .host
        .registry()
        .on_task_done(std::sync::Arc::new(move |s, _| {
            seen.lock().unwrap().push(s.id.to_string())
        }));
    let ids: Vec<String> = (0..3)
        .map(|n| submit(&f, json!({"command": format!("for i in $(seq 1 4); do echo job {n} line $i; sleep 0.5; done")})).0)
        .collect();
    let slurm = f
        .host
        .plugins()
        .paths()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("slurm_slurm-reload"))
        .unwrap();
    for _ in 0..3 {
        f.host.plugins().load(&slurm, None, false).expect("reload");
        std::thread::sleep(Duration::from_millis(300));
    }
    for (n, id) in ids.iter().enumerate() {
        let mut all = String::new();
        let deadline = Instant::now() + Duration::from_secs(90);
        let status = loop {
            let text = wait_end(&f, id, 30);
            let (body, status) = split_status(&text);
            all.push_str(body.trim_end_matches("(no new output)\n"));
            if status != "[status: running]" {
                break status.to_owned();
            }
            assert!(Instant::now() < deadline, "{id} never settled");
        };
        let expected: String = (1..=4).map(|i| format!("job {n} line {i}\n")).collect();
        assert_eq!(
            (all.as_str(), status.as_str()),
            (expected.as_str(), "[status: completed, exit code: 0]")
        );
    }
    assert!(eventually(Duration::from_secs(5), || settled
        .lock()
        .unwrap()
        .len()
        == 3));
    let mut once = settled.lock().unwrap().clone();
    once.sort();
    once.dedup();
    assert_eq!(
        once.len(),
        3,
        "every job settled once: {:?}",
        settled.lock().unwrap()
    );
}

/// Proves: a bad partition and a controller that does not answer are clear tool errors, and nothing
/// is registered. (Bad arguments, refused before anything reaches the cluster, are the plugin's unit
/// tests.)
#[test]
fn bad_submissions_are_clear_errors_and_register_nothing() {
    let Some(conf) = cluster("bad_submissions_are_clear_errors") else {
        return;
    };
    let f = host("slurm-bad", &conf, json!({}));
    let bad_partition = f.call(
        "slurm",
        "s",
        json!({"command": "true", "partition": "nope", "run_in_background": true}),
    );
    assert!(
        bad_partition.starts_with("Error: sbatch: ") && bad_partition.contains("invalid partition"),
        "{bad_partition}"
    );
    assert_eq!(f.call("task_list", "s", json!({})), "(no background tasks)");

    // A controller that does not answer: the same cluster's config with a port nobody listens on.
    let down = f.dir.join("down.conf");
    let text = std::fs::read_to_string(&conf).unwrap();
    std::fs::write(
        &down,
        format!("{text}\nSlurmctldPort=9\nMessageTimeout=2\n"),
    )
    .unwrap();
    let g = host("slurm-down", &down, json!({}));
    let refused = g.call(
        "slurm",
        "s",
        json!({"command": "true", "run_in_background": true}),
    );
    assert!(refused.starts_with("Error: sbatch: "), "{refused}");
    assert_eq!(g.call("task_list", "s", json!({})), "(no background tasks)");
}

/// Proves: a command cannot rewrite its own job. Its `#SBATCH` lines (another partition, another
/// output file) are not read: the job runs in the partition the deployment chose (the cluster's
/// default here, since the config names none) and writes where the host reads. The output
/// directory the plugin makes is 0700.
#[test]
fn a_commands_own_sbatch_lines_do_not_change_its_job() {
    let Some(conf) = cluster("a_commands_own_sbatch_lines_do_not_change_its_job") else {
        return;
    };
    let fresh = std::env::temp_dir().join(format!("slurm-fresh-{}", std::process::id()));
    let f = host(
        "slurm-rewrite",
        &conf,
        json!({"output_dir": fresh.display().to_string()}),
    );
    let elsewhere = f.dir.join("elsewhere.out");
    let text = f.call(
        "slurm",
        "s",
        json!({"command": format!(
            "#SBATCH --partition=other\n#SBATCH --output={}\necho partition=$SLURM_JOB_PARTITION",
            elsewhere.display()
        )}),
    );
    assert!(text.contains("partition=debug"), "{text}");
    assert!(text.ends_with("[exit code: 0]"), "{text}");
    assert!(!elsewhere.exists(), "the job wrote where its command said");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
    std::fs::remove_dir_all(&fresh).unwrap();
    assert_eq!(mode & 0o777, 0o700, "the output directory's mode");
}

/// Proves the handover of a job: a job started before its host is SIGKILLed keeps running on the
/// cluster; the next host of the same state directory takes it over by its job id; its owner (a
/// bridge that comes back) reads on from where its reads stood (the line it read is not repeated,
/// the line written since is not lost), and it settles with the job's real end, in the records too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_outlives_its_host_and_the_next_host_settles_it_with_its_real_end() {
    let Some(conf) = cluster("a_job_outlives_its_host") else {
        return;
    };
    let dir = scratch("slurm-handover");
    let out = dir.join("slurm-out");
    std::fs::create_dir_all(&out).unwrap();
    set_mode(&out, 0o755);
    let go = dir.join("go");
    let config = dir.join("taskhost.toml");
    let plugin = |name: &str| {
        artifacts()
            .join(format!("libtaskhost_plugin_{name}.so"))
            .display()
            .to_string()
    };
    std::fs::write(
        &config,
        format!(
            "[[plugin]]\npath = \"{}\"\n\n[[plugin]]\npath = \"{}\"\nconfig = {{ slurm_conf = \"{}\", output_dir = \"{}\", poll_ms = 300 }}\n",
            plugin("tasks"),
            plugin("slurm"),
            conf.display(),
            out.display()
        ),
    )
    .unwrap();
    let state = dir.join("state");
    let args = [
        "--no-watch",
        "--state",
        state.to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
    ];
    let mut host = crate::mcp::SocketHost::start(&dir, &args);
    let (a, _) = crate::clients::bridged(&host.socket, crate::mcp::Watcher::default(), &[]).await;
    let command = format!(
        "echo first; while [ ! -e {} ]; do sleep 0.2; done; echo second; exit 3",
        go.display()
    );
    let started = crate::mcp::call(
        &a,
        "slurm",
        json!({"command": command, "run_in_background": true}),
    )
    .await;
    let id = started
        .strip_prefix("started background slurm job ")
        .and_then(|rest| rest.split_once(' '))
        .map(|(id, _)| id.to_owned())
        .unwrap_or_else(|| panic!("not started: {started}"));
    let first = crate::mcp::call(
        &a,
        "task_output",
        json!({"task_id": id, "wait_for": "first", "timeout_ms": 60000}),
    )
    .await;
    assert!(first.starts_with("first\n"), "{first}");
    host.child.kill().unwrap();
    host.child.wait().unwrap();
    let _next = crate::mcp::SocketHost::start(&dir, &args);
    std::fs::write(&go, "").unwrap();

    let end = crate::mcp::call(
        &a,
        "task_output",
        json!({"task_id": id, "wait": true, "timeout_ms": 60000}),
    )
    .await;
    assert!(
        end.starts_with("second\n") && end.contains("[status: failed, FAILED, exit code: 3]"),
        "read on from where it stood, settled with its real end: {end}"
    );
    let records = output_within(
        std::process::Command::new(crate::mcp::binary())
            .args(["tasks", "--json", "--state"])
            .arg(&state),
        Duration::from_secs(30),
    );
    let line = String::from_utf8_lossy(&records.stdout)
        .lines()
        .find(|l| l.contains(&format!("\"{id}\"")))
        .map(str::to_owned)
        .unwrap_or_default();
    let record: Value = serde_json::from_str(&line).expect("the job's record");
    assert_eq!(record["status"], "failed", "{record}");
    assert_eq!(record["detail"], "FAILED, exit code: 3", "{record}");
    a.cancel().await.expect("close");
}
