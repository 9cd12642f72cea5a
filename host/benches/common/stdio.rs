//! The release host as an agent drives it over stdio: a client of its MCP server, and one run of
//! background commands started and read to their ends, every output checked byte for byte.

use std::path::Path;
use std::time::Instant;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use super::profile_dir;

/// An MCP client over a child's stdio.
pub type Client = RunningService<RoleClient, ()>;

/// Lines each benchmark command prints.
pub const LINES: usize = 20;

/// Benchmark command `i`: `LINES` numbered lines, no other output.
pub fn command(i: usize) -> String {
    format!("for j in $(seq 1 {LINES}); do echo \"task {i} line $j\"; done")
}

/// What command `i` prints.
pub fn expected(i: usize) -> String {
    (1..=LINES)
        .map(|j| format!("task {i} line {j}\n"))
        .collect()
}

/// Writes a host config at `path` with `tasks` as its `[tasks]` table and the release bash and
/// tasks plugins.
pub fn write_config(path: &Path, tasks: &str) {
    let profile = profile_dir();
    std::fs::write(
        path,
        format!(
            "[tasks]\n{tasks}\n\n[[plugin]]\npath = \"{}\"\n\n[[plugin]]\npath = \"{}\"\n",
            profile.join("libtaskhost_plugin_bash.so").display(),
            profile.join("libtaskhost_plugin_tasks.so").display()
        ),
    )
    .expect("taskhost config");
}

/// The release host serving MCP on stdio with `config`, its state under `dir/state-home` (the
/// default state directory there), `extra` arguments after `serve`.
pub async fn serve(config: &Path, dir: &Path, extra: &[&str]) -> Client {
    let mut cmd = tokio::process::Command::new(profile_dir().join("taskhost"));
    cmd.args(["serve", "--no-watch", "--config"])
        .arg(config)
        .args(extra)
        .env("XDG_STATE_HOME", dir.join("state-home"))
        .env("RUST_LOG", "error");
    ().serve(TokioChildProcess::new(cmd).expect("spawn taskhost"))
        .await
        .expect("handshake")
}

/// A call's first text.
pub async fn call(client: &Client, tool: &str, args: Value) -> String {
    answer(client, tool, args).await.0
}

/// A call's first text and the task it started (its result's `_meta`).
pub async fn answer(client: &Client, tool: &str, args: Value) -> (String, Option<String>) {
    let Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let result = client
        .peer()
        .call_tool(CallToolRequestParams::new(tool.to_owned()).with_arguments(args))
        .await
        .expect("call");
    let started = serde_json::to_value(&result)
        .ok()
        .and_then(|r| taskhost_tests::started_task(&r));
    let text = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default();
    (text, started)
}

/// One taskhost run of `tasks` commands: seconds to start all, and to start all and collect every
/// output.
pub async fn taskhost_run(client: &Client, tasks: usize) -> (f64, f64) {
    let t = Instant::now();
    let mut ids = Vec::with_capacity(tasks);
    for i in 0..tasks {
        let (text, started) = answer(
            client,
            "bash",
            json!({"command": command(i), "run_in_background": true}),
        )
        .await;
        ids.push(started.unwrap_or_else(|| panic!("not started: {text}")));
    }
    let started = t.elapsed().as_secs_f64();
    for (i, id) in ids.iter().enumerate() {
        let text = call(
            client,
            "task_output",
            json!({"task_id": id, "wait": true, "timeout_ms": 60000}),
        )
        .await;
        assert_eq!(
            text,
            format!("{}[status: completed, exit code: 0]", expected(i)),
            "taskhost output of task {i}"
        );
    }
    (started, t.elapsed().as_secs_f64())
}
