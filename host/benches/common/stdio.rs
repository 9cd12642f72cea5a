//! The release host as an agent drives it over stdio, through the plain line client the
//! side-by-side rows share ([`super::lines`]): one run of background commands started and read to
//! their ends, every output checked byte for byte.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use super::lines::LineClient;
use super::profile_dir;

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
pub fn serve(config: &Path, dir: &Path, extra: &[&str]) -> LineClient {
    let mut cmd = std::process::Command::new(profile_dir().join("taskhost"));
    cmd.args(["serve", "--no-watch", "--config"])
        .arg(config)
        .args(extra)
        .env("XDG_STATE_HOME", dir.join("state-home"))
        .env("RUST_LOG", "error");
    LineClient::start(cmd)
}

/// One taskhost run of `tasks` commands: seconds to start all, and to start all and collect every
/// output, each checked byte for byte.
pub fn taskhost_run(client: &mut LineClient, tasks: usize) -> (f64, f64) {
    let t = Instant::now();
    let ids: Vec<String> = (0..tasks)
        .map(|i| {
            let args = json!({"command": command(i), "run_in_background": true});
            let (text, started) = client.call("bash", args);
            started.unwrap_or_else(|| panic!("not started: {text}"))
        })
        .collect();
    let started = t.elapsed().as_secs_f64();
    for (i, id) in ids.iter().enumerate() {
        let args = json!({"task_id": id, "wait": true, "timeout_ms": 60000});
        let (text, _) = client.call("task_output", args);
        assert_eq!(
            text,
            format!("{}[status: completed, exit code: 0]", expected(i)),
            "taskhost output of task {i}"
        );
    }
    (started, t.elapsed().as_secs_f64())
}
